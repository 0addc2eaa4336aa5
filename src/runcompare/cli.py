"""The command line: parse arguments, make one library call, print. ``compare`` is the default
command, so ``runcompare mamba/ attn/ --x tokens`` works.

Each command is one function below under ``@command()`` (help in the project's words, library
errors as one ``error:`` line and their exit code), its options from the shared ``Annotated`` types,
its library imports inside the body (``--help``, ``--version`` and ``batch`` load no polars,
plotly, pyarrow or tensorboard; ``tests/test_startup.py`` holds the rule). Results go to
stdout; notes about what was done (a report written, an axis chosen) go to stderr, and
``-q`` silences them, so ``--json`` prints nothing on stdout but the JSON.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from inspect import Parameter, signature
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from .display import did_you_mean, terminal_text
from .errors import RuncompareError
from .options import ReadOptions

if TYPE_CHECKING:
    from rich.console import Console

    from .model import Run

__all__ = ["app", "console", "main"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
_GROUP_OPTIONS = ("--help", "-h", "--version", "-V")


class DefaultCommandGroup(TyperGroup):
    """Routes a first word that is not a command (a run path, an option) to ``compare``; a
    word that is no path on disk but close to a command's name is a usage error that
    suggests it."""

    default = "compare"

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in _GROUP_OPTIONS:
            word = args[0]
            hint = did_you_mean(word, self.commands)
            if hint and not word.startswith("-") and not Path(word).exists():
                typer.echo(terminal_text(f"error: {word!r} is neither a command nor a path; "
                                         f"{hint}(runcompare -h lists the commands)"), err=True)
                raise typer.Exit(2)
            args = [self.default, *args]
        return super().parse_args(ctx, args)


class _Argument(TyperArgument):
    """An argument shown by its metavar alone (``RUN...``), not with its Python type."""

    def display_type_rich(self, ctx: Any) -> str | None:  # typer 0.29's help record
        return None

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        return [self.metavar] if self.metavar else super().get_usage_pieces(ctx)


class _Command(TyperCommand):
    """A command whose arguments are shown as :class:`_Argument`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument) and param.metavar:
                param.__class__ = _Argument


app = typer.Typer(cls=DefaultCommandGroup, no_args_is_help=True, add_completion=False,
                  rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]},
                  help="Compare ML training runs from their logs on a fair axis.\n\n"
                  "compare is the default command: runcompare RUN... is runcompare compare "
                  "RUN... (runcompare compare -h lists its options). runcompare formats lists "
                  "the logs it reads.")

Runs = Annotated[list[Path], typer.Argument(readable=False, metavar="RUN...",
                                            help="Run folders or log files.",
                                            show_default=False)]
Settings = Annotated[list[str] | None, typer.Option(
    "--set", metavar="[RUN:]KEY=VALUE",
    help="A fact the logs lack, e.g. seq_len=1024 or attn:grad_accum=8.")]
SourceOpt = Annotated[str | None, typer.Option(
    "--source", metavar="NAME",
    help="Use only this source of a folder that holds several (e.g. hf-trainer; "
    "runcompare formats lists them).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
Duplicates = Annotated[str, typer.Option(
    "--duplicates", metavar="POLICY",
    help="Steps a restarted leg logged again: keep-last, keep-first or all.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Reread every file.")]
PatternOpt = Annotated[str | None, typer.Option(
    "--pattern", metavar="REGEX", help="A regular expression with named groups (step or iter, "
    "and one per metric) for text logs no other source reads; implies --source text.")]
SchedulerOpt = Annotated[str | None, typer.Option(
    "--scheduler", metavar="ADDRESS", help="Read the runs on the Dask cluster of this scheduler "
    "(e.g. tcp://10.0.0.5:8786; needs runcompare[dask]) instead of local processes.")]
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", metavar="FILE",
    help="A training config (e.g. Axolotl YAML) whose facts apply to every run.")]
Quiet = Annotated[bool, typer.Option(
    "-q", "--quiet", help="Print only the result: no progress bar, no notes on stderr.")]
Verbose = Annotated[bool, typer.Option(
    "-v", "--verbose", help="Also print the details: every finding, where each axis comes from.")]
N = Annotated[int | None, typer.Option(metavar="N")]


def _version(value: bool) -> None:
    if value:
        from ._version import __version__

        typer.echo(f"runcompare {__version__}")
        raise typer.Exit()


@app.callback()
def _group(
    version: Annotated[bool, typer.Option(
        "--version", "-V", callback=_version, is_eager=True,
        help="Print the version and exit.")] = False,
) -> None:
    """The options before a command (the app's help, above, is what ``-h`` prints)."""


#: The width of tables on a stdout that is no terminal when ``COLUMNS`` gives none: wide enough
#: that no table folds a cell or leaves a column out, so each line is as long as what it
#: holds (rich would take 80, or the width of a terminal on stdin or stderr).
PIPED_WIDTH = 10_000


def _console() -> Console:
    """Tables on stdout: the terminal's width (``COLUMNS`` overrides it, as rich does); when
    stdout is no terminal, ``COLUMNS`` if set, else :data:`PIPED_WIDTH`, and no colour
    (NO_COLOR is honoured); no rich markup, so a name from a log (``[red]``, ``[/]``) prints
    as it is."""
    from rich.console import Console

    columns = os.environ.get("COLUMNS", "").strip()
    piped = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
    return Console(highlight=False, markup=False,
                   width=None if sys.stdout.isatty() else piped)


def _note(text: str, quiet: bool) -> None:
    """A line on stderr about what was done, unless ``-q``."""
    if not quiet:
        typer.echo(terminal_text(f"note: {text}"), err=True)


#: The reading options a command that reads runs takes (:func:`reading`): parameter name,
#: its option, its default.
_READ_OPTIONS: dict[str, tuple[Any, Any]] = {
    "settings": (Settings, None), "source": (SourceOpt, None),
    "duplicates": (Duplicates, "keep-last"), "no_cache": (NoCache, False),
    "config": (ConfigOpt, None), "pattern": (PatternOpt, None),
    "scheduler": (SchedulerOpt, None)}


def reading(*names: str) -> Callable[[F], F]:
    """``@reading(...)`` gives a command the reading options ``names`` (of
    :data:`_READ_OPTIONS`; none named: all but ``--scheduler``) as command-line options after
    its own, and passes them to it as one :class:`~runcompare.options.ReadOptions`, its
    ``read`` parameter (workers: one per core for a large sweep, as a command reads)."""
    chosen = names or tuple(n for n in _READ_OPTIONS if n != "scheduler")

    def decorate(function: F) -> F:
        declared = signature(function, eval_str=True)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {name: default for name, (_, default) in _READ_OPTIONS.items()}
            given.update((name, kwargs.pop(name)) for name in chosen)
            kwargs["read"] = ReadOptions(
                source=given["source"], settings=given["settings"] or (),
                duplicates=given["duplicates"], cache=not given["no_cache"],
                config=given["config"], pattern=given["pattern"], workers=None,
                scheduler=given["scheduler"])
            return function(*args, **kwargs)

        own = [p for p in declared.parameters.values() if p.name != "read"]
        added = [Parameter(name, Parameter.POSITIONAL_OR_KEYWORD, default=_READ_OPTIONS[name][1],
                           annotation=_READ_OPTIONS[name][0]) for name in chosen]
        wrapper.__signature__ = declared.replace(  # type: ignore[attr-defined]
            parameters=[*own, *added])
        wrapper.__annotations__ = {p.name: p.annotation for p in [*own, *added]}
        return wrapper  # type: ignore[return-value]

    return decorate


def _read(paths: list[Path], read: ReadOptions, quiet: bool = False) -> list[Run]:
    """The runs ``read`` describes, with a progress bar on a terminal (not ``-q``)."""
    from .load import read_runs

    with _reading(quiet) as progress:
        return read_runs(paths, dataclasses.replace(read, progress=progress))


@contextlib.contextmanager
def _reading(quiet: bool) -> Iterator[Callable[[int, int, str], None] | None]:
    """A progress bar on stderr while runs are read, when stderr is a terminal or
    ``FORCE_COLOR`` says to draw as on one (not ``-q``). rich (20 ms to import) is imported
    only for the bar."""
    if quiet or not (sys.stderr.isatty() or os.environ.get("FORCE_COLOR")):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = Console(stderr=True, markup=False, highlight=False)
    if not console.is_terminal:
        yield None
        return
    bar = Progress(TextColumn("reading {task.description}"), BarColumn(), MofNCompleteColumn(),
                   console=console, transient=True)
    task = bar.add_task("runs", total=None)

    def update(done: int, total: int, name: str) -> None:
        if not bar.live.is_started:  # drawn from the first call: its thread starts after the
            bar.start()  # workers are forked (parallel.start_workers forks no process with one)
        bar.update(task, completed=done, total=total, description=terminal_text(name))

    try:
        yield update
    finally:
        if bar.live.is_started:
            bar.stop()


def command() -> Callable[[F], F]:
    """``@command()`` makes a function a subcommand named after it: its help as
    :class:`_Command` shows it, and a library error (or an OS error on a path) is one line
    on stderr and its exit code (:func:`_errors`)."""

    def register(function: F) -> F:
        app.command(cls=_Command)(_errors(function))
        return function

    return register


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
        except MemoryError:
            typer.echo("error: ran out of memory; read fewer runs at once, or fewer metrics "
                       "(--metric), or on a machine with more memory", err=True)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


@command()
@reading(*_READ_OPTIONS)
def compare(
    runs: Runs,
    x: Annotated[str | None, typer.Option(
        "--x", metavar="AXIS",
        help="Axis: step, micro_step, samples, tokens, epoch, elapsed, "
        "flops or device_hours (default: tokens, else samples, else step).")] = None,
    metric: Annotated[list[str] | None, typer.Option(
        "--metric", metavar="METRIC", help="Metric to compare, or a glob such as 'train/*' "
        "(repeatable; default: all shared).")] = None,
    runs_like: Annotated[list[str] | None, typer.Option(
        "--runs", metavar="REGEX", help="Compare only the runs whose name matches (repeatable); "
        "with --top, these are compared beside the best N.")] = None,
    top: Annotated[int | None, typer.Option(
        "--top", metavar="N", help="Compare the best N runs by the verdict's metric at the "
        "common budget (plus those --runs names).")] = None,
    smooth: Annotated[str | None, typer.Option(
        "--smooth", metavar="SPEC", help="tb:WEIGHT (TensorBoard's EMA), a half-life in axis "
        "units such as 50M, or a share of the range such as 5%.")] = None,
    target: Annotated[float | None, typer.Option(
        "--target", metavar="VALUE",
        help="Value of the main metric to reach (default: the worst final).")] = None,
    group: Annotated[list[str] | None, typer.Option(
        "--group", metavar="NAME=RUN,RUN", help="Seed group (repeatable; default: runs "
        "identical but for the seed).")] = None,
    no_groups: Annotated[bool, typer.Option(
        "--no-groups", help="Compare every run on its own: no seed groups.")] = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", metavar="FILE",
        help="Report path (default reports/<a>_vs_<b>.html).")] = None,
    as_json: JsonOpt = False,
    no_report: Annotated[bool, typer.Option("--no-report", help="Write no HTML report.")] = False,
    png: Annotated[bool, typer.Option(
        "--png", help="Also draw each chart as PNG beside the report (needs kaleido).")] = False,
    svg: Annotated[bool, typer.Option("--svg", help="Also draw each chart as SVG.")] = False,
    quiet: Quiet = False,
    verbose: Verbose = False,
    *,
    read: ReadOptions,
) -> None:
    """Compare runs (the default command: runcompare RUN... is runcompare compare RUN...): the
    verdict first, then batch hierarchy, summary, totals, findings; and the HTML report."""
    from .analysis.compare import choose
    from .analysis.groups import parse_groups
    from .report import default_report_path, print_comparison, write_figures, write_report

    loaded = _read(runs, read, quiet)
    comparison = choose(loaded, patterns=runs_like or (), top=top, x=x, metrics=metric or None,
                        smooth=smooth, target=target,
                        groups=False if no_groups else parse_groups(group or (), loaded) or None)
    report_path = output or default_report_path(comparison.runs)
    report = None if no_report else str(write_report(comparison, report_path))
    if as_json:
        typer.echo(json.dumps(comparison.to_json(report=report), indent=2, allow_nan=True))
        if report:
            _note(f"report: {report}", quiet)
    elif quiet:
        typer.echo(terminal_text(str(comparison)))
    else:
        print_comparison(comparison, _console(), report=report, every=verbose)
        if verbose:
            _details(comparison.runs)
    formats = tuple(f for f, wanted in (("png", png), ("svg", svg)) if wanted)
    if formats:  # after the summary: a figure format that fails leaves the summary printed
        drawn = write_figures(comparison, report_path.with_suffix(""), formats=formats)
        _note(f"figures: {len(drawn)} in {report_path.with_suffix('')}", quiet)


def _details(runs: list[Run]) -> None:
    """``-v``: each run's own info findings (the summary leaves them to inspect) and where
    each axis comes from."""
    from .report.plan_table import print_findings

    console = _console()
    print_findings(console, [f for run in runs for f in run.findings if f.level == "info"])
    for run in runs:
        for axis, origin in run.axis_sources.items():
            console.print(terminal_text(f"{run.name}: {axis} from {origin}"))


@command()
@reading()
def inspect(
    run: Annotated[Path, typer.Argument(readable=False, metavar="RUN",
                                        help="A run folder or log file.",
                                        show_default=False)],
    as_json: JsonOpt = False,
    quiet: Quiet = False,
    verbose: Verbose = False,
    *,
    read: ReadOptions,
) -> None:
    """What was found in a run (each run, for a folder of several; past four runs, an
    overview with a row per run, or each in full with -v): sources, batch hierarchy with the
    source of every number, metrics, findings."""
    loaded = _read([run], read, quiet)
    if as_json:
        objects = [r.to_json() for r in loaded]
        typer.echo(json.dumps(objects[0] if len(objects) == 1 else objects, indent=2))
    elif quiet:
        for one in loaded:
            typer.echo(terminal_text(str(one)))
    else:
        from .analysis.differs import differences
        from .report import print_run, print_runs

        if verbose:
            for one in loaded:
                print_run(one, _console())
            _details(loaded)
        else:
            print_runs(loaded, differences(loaded), _console())


@command()
def batch(
    per_device: Annotated[int, typer.Option(
        "--per-device", "--per-device-batch", metavar="N",
        help="Micro-batch per device (per_device_batch in Python and the JSON).")],
    grad_accum: Annotated[int | None, typer.Option(
        "--grad-accum", metavar="N",
        help="Gradient accumulation steps (or give --global-batch).")] = None,
    global_batch: Annotated[int | None, typer.Option(
        "--global-batch", metavar="N",
        help="Target global batch; accumulation is computed.")] = None,
    world_size: Annotated[int | None, typer.Option(
        "--world-size", metavar="N",
        help="Devices in all (or give --nodes and --devices-per-node).")] = None,
    nodes: Annotated[int | None, typer.Option(
        "--nodes", metavar="N", help="Nodes, with --devices-per-node.")] = None,
    devices_per_node: Annotated[int | None, typer.Option(
        "--devices-per-node", metavar="N", help="Devices per node, with --nodes.")] = None,
    dies_per_device: Annotated[int, typer.Option(
        "--dies-per-device", metavar="N",
        help="2 for dual-die cards that PyTorch sees as two devices.")] = 1,
    tp: Annotated[int, typer.Option("--tp", metavar="N", help="Tensor parallel size.")] = 1,
    pp: Annotated[int, typer.Option("--pp", metavar="N", help="Pipeline parallel size.")] = 1,
    cp: Annotated[int, typer.Option("--cp", metavar="N", help="Context parallel size.")] = 1,
    seq_len: Annotated[int | None, typer.Option(
        "--seq-len", metavar="N", help="Tokens per sequence, for tokens per step.")] = None,
    max_steps: Annotated[int | None, typer.Option(
        "--max-steps", metavar="N",
        help="Optimizer steps to train, for micro-steps and total tokens.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The batch hierarchy of a configuration: micro, per-device, global, tokens per step.
    For a token budget or a run's measured speed, see runcompare plan."""
    from .batch import plan_batch
    from .report import print_plan

    plan = plan_batch(per_device_batch=per_device, grad_accum=grad_accum,
                      global_batch=global_batch, world_size=world_size, nodes=nodes,
                      devices_per_node=devices_per_node, dies_per_device=dies_per_device,
                      tensor_parallel=tp, pipeline_parallel=pp, context_parallel=cp,
                      seq_len=seq_len, max_steps=max_steps)
    if as_json:
        typer.echo(json.dumps(plan.to_json(), indent=2))
    else:
        print_plan(plan, _console())


@command()
@reading(*_READ_OPTIONS)
def export(
    runs: Runs,
    output: Annotated[Path, typer.Option(
        "-o", "--output", metavar="PATH", help="Destination: a file (.csv, .jsonl) or a folder "
        "(.parquet dataset, TensorBoard logdir).")],
    fmt: Annotated[str | None, typer.Option(
        "--format", metavar="FORMAT", help="parquet, csv, jsonl or tensorboard (default: from "
        "the output's suffix; a folder without one is parquet).")] = None,
    x: Annotated[str | None, typer.Option(
        "--x", metavar="AXIS",
        help="TensorBoard step: tokens (default), samples, micro_step, "
        "step, flops or device_hours (written as device-seconds).")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace an earlier export at the output path.")] = False,
    quiet: Quiet = False,
    verbose: Verbose = False,
    *,
    read: ReadOptions,
) -> None:
    """Write every point of the runs as a parquet dataset, CSV, JSON lines or TensorBoard events."""
    from .export import TB_STEP_UNITS, export_parts, parts_written_there
    from .export import export as export_runs
    from .load import load_parts

    if read.scheduler is not None and parts_written_there(output, fmt):  # each worker writes
        with _reading(quiet) as progress:
            done = export_parts(lambda parts: load_parts(
                runs, parts, dataclasses.replace(read, progress=progress)), output, force=force)
    else:
        loaded = _read(runs, read, quiet)
        done = export_runs(loaded, output, format=fmt, x=x, force=force)
    unit = f"; each step is {TB_STEP_UNITS[x]}" if x in TB_STEP_UNITS else ""
    if not quiet:
        typer.echo(terminal_text(f"wrote {done.points:,} points of {done.runs} run(s) as "
                                 f"{done.format} to {done.url or done.path} ({len(done.files)} file(s))"
                                 f"{unit}"))
    if verbose:
        for file in done.files:
            typer.echo(terminal_text(str(file)))


@command()
def formats(as_json: JsonOpt = False) -> None:
    """The logs runcompare reads: each source's name (for --source of the commands that read
    runs), what it reads and where it looks."""
    from .sources import FORMATS

    if as_json:
        typer.echo(json.dumps([{"name": f.name, "describe": f.describe} for f in FORMATS],
                              indent=2))
        return
    width = max(len(f.name) for f in FORMATS)
    for fmt in FORMATS:
        typer.echo(f"{fmt.name:<{width}}  {fmt.describe}")


HtmlOpt = Annotated[Path | None, typer.Option(
    "--html", metavar="FILE", help="Also write the chart(s) as a self-contained HTML page here.")]


@command()
@reading()
def critical_batch(
    runs: Annotated[list[Path], typer.Argument(readable=False, metavar="RUN...",
                                               help="Runs of one model at "
                                               "several global batches.", show_default=False)],
    metric: Annotated[str | None, typer.Option(
        "--metric", metavar="METRIC",
        help="Metric to reach (default: eval/loss if every run has it, else "
        "train/loss).")] = None,
    target: Annotated[float | None, typer.Option(
        "--target", metavar="VALUE",
        help="Value to reach (default: the worst best value, which every run reaches).")] = None,
    targets: Annotated[list[float] | None, typer.Option(
        "--targets", metavar="VALUE",
        help="Targets of the B_crit curve (repeatable; default: five).")] = None,
    smooth: Annotated[str | None, typer.Option(
        "--smooth", metavar="SPEC", help="Window of the training metrics' local fit on the "
        "samples axis: a half-width such as 20000, a share of the range such as 1% (default "
        "2%), tb:WEIGHT, or tb:0 for the raw points.")] = None,
    html_path: HtmlOpt = None,
    as_json: JsonOpt = False,
    *,
    read: ReadOptions,
) -> None:
    """Critical batch size: steps and samples to a target per run, S_min, E_min, B_crit."""
    from .analysis.critical_batch import critical_batch as fit
    from .report.batchsci import critical_batch_section, print_critical_batch, write_page

    loaded = _read(runs, read)
    result = fit(loaded, metric=metric, target=target, targets=targets or None, smooth=smooth)
    if html_path is not None:
        write_page(html_path, title="Critical batch", sections=[critical_batch_section(result)],
                   runs=loaded)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        print_critical_batch(result, _console())


@command()
@reading()
def noise_scale(
    run_a: Annotated[Path, typer.Argument(readable=False, metavar="RUN_A",
                                          help="A run at one global batch.")],
    run_b: Annotated[Path, typer.Argument(readable=False, metavar="RUN_B",
                                          help="The same model at another global batch.")],
    x: Annotated[str | None, typer.Option(
        "--x", metavar="AXIS",
        help="Common axis: tokens or samples (default: tokens if both have it).")] = None,
    html_path: HtmlOpt = None,
    as_json: JsonOpt = False,
    *,
    read: ReadOptions,
) -> None:
    """Simple gradient noise scale from the grad norms of two runs at different batches."""
    from .analysis.noise_scale import noise_scale as estimate
    from .report.batchsci import figure_section, noise_scale_figure, print_noise_scale, write_page

    loaded = _read([run_a, run_b], read)
    result = estimate(*loaded, x=x)
    if html_path is not None:
        write_page(html_path, title="Gradient noise scale", runs=loaded, sections=[
            figure_section("B_simple over training", noise_scale_figure(result),
                           result.findings)])
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        print_noise_scale(result, _console())


@command()
@reading()
def goodput(
    runs: Runs,
    budget: Annotated[str | None, typer.Option(
        "--budget", metavar="TOKENS", help="Token budget for an ETA, e.g. 100B.")] = None,
    html_path: HtmlOpt = None,
    as_json: JsonOpt = False,
    *,
    read: ReadOptions,
) -> None:
    """Where the wall-clock went: training, evaluation, checkpointing, restarts, unexplained."""
    from .analysis.goodput import goodput as measure
    from .report.batchsci import goodput_section, print_goodput, write_page

    loaded = _read(runs, read)
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


@command()
@reading("settings", "source")
def plan(
    global_batch: Annotated[int, typer.Option("--global-batch", metavar="N",
                                              help="Target global batch.")],
    devices: Annotated[int, typer.Option("--devices", metavar="N",
                                         help="Devices in the cluster (data parallel).")],
    micro_batch: Annotated[int | None, typer.Option(
        "--micro-batch", metavar="N",
        help="Micro-batch per device (default: the --from run's).")] = None,
    seq_len: Annotated[int | None, typer.Option(
        "--seq-len", metavar="N", help="Tokens per sequence (default: the --from run's).")] = None,
    max_steps: Annotated[int | None, typer.Option(
        "--max-steps", metavar="N", help="Optimizer steps to train (or give --budget).")] = None,
    budget: Annotated[str | None, typer.Option(
        "--budget", metavar="TOKENS", help="Train on this many tokens, e.g. 100B.")] = None,
    tokens_per_second: Annotated[str | None, typer.Option(
        "--tokens-per-second", metavar="RATE",
        help="Measured tokens/s of the whole cluster at --devices, e.g. 1.2M.")] = None,
    per_device: Annotated[str | None, typer.Option(
        "--tokens-per-second-per-device", metavar="RATE",
        help="Measured tokens/s of one device.")] = None,
    from_run: Annotated[Path | None, typer.Option(
        "--from", metavar="RUN",
        help="A run whose measured per-device rate and goodput are used.")] = None,
    as_json: JsonOpt = False,
    *,
    read: ReadOptions,
) -> None:
    """Ways to reach a global batch on a cluster (accumulation, more devices, bigger
    micro-batch), each with micro-steps, tokens and projected wall-clock."""
    from .analysis.plan import plan as layouts
    from .report.batchsci import print_layouts

    run = _read([from_run], read)[0] \
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
    """Run the command line (raises :class:`SystemExit` when done, as a click app does)."""
    app()


#: glibc's ``mallopt`` options (malloc.h): M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD.
_MALLOPT = ((-1, 1 << 30), (-2, 256 << 20), (-3, 1 << 30))


def _keep_freed_memory() -> None:
    """Have glibc's malloc keep freed memory for reuse, as a command that exits soon may:
    otherwise each large array comes in fresh pages from the kernel and goes back when freed
    (a million-point inspect: 0.67 → 0.62 s, 20 MB more at the peak). Nothing changes where
    the C library has no ``mallopt``; the library, imported elsewhere, never calls this."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return
    for option, value in _MALLOPT:
        mallopt(option, value)


def console() -> NoReturn:
    """The ``runcompare`` command: :func:`main`, then an exit that skips tearing down the
    interpreter. Freeing a million-point run object by object took 60–90 ms after the
    answer was printed (mypy exits the same way). Nothing of runcompare runs at exit: pools,
    clients and scratch folders are closed by the command itself; the output is flushed here.
    """
    _keep_freed_memory()
    try:
        main()
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:  # a message (``sys.exit("...")``): printed, and exit 1
            print(exc.code, file=sys.stderr)
            code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: as Python reports a failed flush
            code = code or 120
    os._exit(code)
