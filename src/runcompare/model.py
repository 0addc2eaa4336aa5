"""The data model: facts with their source, the batch hierarchy, findings, raw logs and runs.

A source turns files into a :class:`RawLog` (raw steps in the source's own unit, facts,
findings); ``resolve`` merges facts into a :class:`BatchConfig`; ``axes`` turns both into a
:class:`Run` whose ``scalars`` frame carries every point on every axis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from .display import LISTED, did_you_mean, listing, set_prefix
from .errors import MissingInfoError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import numpy as np
    import pandas
    import polars as pl
    from polars._typing import PolarsDataType

    RAW_SCHEMA: dict[str, PolarsDataType]
    SCALAR_SCHEMA: dict[str, PolarsDataType]

__all__ = [
    "AXES",
    "AXIS_METRICS",
    "FACT_KINDS",
    "KEPT_COUNTERS",
    "RAW_SCHEMA",
    "SCALAR_SCHEMA",
    "STEP_UNITS",
    "BatchConfig",
    "Fact",
    "Finding",
    "Findings",
    "Leg",
    "RawLog",
    "Run",
    "framed",
    "known_values",
    "repeated",
]

T = TypeVar("T")

#: Priority of a fact's origin, lowest first: a higher kind wins in ``resolve``.
FACT_KINDS = ("hint", "inferred", "logged", "config", "user")

#: What a source's step column counts.
STEP_UNITS = ("optimizer", "micro", "log_call", "samples", "tokens", "epoch")

#: The x axes a run can be drawn on (columns of ``Run.scalars``).
AXES = ("step", "micro_step", "samples", "tokens", "epoch", "elapsed", "wall_time", "flops",
        "device_hours")

#: Logged counters that become axis columns instead of metrics (canonical name -> column).
AXIS_METRICS = {
    "train/epoch": "epoch",
    "train/num_input_tokens_seen": "tokens",
    "train/num_tokens": "tokens",  # TRL's trainers: tokens processed so far (kept a metric)
    "train/consumed_samples": "samples",
}
#: Counters of :data:`AXIS_METRICS` that stay metrics too (TRL logs ``num_tokens`` beside its
#: metrics, and its readers show it as one).
KEPT_COUNTERS = frozenset({"train/num_tokens"})

def _schemas() -> dict[str, dict[str, PolarsDataType]]:
    """:data:`RAW_SCHEMA` and :data:`SCALAR_SCHEMA`, made when first asked for (module
    ``__getattr__``), so that this module loads without polars (``runcompare batch``)."""
    import polars as pl

    return {
        #: Columns of ``RawLog.scalars``: one row per logged point, step in the source's unit,
        #: ``leg`` numbers the resumed legs of one run (0 for the first).
        "RAW_SCHEMA": {
            "metric": pl.String,
            "value": pl.Float64,
            "step": pl.Int64,
            "wall_time": pl.Float64,
            "leg": pl.Int32,
        },
        #: Columns of ``Run.scalars`` (docs/architecture.md's data model), in order.
        "SCALAR_SCHEMA": {
            "run": pl.String,
            "metric": pl.String,
            "value": pl.Float64,
            "step": pl.Int64,
            "micro_step": pl.Int64,
            "samples": pl.Int64,
            "tokens": pl.Int64,
            "epoch": pl.Float64,
            "wall_time": pl.Float64,
            "elapsed": pl.Float64,
            "flops": pl.Float64,
            "device_hours": pl.Float64,
        },
    }


if not TYPE_CHECKING:
    def __getattr__(name: str) -> Any:
        if name not in ("RAW_SCHEMA", "SCALAR_SCHEMA"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals().update(_schemas())
        return globals()[name]


@dataclass(frozen=True)
class Fact(Generic[T]):
    """One value and where it came from, e.g. ``Fact(8, "trainer_state.json: train_batch_size")``.

    ``value`` is None when nothing supplied it; ``kind`` ranks it against other facts of the
    same field (see :data:`FACT_KINDS`).
    """

    value: T | None
    source: str
    kind: Literal["hint", "inferred", "logged", "config", "user"] = "logged"

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source}


UNKNOWN: Fact[Any] = Fact(None, "not found", "hint")


@dataclass(frozen=True)
class Finding:
    """Something a user should know about a run or a comparison; ``code`` is stable kebab-case."""

    level: Literal["info", "warning", "error"]
    code: str
    message: str
    run: str | None = None

    def to_json(self) -> dict[str, str]:
        return {"level": self.level, "code": self.code, "message": self.message}


class Findings(list[Finding]):
    """The findings of a run, a batch plan or a comparison: a list of :class:`Finding`, and
    the same as a frame (``level``, ``code``, ``message``, ``run``; null ``run`` for findings
    about a comparison as a whole)."""

    def to_frame(self) -> pl.DataFrame:
        """A polars frame, one row per finding."""
        import polars as pl

        return pl.DataFrame([(f.level, f.code, f.message, f.run) for f in self],
                            schema={"level": pl.String, "code": pl.String,
                                    "message": pl.String, "run": pl.String}, orient="row")

    def to_pandas(self) -> pandas.DataFrame:
        """:meth:`to_frame` as a pandas DataFrame."""
        return self.to_frame().to_pandas()

    def __repr__(self) -> str:
        return f"Findings({list.__repr__(self)})"


@dataclass(frozen=True)
class BatchConfig:
    """A run's batch hierarchy; every field is a :class:`Fact` (value None when unknown).

    ``per_device_batch`` is the micro-batch (HF's ``per_device_train_batch_size``): sequences in
    one forward pass on one device. ``global_batch`` and ``tokens_per_step`` are derived by
    ``resolve`` unless a source logged them. ``ramp`` lists ``(first_step, global_batch)`` pairs
    when the batch changes over the run (empty for a constant batch).
    """

    per_device_batch: Fact[int] = UNKNOWN
    grad_accum: Fact[int] = UNKNOWN
    world_size: Fact[int] = UNKNOWN
    tensor_parallel: Fact[int] = UNKNOWN
    pipeline_parallel: Fact[int] = UNKNOWN
    context_parallel: Fact[int] = UNKNOWN
    seq_len: Fact[int] = UNKNOWN
    global_batch: Fact[int] = UNKNOWN
    tokens_per_step: Fact[int] = UNKNOWN
    ramp: tuple[tuple[int, int], ...] = ()

    @property
    def model_parallel(self) -> int:
        """Devices that hold one model replica: tensor × pipeline × context parallel."""
        sizes = (self.tensor_parallel, self.pipeline_parallel, self.context_parallel)
        product = 1
        for size in sizes:
            product *= size.value or 1
        return product

    @property
    def data_parallel(self) -> int | None:
        """Replicas that each see different data: world size ÷ model-parallel size."""
        world = self.world_size.value
        return None if world is None else world // self.model_parallel

    @property
    def per_device_step(self) -> int | None:
        """Sequences one device contributes to an optimizer step: micro-batch × accumulation."""
        micro, accum = self.per_device_batch.value, self.grad_accum.value
        return None if micro is None or accum is None else micro * accum

    def to_json(self) -> dict[str, dict[str, Any]]:
        keys = ("per_device_batch", "grad_accum", "world_size", "seq_len", "global_batch",
                "tokens_per_step")
        return {key: getattr(self, key).to_json() for key in keys}


@dataclass(frozen=True)
class Leg:
    """One process of a resumed run, as the source with wall times saw it: its first and last
    logged step (in that source's step unit) and wall time (unix seconds), every point it
    logged counted (also those a later leg overrode)."""

    leg: int
    first_step: int
    last_step: int
    wall_start: float
    wall_end: float

    def to_json(self) -> dict[str, Any]:
        return {"leg": self.leg, "first_step": self.first_step, "last_step": self.last_step,
                "wall_start": self.wall_start, "wall_end": self.wall_end}


@dataclass
class RawLog:
    """What one source read from one run: points in the source's own step unit, and facts.

    ``scalars`` follows :data:`RAW_SCHEMA`; metric names are canonical (``train/loss``) and
    ``aliases`` maps each canonical name to the name as logged where they differ. A source
keeps every point of every leg (restart); ``legs.resolve_legs`` decides which survive.
    """

    path: Path
    scalars: pl.DataFrame
    #: The format's name, stamped by the loader (``Format.read_at``).
    source: str = ""
    step_unit: str = "optimizer"
    facts: dict[str, Fact[Any]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    #: leg -> first step that leg may log, where the source knows it (TensorBoard purge_step,
    #: a resume checkpoint + 1); otherwise a leg starts at its first logged step.
    leg_starts: dict[int, int] = field(default_factory=dict)
    #: Every key of the configuration the source holds (TrainingArguments, W&B config,
    #: hparams, params), by the key as written (nested keys joined with ``.``), each with its
    #: source (``sources.config.hparams``).
    hparams: dict[str, Fact[Any]] = field(default_factory=dict)

    @property
    def points(self) -> int:
        return self.scalars.height

    def metric_codes(self) -> tuple[pl.Series, np.ndarray]:
        """The distinct metrics of the points, sorted, and each point's index into them:
        worked out once per points frame, or as told by the reader that made the frame from
        codes (:meth:`tell_codes`; a fifth of a 10,000-point run's build otherwise)."""
        known = self.__dict__.get("_codes")
        if known is None or known[0] is not self.scalars:
            metric = self.scalars.get_column("metric")
            names = metric.unique().sort()
            known = (self.scalars, names, names.search_sorted(metric).to_numpy())
            self.__dict__["_codes"] = known
        return known[1], known[2]

    def tell_codes(self, names: list[str], codes: np.ndarray) -> None:
        """The points frame's metric column is ``names`` (any order, repeats allowed) taken
        at ``codes``: :meth:`metric_codes` gives them without a pass over the strings."""
        import numpy as np
        import polars as pl

        distinct = sorted(set(names))
        index = {name: i for i, name in enumerate(distinct)}
        remap = np.array([index[name] for name in names] or [0], np.intp)
        self.__dict__["_codes"] = (self.scalars, pl.Series(distinct, dtype=pl.String),
                                   remap[codes])

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the memo of :meth:`metric_codes` (it holds the points frame again)."""
        state = dict(self.__dict__)
        state.pop("_codes", None)
        return state


@dataclass
class Run:
    """One training run with every logged point on every axis it can be put on."""

    name: str
    path: Path
    format: str
    sources: list[str]
    step_unit: str
    batch: BatchConfig
    scalars: pl.DataFrame
    facts: dict[str, Fact[Any]] = field(default_factory=dict)
    findings: Findings = field(default_factory=Findings)
    aliases: dict[str, str] = field(default_factory=dict)
    #: axis column -> where its values come from ("logged counter ...", "schedule: ...").
    axis_sources: dict[str, str] = field(default_factory=dict)
    #: The legs (restarts) a source with wall times tells apart, in time order; empty when no
    #: source logged wall times.
    legs: tuple[Leg, ...] = ()
    #: The run's hyperparameters: every configuration key its sources hold, by key, each with
    #: its source (the first source that holds a key gives it; see ``load``).
    hparams: dict[str, Fact[Any]] = field(default_factory=dict)
    #: The URL the run was read from when it is remote (``path`` is then its local mirror).
    origin: str | None = None

    def __post_init__(self) -> None:
        self.findings = Findings(self.findings)

    def __str__(self) -> str:
        """One line: name, format, steps, points, global batch and tokens per step (what
        ``runcompare inspect -q`` prints)."""
        return f"{self.name} {self._sizes()}"

    def __repr__(self) -> str:
        return f"<Run {self.name!r} {self._sizes()}>"

    def _sizes(self) -> str:
        batch = self.batch
        return (f"({self.format}): {self.optimizer_steps:,} optimizer steps, "
                f"{self.scalars.height:,} points of {len(self.metrics)} metrics, global batch "
                f"{_number(batch.global_batch.value)}, "
                f"{_number(batch.tokens_per_step.value)} tokens/step, "
                f"{len(self.findings)} findings")

    def _repr_html_(self) -> str:
        """The notebook view: the batch hierarchy with the source of every number, metrics
        and findings (:mod:`runcompare.report.notebook`)."""
        from .report.notebook import run_html

        return run_html(self)

    @property
    def metrics(self) -> list[str]:
        """The metrics logged, sorted; worked out once for the points frame the run holds (a
        comparison of a sweep asks for them thousands of times)."""
        return sorted(self._points_by_metric())

    def points_of(self, metric: str) -> pl.DataFrame:
        """The run's points of ``metric`` in the frame's order (none when it never logged it):
        a slice of the points frame, as the loader orders it by metric, found once per frame
        (a comparison of a sweep asks for each metric of each run several times; a filter
        passes over every point each time). A frame not grouped by metric is split once."""
        found = self._points_by_metric().get(metric)
        if found is None:
            return self.scalars.clear()
        return found if not isinstance(found, tuple) else self.scalars.slice(*found)

    def _points_by_metric(self) -> dict[str, tuple[int, int] | pl.DataFrame]:
        """Each metric's points (:func:`_by_metric`), worked out once for the points frame the
        run holds: what :attr:`metrics` and :meth:`points_of` answer from."""
        known = self.__dict__.get("_slices")
        if known is None or known[0] is not self.scalars:
            known = (self.scalars, _by_metric(self.scalars))
            self.__dict__["_slices"] = known
        return known[1]

    def memo(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """``make()``, worked out once per ``key`` for the points frame the run holds (what
        the summary and the verdict both read off a run: the local fit of a metric)."""
        known: tuple[pl.DataFrame, dict[tuple[Any, ...], Any]] | None = \
            self.__dict__.get("_memo")
        if known is None or known[0] is not self.scalars:
            known = (self.scalars, {})
            self.__dict__["_memo"] = known
        if key not in known[1]:
            known[1][key] = make()
        made: T = known[1][key]
        return made

    def memoized(self, key: tuple[Any, ...]) -> Any:
        """What :meth:`memo` keeps for ``key`` for the points frame the run holds, None when
        it keeps nothing (not worked out yet, or for another frame)."""
        known = self.__dict__.get("_memo")
        return None if known is None or known[0] is not self.scalars else known[1].get(key)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the memos of :meth:`_points_by_metric` and :meth:`memo` (they hold
        the points frame again)."""
        state = dict(self.__dict__)
        state.pop("_slices", None)
        state.pop("_memo", None)
        return state

    @property
    def optimizer_steps(self) -> int:
        """The last optimizer step the run reached."""
        logged = self.scalars.get_column("step").max()
        recorded = self.facts.get("global_step", UNKNOWN).value
        return max(int(logged or 0), int(recorded or 0))  # type: ignore[arg-type]

    @property
    def micro_steps(self) -> int | None:
        """Optimizer steps × gradient accumulation (forward/backward passes per device)."""
        accum = self.batch.grad_accum.value
        return None if accum is None else self.optimizer_steps * accum

    def total(self, axis: str) -> int | None:
        """The largest value of a cumulative axis (``samples`` or ``tokens``) the run reached."""
        value = self.scalars.get_column(axis).max()
        return None if value is None else int(value)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        """The object ``runcompare inspect --json`` prints (docs/architecture.md's contracts)."""
        return {
            "name": self.name, "path": self.origin or str(self.path), "format": self.format,
            "sources": self.sources, "step_unit": self.step_unit, "batch": self.batch.to_json(),
            "steps": {"optimizer": self.optimizer_steps, "micro": self.micro_steps},
            "samples": self.total("samples"), "tokens": self.total("tokens"),
            "metrics": self.metrics, "points": self.scalars.height,
            "findings": [f.to_json() for f in self.findings],
            "hparams": {key: fact.to_json() for key, fact in sorted(self.hparams.items())},
        }

    def frame(self, x: str = "step") -> pl.DataFrame:
        """The tidy frame (:data:`SCALAR_SCHEMA`) plus an ``x`` column holding the chosen axis.

        Raises :class:`MissingInfoError` when the axis cannot be computed for this run.
        """
        import polars as pl

        require_axis(self, x)
        return self.scalars.with_columns(pl.col(x).cast(pl.Float64).alias("x"))

    def to_pandas(self, x: str = "step") -> pandas.DataFrame:
        """:meth:`frame` as a pandas DataFrame (nullable columns keep their nulls)."""
        return self.frame(x).to_pandas()


def _by_metric(frame: pl.DataFrame) -> dict[str, tuple[int, int] | pl.DataFrame]:
    """Each metric's points: (offset, length) of its slice where each metric's points are
    together (one pass over the column), else the points themselves, split out once."""
    runs = frame.get_column("metric").rle().struct.unnest()
    names, lengths = runs.get_column("value").to_list(), runs.get_column("len").to_list()
    if len(set(names)) < len(names):
        return {key[0]: part for key, part in
                frame.partition_by("metric", as_dict=True, maintain_order=True).items()}
    return {name: (end - length, length)
            for name, length, end in zip(names, lengths, accumulate(lengths))}


def framed(columns: Mapping[str, Any], schema: Mapping[str, PolarsDataType]) -> pl.DataFrame:
    """``pl.DataFrame(columns, schema=schema)`` for columns that are series or numpy arrays of
    about the schema's types, in a third of its time (each made a named series of its type,
    cast only where it is not)."""
    import polars

    made = []
    for name, dtype in schema.items():
        column = columns[name]
        series = column.alias(name) if isinstance(column, polars.Series) else polars.Series(
            name, column)
        made.append(series if series.dtype == dtype else series.cast(dtype))
    return polars.DataFrame(made)


def with_constants(frame: pl.DataFrame, values: Mapping[str, object]) -> pl.DataFrame:
    """``frame`` with each column ``values`` names holding its value in every row, kept by
    polars as the one value and written out only where the column's rows are asked for (a
    run's name on each of its points: written out, 40 pages of memory for 10,000 points)."""
    import polars

    schema = frame.schema
    return frame.with_columns(polars.lit(value, schema[name]).alias(name)
                              for name, value in values.items()) if values else frame


def known_values(column: pl.Series) -> np.ndarray:
    """The column's values that are not null, in order, as numpy (a column with no null as it
    is: ``drop_nulls`` plans a query, a fifth of a millisecond)."""
    found: np.ndarray = (column.drop_nulls() if column.null_count() else column).to_numpy()
    return found


def repeated(value: object, size: int, dtype: PolarsDataType) -> pl.Series:
    """``value`` ``size`` times (a twentieth of ``pl.repeat``'s cost, which plans a query;
    a null from a series of one made once per type: a run's empty columns, a fifth of the
    cost again)."""
    import polars

    seed = _null_of(dtype) if value is None else polars.Series(values=[value], dtype=dtype)
    series: pl.Series = seed.new_from_index(0, size)
    return series


@lru_cache(maxsize=64)
def _null_of(dtype: PolarsDataType) -> pl.Series:
    """A series of one null of ``dtype`` (:func:`repeated` makes longer ones from it)."""
    import polars

    return polars.Series(values=[None], dtype=dtype)


def _number(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"


#: What supplies each axis, for the error a user sees when one is missing.
_AXIS_FIX = {
    "micro_step": "the gradient accumulation: pass --set {to}grad_accum=N",
    "samples": ("the global batch: pass --set {to}per_device_batch=N, grad_accum=N and "
                "world_size=N (or global_batch=N)"),
    "tokens": ("a sequence length or a logged token counter: pass --set {to}seq_len=N or "
               "write `seq_len = N` in a runcompare.toml beside the logs"),
    "epoch": "a logged epoch",
    "elapsed": "logged wall times (trainer_state.json has none; TensorBoard and W&B logs do)",
    "wall_time": "logged wall times (trainer_state.json has none; TensorBoard and W&B logs do)",
    "flops": ("a FLOP count: a logged counter (the HF Trainer's total_flos) or --set "
              "{to}flops_per_token=N (training FLOPs per token, e.g. 6 × parameters), which "
              "needs the tokens axis too; it is never guessed from a model name"),
    "device_hours": ("logged wall times and the world size: pass --set {to}world_size=N "
                     "(trainer_state.json has no wall times; TensorBoard and W&B logs do)"),
}


def require_axis(run: Run, x: str) -> None:
    """Raise :class:`MissingInfoError` saying how to supply ``x`` if no point of ``run`` has it."""
    require_axes([run], x)


def require_axes(runs: Sequence[Run], x: str) -> None:
    """:func:`require_axis` for every run at once: the error names the runs that lack ``x``
    (the first few of a sweep) and, for more than one, the ``--set`` for every run
    (``KEY=N``), not one run's (``RUN:KEY=N``)."""
    if x not in AXES:
        raise UsageError(f"unknown axis {x!r}; {did_you_mean(x, AXES)}choose one of "
                         f"{', '.join(AXES)}")
    if x == "step":
        return
    lacking = [run.name for run in runs if not run.scalars.is_empty()
               and run.scalars.get_column(x).null_count() == run.scalars.height]
    if not lacking:
        return
    fix = _AXIS_FIX[x].format(to=set_prefix(lacking))
    if len(lacking) == 1:
        raise MissingInfoError(f"run {lacking[0]!r} cannot be put on the {x} axis: it needs "
                               f"{fix}")
    every = "" if len(lacking) == len(runs) or "--set" not in fix else (
        " (--set KEY=N sets every run; RUN:KEY=N sets one)")
    names = f"all {len(runs)} runs" if len(lacking) == len(runs) > LISTED else "runs " + listing(
        [repr(name) for name in lacking])
    raise MissingInfoError(f"{names} cannot be put on the {x} axis: they need {fix}{every}")
