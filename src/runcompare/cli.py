"""The command line: parse arguments, make one library call, print. ``compare`` is the default
command, so ``runcompare mamba/ attn/ --x tokens`` works."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from typer.core import TyperGroup

from .analysis.groups import parse_groups
from .batch import plan_batch
from .display import terminal_text
from .errors import RuncompareError
from .export import TB_STEP_UNITS
from .export import export as export_runs
from .load import load_many
from .model import Run
from .report import (
    default_report_path,
    print_comparison,
    print_plan,
    print_run,
    write_figures,
    write_report,
)

__all__ = ["app", "main"]

F = TypeVar("F", bound=Callable[..., Any])


class DefaultCommandGroup(TyperGroup):
    """Routes a first word that is not a command (a run path, an option) to ``compare``."""

    default = "compare"

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [self.default, *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=DefaultCommandGroup, no_args_is_help=True, add_completion=False,
                  rich_markup_mode=None,
                  help="Compare ML training runs from their logs on a fair axis.")

Settings = Annotated[list[str] | None, typer.Option(
    "--set", metavar="[RUN:]KEY=VALUE",
    help="A fact the logs lack, e.g. seq_len=1024 or attn:grad_accum=8.")]
SourceOpt = Annotated[str | None, typer.Option(
    "--source", help="Use only this source of a folder that holds several (e.g. hf-trainer).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
Duplicates = Annotated[str, typer.Option(
    "--duplicates", help="Steps a restarted leg logged again: keep-last, keep-first or all.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Reread every file.")]
PatternOpt = Annotated[str | None, typer.Option(
    "--pattern", help="A regular expression with named groups (step or iter, and one per "
    "metric) for text logs no other source reads; implies --source text.")]
SchedulerOpt = Annotated[str | None, typer.Option(
    "--scheduler", metavar="ADDRESS", help="Read the runs on the Dask cluster of this scheduler "
    "(e.g. tcp://10.0.0.5:8786; needs runcompare[dask]) instead of local processes.")]
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="A training config (e.g. Axolotl YAML) whose facts apply to every run.")]


def _console() -> Console:
    """Tables on stdout: 100 columns and no colour when it is not a terminal; no rich markup,
    so a name from a log (``[red]``, ``[/]``) prints as it is."""
    return Console(highlight=False, markup=False, width=100 if not sys.stdout.isatty() else None)


def _load(paths: list[Path], source: str | None, settings: list[str] | None,
          duplicates: str, no_cache: bool, config: Path | None,
          pattern: str | None, scheduler: str | None = None) -> list[Run]:
    """The runs the shared reading options describe, with a progress bar on a terminal."""
    with _reading() as progress:
        return load_many(paths, source=source, settings=settings or (), duplicates=duplicates,
                         cache=not no_cache, progress=progress, config=config,
                         pattern=pattern, workers=None, scheduler=scheduler)


@contextlib.contextmanager
def _reading() -> Iterator[Callable[[int, int, str], None] | None]:
    """A progress bar on stderr while runs are read, when stderr is a terminal."""
    console = Console(stderr=True, markup=False, highlight=False)
    if not console.is_terminal:
        yield None
        return
    with Progress(TextColumn("reading {task.description}"), BarColumn(),
                  MofNCompleteColumn(), console=console, transient=True) as bar:
        task = bar.add_task("runs", total=None)

        def update(done: int, total: int, name: str) -> None:
            bar.update(task, completed=done, total=total, description=terminal_text(name))

        yield update


def _errors(command: F) -> F:
    """Print a library error (or an OS error on a path) as one line on stderr and exit with its
    code (1 or 2)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except RuncompareError as exc:
            typer.echo(terminal_text(f"error: {exc}"), err=True)
            raise typer.Exit(exc.exit_code) from None
        except OSError as exc:  # an output path that cannot be written, a file that vanished
            where = f"{exc.filename}: " if exc.filename else ""
            typer.echo(terminal_text(f"error: {where}{exc.strerror or exc}"), err=True)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


@app.command()
@_errors
def compare(
    runs: Annotated[list[Path], typer.Argument(help="Run folders or log files.")],
    x: Annotated[str | None, typer.Option(
        "--x", help="Axis: step, micro_step, samples, tokens, epoch, elapsed, flops or "
        "device_hours (default: tokens, else samples, else step).")] = None,
    metric: Annotated[list[str] | None, typer.Option(
        "--metric", help="Metric to compare, or a glob such as 'train/*' (repeatable; "
        "default: all shared).")] = None,
    runs_like: Annotated[list[str] | None, typer.Option(
        "--runs", metavar="REGEX", help="Compare only the runs whose name matches (repeatable); "
        "with --top, these are compared beside the best N.")] = None,
    top: Annotated[int | None, typer.Option(
        "--top", metavar="N", help="Compare the best N runs by the verdict's metric at the "
        "common budget (plus those --runs names).")] = None,
    settings: Settings = None,
    smooth: Annotated[str | None, typer.Option(
        "--smooth", help="tb:WEIGHT (TensorBoard's EMA), a half-life in axis units such as "
        "50M, or a share of the range such as 5%.")] = None,
    target: Annotated[float | None, typer.Option(
        "--target", help="Value of the main metric to reach (default: the worst final).")] = None,
    group: Annotated[list[str] | None, typer.Option(
        "--group", metavar="NAME=RUN,RUN", help="Seed group (repeatable; default: runs "
        "identical but for the seed).")] = None,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Report path (default reports/<a>_vs_<b>.html).")] = None,
    as_json: JsonOpt = False,
    no_report: Annotated[bool, typer.Option("--no-report", help="Write no HTML report.")] = False,
    png: Annotated[bool, typer.Option(
        "--png", help="Also draw each chart as PNG beside the report (needs kaleido).")] = False,
    svg: Annotated[bool, typer.Option("--svg", help="Also draw each chart as SVG.")] = False,
    source: SourceOpt = None,
    duplicates: Duplicates = "keep-last",
    no_cache: NoCache = False,
    config: ConfigOpt = None,
    pattern: PatternOpt = None,
    scheduler: SchedulerOpt = None,
) -> None:
    """Compare runs: the verdict first, then batch hierarchy, summary, totals, findings; and
    the HTML report."""
    from .analysis.select import choose

    loaded = _load(runs, source, settings, duplicates, no_cache, config, pattern, scheduler)
    comparison = choose(loaded, patterns=runs_like or (), top=top, x=x, metrics=metric or None,
                        smooth=smooth, target=target,
                        groups=parse_groups(group or (), loaded) or None)
    report_path = output or default_report_path(comparison.runs)
    report = None if no_report else write_report(comparison, report_path)
    formats = tuple(f for f, wanted in (("png", png), ("svg", svg)) if wanted)
    if formats:
        write_figures(comparison, report_path.with_suffix(""), formats=formats)
    if as_json:
        typer.echo(json.dumps(comparison.to_json(report=str(report) if report else None),
                              indent=2, allow_nan=True))
    else:
        print_comparison(comparison, _console(), report=str(report) if report else None)


@app.command()
@_errors
def inspect(
    run: Annotated[Path, typer.Argument(help="A run folder or log file.")],
    settings: Settings = None,
    as_json: JsonOpt = False,
    source: SourceOpt = None,
    duplicates: Duplicates = "keep-last",
    no_cache: NoCache = False,
    config: ConfigOpt = None,
    pattern: PatternOpt = None,
) -> None:
    """What was found in a run (each run, for a folder of several): sources, batch hierarchy
    with the source of every number, metrics, findings."""
    loaded = _load([run], source, settings, duplicates, no_cache, config, pattern)
    if as_json:
        objects = [r.to_json() for r in loaded]
        typer.echo(json.dumps(objects[0] if len(objects) == 1 else objects, indent=2))
    else:
        for one in loaded:
            print_run(one, _console())


@app.command()
@_errors
def batch(
    per_device: Annotated[int, typer.Option("--per-device", help="Micro-batch per device.")],
    grad_accum: Annotated[int | None, typer.Option("--grad-accum")] = None,
    global_batch: Annotated[int | None, typer.Option(
        "--global-batch", help="Target global batch; accumulation is computed.")] = None,
    world_size: Annotated[int | None, typer.Option("--world-size")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes")] = None,
    devices_per_node: Annotated[int | None, typer.Option("--devices-per-node")] = None,
    dies_per_device: Annotated[int, typer.Option(
        "--dies-per-device", help="2 for dual-die cards that PyTorch sees as two devices.")] = 1,
    tp: Annotated[int, typer.Option("--tp", help="Tensor parallel size.")] = 1,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline parallel size.")] = 1,
    cp: Annotated[int, typer.Option("--cp", help="Context parallel size.")] = 1,
    seq_len: Annotated[int | None, typer.Option("--seq-len")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The batch hierarchy of a configuration: micro, per-device, global, tokens per step."""
    plan = plan_batch(per_device_batch=per_device, grad_accum=grad_accum,
                      global_batch=global_batch, world_size=world_size, nodes=nodes,
                      devices_per_node=devices_per_node, dies_per_device=dies_per_device,
                      tensor_parallel=tp, pipeline_parallel=pp, context_parallel=cp,
                      seq_len=seq_len, max_steps=max_steps)
    if as_json:
        typer.echo(json.dumps(plan.to_json(), indent=2))
    else:
        print_plan(plan, _console())


@app.command()
@_errors
def export(
    runs: Annotated[list[Path], typer.Argument(help="Run folders or log files.")],
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="Destination: a file (csv, jsonl) or a folder (parquet dataset, "
        "TensorBoard logdir).")],
    fmt: Annotated[str | None, typer.Option(
        "--format", help="parquet, csv, jsonl or tensorboard (default: from the output's "
        "suffix, else parquet).")] = None,
    x: Annotated[str | None, typer.Option(
        "--x", help="TensorBoard step: tokens (default), samples, micro_step, step, flops or "
        "device_hours (written as device-seconds).")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace an earlier export at the output path.")] = False,
    settings: Settings = None,
    source: SourceOpt = None,
    duplicates: Duplicates = "keep-last",
    no_cache: NoCache = False,
    config: ConfigOpt = None,
    pattern: PatternOpt = None,
    scheduler: SchedulerOpt = None,
) -> None:
    """Write every point of the runs as a parquet dataset, CSV, JSON lines or TensorBoard events."""
    loaded = _load(runs, source, settings, duplicates, no_cache, config, pattern, scheduler)
    done = export_runs(loaded, output, format=fmt, x=x, force=force)
    unit = f"; each step is {TB_STEP_UNITS[x]}" if x in TB_STEP_UNITS else ""
    typer.echo(terminal_text(f"wrote {done.points:,} points of {done.runs} run(s) as "
                             f"{done.format} to {done.url or done.path} ({len(done.files)} "
                             f"file(s)){unit}"))


HtmlOpt = Annotated[Path | None, typer.Option(
    "--html", help="Also write the chart(s) as a self-contained HTML page here.")]


@app.command("critical-batch")
@_errors
def critical_batch(
    runs: Annotated[list[Path], typer.Argument(help="Runs of one model at several global "
                                               "batches.")],
    metric: Annotated[str | None, typer.Option(
        "--metric", help="Metric to reach (default: eval/loss if every run has it, else "
        "train/loss).")] = None,
    target: Annotated[float | None, typer.Option(
        "--target", help="Value to reach (default: the worst best value, which every run "
        "reaches).")] = None,
    targets: Annotated[list[float] | None, typer.Option(
        "--targets", help="Targets of the B_crit curve (repeatable; default: five).")] = None,
    html_path: HtmlOpt = None,
    as_json: JsonOpt = False,
    settings: Settings = None,
    source: SourceOpt = None,
    duplicates: Duplicates = "keep-last",
    no_cache: NoCache = False,
    config: ConfigOpt = None,
    pattern: PatternOpt = None,
) -> None:
    """Critical batch size: steps and samples to a target per run, S_min, E_min, B_crit."""
    from .analysis.critical_batch import critical_batch as fit
    from .report.batchsci import critical_batch_section, print_critical_batch, write_page

    loaded = _load(runs, source, settings, duplicates, no_cache, config, pattern)
    result = fit(loaded, metric=metric, target=target, targets=targets or None)
    if html_path is not None:
        write_page(html_path, title="Critical batch", sections=[critical_batch_section(result)],
                   runs=loaded)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        print_critical_batch(result, _console())


@app.command("noise-scale")
@_errors
def noise_scale(
    run_a: Annotated[Path, typer.Argument(help="A run at one global batch.")],
    run_b: Annotated[Path, typer.Argument(help="The same model at another global batch.")],
    x: Annotated[str | None, typer.Option(
        "--x", help="Common axis: tokens or samples (default: tokens if both have it).")] = None,
    html_path: HtmlOpt = None,
    as_json: JsonOpt = False,
    settings: Settings = None,
    source: SourceOpt = None,
    duplicates: Duplicates = "keep-last",
    no_cache: NoCache = False,
    config: ConfigOpt = None,
    pattern: PatternOpt = None,
) -> None:
    """Simple gradient noise scale from the grad norms of two runs at different batches."""
    from .analysis.noise_scale import noise_scale as estimate
    from .report.batchsci import figure_section, noise_scale_figure, print_noise_scale, write_page

    loaded = _load([run_a, run_b], source, settings, duplicates, no_cache, config, pattern)
    result = estimate(*loaded, x=x)
    if html_path is not None:
        write_page(html_path, title="Gradient noise scale", runs=loaded, sections=[
            figure_section("B_simple over training", noise_scale_figure(result),
                           result.findings)])
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        print_noise_scale(result, _console())


@app.command()
@_errors
def goodput(
    runs: Annotated[list[Path], typer.Argument(help="Run folders or log files.")],
    budget: Annotated[str | None, typer.Option(
        "--budget", metavar="TOKENS", help="Token budget for an ETA, e.g. 100B.")] = None,
    html_path: HtmlOpt = None,
    as_json: JsonOpt = False,
    settings: Settings = None,
    source: SourceOpt = None,
    duplicates: Duplicates = "keep-last",
    no_cache: NoCache = False,
    config: ConfigOpt = None,
    pattern: PatternOpt = None,
) -> None:
    """Where the wall-clock went: training, evaluation, checkpointing, restarts, unexplained."""
    from .analysis.goodput import goodput as measure
    from .report.batchsci import goodput_section, print_goodput, write_page

    loaded = _load(runs, source, settings, duplicates, no_cache, config, pattern)
    results = [measure(run, budget=budget) for run in loaded]
    if html_path is not None:
        write_page(html_path, title="Goodput", runs=loaded,
                   sections=[goodput_section(g) for g in results])
    if as_json:
        objects = [g.to_json() for g in results]
        typer.echo(json.dumps(objects[0] if len(objects) == 1 else objects, indent=2))
    else:
        for result in results:
            print_goodput(result, _console())


@app.command()
@_errors
def plan(
    global_batch: Annotated[int, typer.Option("--global-batch", help="Target global batch.")],
    devices: Annotated[int, typer.Option("--devices", help="Devices in the cluster (data "
                                         "parallel).")],
    micro_batch: Annotated[int | None, typer.Option(
        "--micro-batch", help="Micro-batch per device (default: the --from run's).")] = None,
    seq_len: Annotated[int | None, typer.Option("--seq-len")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps")] = None,
    budget: Annotated[str | None, typer.Option(
        "--budget", metavar="TOKENS", help="Train on this many tokens, e.g. 100B.")] = None,
    tokens_per_second: Annotated[str | None, typer.Option(
        "--tokens-per-second", metavar="RATE",
        help="Measured tokens/s of the whole cluster at --devices, e.g. 1.2M.")] = None,
    per_device: Annotated[str | None, typer.Option(
        "--tokens-per-second-per-device", metavar="RATE",
        help="Measured tokens/s of one device.")] = None,
    from_run: Annotated[Path | None, typer.Option(
        "--from", help="A run whose measured per-device rate and goodput are used.")] = None,
    as_json: JsonOpt = False,
    settings: Settings = None,
    source: SourceOpt = None,
) -> None:
    """Ways to reach a global batch on a cluster (accumulation, more devices, bigger
    micro-batch), each with micro-steps, tokens and projected wall-clock."""
    from .analysis.plan import plan as layouts
    from .report.batchsci import print_layouts

    run = _load([from_run], source, settings, "keep-last", False, None, None)[0] \
        if from_run is not None else None
    result = layouts(global_batch=global_batch, devices=devices, micro_batch=micro_batch,
                     seq_len=seq_len, max_steps=max_steps, budget=budget,
                     tokens_per_second=tokens_per_second,
                     tokens_per_second_per_device=per_device, run=run)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        print_layouts(result, _console())


def main() -> None:
    app()
