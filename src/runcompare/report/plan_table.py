"""What ``runcompare batch`` prints, and the findings every terminal output ends with; this
module loads no polars (``runcompare batch`` starts as fast as ``--help``)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..batch import BatchPlan
from ..display import fmt, listing, terminal_text
from ..model import Finding
from .grouped import group_findings

__all__ = ["print_findings", "print_plan"]


_STYLES = {"error": "bold red", "warning": "yellow", "info": "dim"}


def print_findings(console: Console, findings: Sequence[Finding], *,
                   grouped: bool = False) -> None:
    """One line per finding: level, code, run and message; ``grouped`` (a sweep): one line per
    level and code, with how many there are, which runs they concern and the first wording."""
    if grouped:
        for group in group_findings(findings):
            others = len(group.messages) - 1
            wording = f" (and {others} other wording{'s' if others != 1 else ''})" if others else ""
            runs = f"; runs: {listing(group.runs)}" if group.runs else ""
            console.print(Text(terminal_text(
                f"{group.level} [{group.code}] × {len(group.members):,} ({group.concerns}): "
                f"{group.messages[0]}{wording}{runs}"), style=_STYLES[group.level]))
        return
    for finding in findings:
        where = f"{finding.run}: " if finding.run else ""
        console.print(Text(terminal_text(f"{finding.level} [{finding.code}] {where}"
                                         f"{finding.message}"), style=_STYLES[finding.level]))


def print_plan(plan: BatchPlan, console: Console) -> None:
    """What ``runcompare batch`` shows: the four levels, then the run's totals."""
    table = Table(title="Batch hierarchy", title_justify="left")
    table.add_column("level")
    table.add_column("value", justify="right")
    table.add_column("arithmetic", style="dim")
    rows = (
        ("micro-batch", plan.per_device_batch, "sequences per forward pass per device"),
        ("per-device batch", plan.per_device_batch * plan.grad_accum,
         f"{plan.per_device_batch} × accumulation {plan.grad_accum}"),
        ("global batch", plan.global_batch,
         f"× data parallel {plan.data_parallel} (world {plan.world_size})"),
        ("tokens per step", plan.tokens_per_step, f"× sequence length {fmt(plan.seq_len)}"),
        ("optimizer steps", plan.max_steps, ""),
        ("micro-steps", plan.micro_steps, f"optimizer steps × {plan.grad_accum}"),
        ("total samples", plan.total_samples, "optimizer steps × global batch"),
        ("total tokens", plan.total_tokens, "optimizer steps × tokens per step"),
    )
    for label, value, how in rows:
        table.add_row(label, fmt(value), how)
    console.print(table)
    print_findings(console, plan.findings)
