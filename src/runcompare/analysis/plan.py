"""What another layout would cost: the ways to reach a target global batch on a cluster, from a
measured per-device throughput and the batch arithmetic (:func:`~runcompare.batch.plan_batch`).

For a target global batch G, a micro-batch m and a cluster of N devices (data parallel), the
ways are

    accumulation        N devices × m × (G ÷ (m·N))      the micro-batch kept, steps accumulated
    more devices        G ÷ m devices × m × 1            no accumulation, more devices
    bigger micro-batch  N devices × (G ÷ N) × 1          no accumulation, a bigger forward pass

each with its accumulation, micro-steps, tokens per step and tokens in total; the wall-clock is
total tokens ÷ (tokens/s per device × devices), ideal and ÷ the measured productive fraction.
The tokens/s per device is given, or measured from a run's training time
(:func:`~.goodput.goodput`), and taken as constant across layouts: the all-reduce cost of more
devices is not modelled, nor is the faster (or out-of-memory) forward pass of a bigger
micro-batch, whose activation memory the logs do not show.

>>> p = plan(global_batch=4096, devices=256, micro_batch=8, seq_len=1024,
...          budget=100e9, tokens_per_second=1.2e6)
>>> o = p.options[0]
>>> o.name, o.grad_accum, o.max_steps, o.total_tokens, round(o.hours_ideal, 1)
('accumulation', 2, 23842, 100000595968, 23.1)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ..batch import plan_batch
from ..errors import InputError, MissingInfoError
from ..model import Finding, Run
from .goodput import goodput, parse_budget

__all__ = ["ASSUMPTIONS", "Plan", "PlanOption", "plan"]

ASSUMPTIONS = (
    "the tokens/s per device is the same in every layout",
    ("the all-reduce cost of more devices is not modelled (runs at two world sizes would "
     "measure it)"),
    "the activation memory of a bigger micro-batch is not known from logs: check that it fits",
)


@dataclass(frozen=True)
class PlanOption:
    """One layout reaching the target global batch, and what it costs."""

    name: str
    devices: int
    micro_batch: int
    grad_accum: int
    global_batch: int
    tokens_per_step: int
    max_steps: int
    micro_steps: int
    total_tokens: int
    hours_ideal: float | None
    hours_at_goodput: float | None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["notes"] = list(self.notes)
        return out


@dataclass
class Plan:
    """The layouts (``options``), the throughput they assume and where it came from."""

    global_batch: int
    seq_len: int
    options: list[PlanOption]
    tokens_per_second_per_device: float | None
    rate_source: str
    productive_fraction: float | None
    assumptions: tuple[str, ...] = ASSUMPTIONS
    findings: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"global_batch": self.global_batch, "seq_len": self.seq_len,
                "tokens_per_second_per_device": self.tokens_per_second_per_device,
                "rate_source": self.rate_source,
                "productive_fraction": self.productive_fraction,
                "options": [o.to_json() for o in self.options],
                "assumptions": list(self.assumptions),
                "findings": [f.to_json() for f in self.findings]}


def plan(*, global_batch: int, devices: int, micro_batch: int | None = None,
         seq_len: int | None = None, max_steps: int | None = None,
         budget: float | str | None = None, tokens_per_second: float | str | None = None,
         tokens_per_second_per_device: float | str | None = None, run: Run | None = None,
         goodput_fraction: float | None = None) -> Plan:
    """The ways to reach ``global_batch`` on ``devices`` (see the module).

    ``tokens_per_second`` is the whole cluster's rate at ``devices``; or give it per device;
    or a ``run`` whose measured training rate per device (and goodput) is used. ``run`` also
    supplies the micro-batch and sequence length when they are not given. The length of
    training is ``max_steps`` or a token ``budget`` (steps rounded up to reach it).
    """
    micro = micro_batch or (run.batch.per_device_batch.value if run is not None else None)
    seq = seq_len or (run.batch.seq_len.value if run is not None else None)
    if micro is None:
        raise MissingInfoError("the micro-batch is unknown: pass --micro-batch N (or a run "
                               "whose per_device_batch is known)")
    if seq is None:
        raise MissingInfoError("the sequence length is unknown: pass --seq-len N (or --set "
                               "seq_len=N for the run)")
    rate, source, fraction, findings = _rate(
        devices, parse_budget(tokens_per_second, option="--tokens-per-second"),
        parse_budget(tokens_per_second_per_device, option="--tokens-per-second-per-device"),
        run)
    if goodput_fraction is not None:
        fraction = goodput_fraction
    steps = _steps(global_batch, seq, max_steps, budget)
    layouts = _layouts(global_batch, devices, micro)
    options = [_option(name, n, m, global_batch, seq, steps, rate, fraction, devices, micro)
               for name, n, m in layouts]
    return Plan(global_batch=global_batch, seq_len=seq, options=options,
                tokens_per_second_per_device=rate, rate_source=source,
                productive_fraction=fraction, findings=findings)


def _rate(devices: int, total: float | None, per_device: float | None,
          run: Run | None) -> tuple[float | None, str, float | None, list[Finding]]:
    if per_device is not None:
        return per_device, "given (--tokens-per-second-per-device)", None, []
    if total is not None:
        return total / devices, f"given: {total:,.6g} tokens/s ÷ {devices:,} devices", None, []
    if run is None:
        return None, "none given: wall-clock not projected", None, [
            Finding("info", "no-throughput", "no throughput given: pass --tokens-per-second, "
                    "--tokens-per-second-per-device or --from RUN to project wall-clock")]
    measured = goodput(run)
    if measured.axis != "tokens" or measured.rate_per_device is None:
        raise MissingInfoError(f"run {run.name!r} gives no tokens/s per device: it needs the "
                               f"sequence length and world size (--set {run.name}:seq_len=N "
                               f"and {run.name}:world_size=N)")
    return (measured.rate_per_device, f"measured: {run.name}'s training time",
            measured.productive_fraction, measured.findings)


def _steps(global_batch: int, seq_len: int, max_steps: int | None,
           budget: float | str | None) -> int:
    """Optimizer steps: given, or the fewest whose tokens reach the budget."""
    if max_steps is not None:
        return max_steps
    tokens = parse_budget(budget)
    if tokens is None:
        raise MissingInfoError("the length of training is unknown: pass --max-steps N or "
                               "--budget TOKENS (e.g. 100B)")
    return math.ceil(tokens / (global_batch * seq_len))  # steps of global × seq_len tokens


def _layouts(global_batch: int, devices: int, micro: int) -> list[tuple[str, int, int]]:
    """(name, devices, micro-batch) of each way, those that divide evenly, without repeats."""
    candidates = [("accumulation", devices, micro),
                  ("more devices", global_batch // micro if global_batch % micro == 0 else 0,
                   micro),
                  ("bigger micro-batch", devices,
                   global_batch // devices if global_batch % devices == 0 else 0)]
    seen: set[tuple[int, int]] = set()
    out = []
    for name, n, m in candidates:
        if n < 1 or m < 1 or (n, m) in seen:
            continue
        seen.add((n, m))
        out.append((name, n, m))
    if not out:
        raise InputError(f"global batch {global_batch:,} is reached by no layout of micro-batch "
                         f"{micro} on {devices:,} devices")
    return out


def _option(name: str, devices: int, micro: int, global_batch: int, seq_len: int, steps: int,
            rate: float | None, fraction: float | None, cluster: int,
            measured_micro: int) -> PlanOption:
    hierarchy = plan_batch(per_device_batch=micro, world_size=devices, global_batch=global_batch,
                           seq_len=seq_len, max_steps=steps)
    notes = [f.message for f in hierarchy.findings]
    if devices > cluster:
        notes.append(f"needs {devices:,} devices; the cluster has {cluster:,}")
    if micro > measured_micro:
        notes.append(f"micro-batch {micro} > {measured_micro}: its activation memory is not "
                     "known from logs")
    total = hierarchy.total_tokens or 0
    ideal = total / (rate * devices) / 3600 if rate else None  # hours at the per-device rate
    return PlanOption(name=name, devices=devices, micro_batch=micro,
                      grad_accum=hierarchy.grad_accum, global_batch=hierarchy.global_batch,
                      tokens_per_step=hierarchy.tokens_per_step or 0, max_steps=steps,
                      micro_steps=hierarchy.micro_steps or 0, total_tokens=total,
                      hours_ideal=ideal,
                      hours_at_goodput=ideal / fraction if ideal is not None and fraction
                      else None, notes=tuple(notes))
