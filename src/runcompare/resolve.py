"""Merge facts by priority into a :class:`BatchConfig`, and read user-supplied facts.

Priority, highest first: explicit user setting (``--set``, ``load(**facts)``) > run config
(TrainingArguments, W&B config, ``runcompare.toml``) > logged values > inference > nothing.
Every field keeps the ``source`` of the fact it came from; derived fields say what they were
derived from.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .display import did_you_mean
from .errors import InputError, UsageError
from .facts import FACT_FIELDS, facts_from_config
from .model import FACT_KINDS, UNKNOWN, BatchConfig, Fact, Finding

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "SIDECAR",
    "Settings",
    "agrees",
    "infer_global_batch",
    "merge_facts",
    "parse_settings",
    "read_sidecar",
    "resolve_batch",
]

SIDECAR = "runcompare.toml"


def merge_facts(*groups: Mapping[str, Fact[Any]],
                run: str | None = None) -> tuple[dict[str, Fact[Any]], list[Finding]]:
    """One fact per name: the highest kind wins, the earlier group on a tie.

    A lower-ranked fact that disagrees with the winner is reported (``fact-conflict``);
    a value that is the other printed to fewer digits agrees with it (:func:`agrees`).
    """
    merged: dict[str, Fact[Any]] = {}
    findings: list[Finding] = []
    for group in groups:
        for name, fact in group.items():
            if fact.value is None:
                continue
            held = merged.get(name)
            if held is None or _rank(fact) > _rank(held):
                if held is not None and not agrees(held.value, fact.value):
                    findings.append(_conflict(name, fact, held, run))
                merged[name] = fact
            elif not agrees(held.value, fact.value):
                findings.append(_conflict(name, held, fact, run))
    return merged, findings


#: The fewest significant digits a value is taken to be printed rounded to: shorter ones
#: (16, 3e-4) are exact, since a config states them so.
_PRINTED_DIGITS = 3


def agrees(a: Any, b: Any) -> bool:
    """Whether two facts' values are the same, one being the other printed to fewer
    significant digits (at least three, and not a whole number) counted as the same.

    >>> agrees(471.274, 471.3), agrees(82.123, 82.12), agrees("adamw", "adamw")
    (True, True, True)
    >>> agrees(16, 17), agrees(16.4, 16), agrees(3.4e-4, 3e-4), agrees(471.274, 471.2)
    (False, False, False, False)
    """
    if a == b:
        return True
    numbers = [v for v in (a, b) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) < 2 or not all(math.isfinite(v) for v in numbers):
        return False
    short, full = sorted(numbers, key=_digits)
    digits = _digits(short)
    if digits < _PRINTED_DIGITS or float(short).is_integer():
        return False
    return float(f"{full:.{digits}g}") == float(short)


def _digits(value: float) -> int:
    """Significant digits of a number as Python prints it.

    >>> _digits(471.3), _digits(0.00012), _digits(1.5e-05), _digits(82.123)
    (4, 2, 2, 5)
    """
    mantissa = repr(float(value)).lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return max(len(mantissa.rstrip("0")) if "." in repr(float(value)) else len(mantissa), 1)


def _rank(fact: Fact[Any]) -> int:
    return FACT_KINDS.index(fact.kind)


def _conflict(name: str, kept: Fact[Any], dropped: Fact[Any], run: str | None) -> Finding:
    return Finding("warning", "fact-conflict",
                   f"{name} is {kept.value} ({kept.source}) but {dropped.value} "
                   f"({dropped.source}); using {kept.value}", run)


def infer_global_batch(facts: Mapping[str, Fact[Any]]) -> Fact[int] | None:
    """Global batch ≈ train_samples_per_second ÷ train_steps_per_second, when trustworthy.

    Both rates cover the same session, so the ratio survives a resume. They are rounded (3
    decimals in trainer_state.json, 4 significant digits on stdout), so the ratio is accepted
    only within that rounding of a multiple of the per-device batch (of a whole number when
    that is unknown).

    >>> r = {"train_samples_per_second": Fact(335.213, "a"),
    ...      "train_steps_per_second": Fact(20.951, "b")}
    >>> infer_global_batch({**r, "per_device_batch": Fact(4, "c")}).value
    16
    >>> infer_global_batch({**r, "per_device_batch": Fact(5, "c")}) is None
    True
    """
    samples_rate = facts.get("train_samples_per_second", UNKNOWN).value
    steps_rate = facts.get("train_steps_per_second", UNKNOWN).value
    if not samples_rate or not steps_rate or samples_rate <= 0 or steps_rate <= 0:
        return None
    ratio = samples_rate / steps_rate
    if not math.isfinite(ratio) or ratio > 2 ** 32:  # a rate of 1e-320: no batch that large
        return None
    unit = facts.get("per_device_batch", UNKNOWN).value or 1
    multiple = round(ratio / unit) * unit
    # trainer_state.json rounds both rates to 3 decimals; Trainer stdout (5.x) prints 4
    # significant digits, a relative error of up to 0.05% each
    rounding = ratio * max(0.0005 / samples_rate + 0.0005 / steps_rate, 1e-3) + 1e-9
    if multiple < 1 or abs(ratio - multiple) > max(rounding, 1e-6 * ratio):
        return None
    return Fact(multiple, "inferred: train_samples_per_second ÷ train_steps_per_second "
                f"({samples_rate} ÷ {steps_rate})", "inferred")


def resolve_batch(facts: Mapping[str, Fact[Any]],
                  *, run: str | None = None) -> tuple[BatchConfig, list[Finding]]:
    """The batch hierarchy from merged facts, deriving what the arithmetic allows.

    global batch = per_device_batch × grad_accum × data_parallel; given a global batch and two
    of the three factors, the third is derived; tokens per step = global batch × seq_len.
    """
    findings: list[Finding] = []
    get = facts.get
    micro, accum, world = (get(k, UNKNOWN) for k in ("per_device_batch", "grad_accum",
                                                      "world_size"))
    parallel: dict[str, Any] = {k: get(k, UNKNOWN) for k in (
        "tensor_parallel", "pipeline_parallel", "context_parallel")}
    config = BatchConfig(per_device_batch=micro, grad_accum=accum, world_size=world, **parallel)
    model_parallel = config.model_parallel
    stated = get("global_batch") or infer_global_batch(facts)
    hint = world if world.kind == "hint" and world.value is not None else None
    if hint is not None and stated is not None:
        world = UNKNOWN  # a hint (GPUs on the machine) never overrides a stated global batch
    data_parallel = None if world.value is None else world.value // model_parallel
    product = _product(micro.value, accum.value, data_parallel)
    if product is not None:
        derived = Fact(product, "derived: per_device_batch × grad_accum × data_parallel",
                       "inferred")
        if hint is not None:  # shown as resting on the hint, never as a fact
            derived = Fact(product, f"derived from a hint: per_device_batch × grad_accum × "
                           f"world size {hint.value} ({hint.source})", "hint")
            findings.append(Finding(
                "warning", "batch-from-hint",
                f"the global batch {product} rests on a world size of {hint.value} that is only "
                f"a hint ({hint.source}); pass --set world_size=N (or global_batch=N) if the "
                "run used another number of devices", run))
        if stated is not None and stated.value is not None and stated.value != product:
            code = "accum-overshoot" if product > stated.value else "batch-mismatch"
            findings.append(Finding(
                "warning", code,
                f"global batch {stated.value} ({stated.source}) differs from per_device_batch "
                f"{micro.value} × grad_accum {accum.value} × data_parallel "
                f"{data_parallel} = {product}; using {product}", run))
        global_batch = derived
    else:
        global_batch = stated or UNKNOWN
        micro, accum, world = _complete(global_batch, micro, accum, world, model_parallel)
        if hint is not None and world.value is not None and world.value != hint.value:
            findings.append(Finding(
                "info", "hint-conflict",
                f"world size {world.value} ({world.source}) differs from the hint of "
                f"{hint.value} ({hint.source}); the hint is not used", run))
    seq_len = get("seq_len", UNKNOWN)
    tokens = get("tokens_per_step")
    if tokens is None and global_batch.value is not None and seq_len.value is not None:
        tokens = Fact(global_batch.value * seq_len.value, "derived: global_batch × seq_len",
                      "inferred")
    config = BatchConfig(per_device_batch=micro, grad_accum=accum, world_size=world,
                         seq_len=seq_len, global_batch=global_batch,
                         tokens_per_step=tokens or UNKNOWN, **parallel)
    return config, findings


def _product(*factors: int | None) -> int | None:
    return None if any(f is None for f in factors) else math.prod(factors)  # type: ignore[arg-type]


def _complete(global_batch: Fact[int], micro: Fact[int], accum: Fact[int], world: Fact[int],
              model_parallel: int) -> tuple[Fact[int], Fact[int], Fact[int]]:
    """Derive the one unknown factor of global = micro × accum × (world ÷ model_parallel)."""
    total = global_batch.value
    if total is None:
        return micro, accum, world
    data_parallel = None if world.value is None else world.value // model_parallel
    if world.value is None and micro.value and accum.value:
        replicas, rest = divmod(total, micro.value * accum.value)
        if rest == 0 and replicas >= 1:
            world = Fact(replicas * model_parallel,
                         "derived: global_batch ÷ (per_device_batch × grad_accum)", "inferred")
    elif accum.value is None and micro.value and data_parallel:
        value, rest = divmod(total, micro.value * data_parallel)
        if rest == 0 and value >= 1:
            accum = Fact(value, "derived: global_batch ÷ (per_device_batch × data_parallel)",
                         "inferred")
    elif micro.value is None and accum.value and data_parallel:
        value, rest = divmod(total, accum.value * data_parallel)
        if rest == 0 and value >= 1:
            micro = Fact(value, "derived: global_batch ÷ (grad_accum × data_parallel)",
                         "inferred")
    return micro, accum, world


#: What ``--set`` takes from Python: ``KEY=VALUE`` / ``RUN:KEY=VALUE`` strings, or a mapping
#: of ``KEY`` / ``RUN:KEY`` to a value (a string, or a number as a config gives it).
Settings = Iterable[str] | Mapping[str, str | int | float]


def parse_settings(settings: Settings, *,
                   source: str = "--set") -> dict[str | None, dict[str, Fact[Any]]]:
    """``KEY=VALUE`` (every run) and ``RUN:KEY=VALUE`` (one run) into user facts per run name;
    a mapping gives ``KEY`` or ``RUN:KEY`` its value, a number or a string, with the same
    checks (``{"seq_len": 64}`` is ``seq_len=64``; ``{"seq_len": 64.5}`` is an error).

    >>> parse_settings(["seq_len=64", "attn:grad_accum=8"])[None]["seq_len"].value
    64
    >>> parse_settings({"seq_len": 64, "attn:grad_accum": "8"})["attn"]["grad_accum"].value
    8
    """
    if isinstance(settings, Mapping):
        items = [(f"{target}={value!r}", str(target), value) for target, value in settings.items()]
    else:
        items = [_setting(item) for item in ([settings] if isinstance(settings, str)
                                              else settings)]
    out: dict[str | None, dict[str, Fact[Any]]] = {}
    for shown, target, value in items:
        run, colon, key = target.rpartition(":") if ":" in target else ("", "", target)
        value = value.strip() if isinstance(value, str) else value
        if not key.strip() or value in ("", None):
            raise UsageError(f"--set {shown}: expected KEY=VALUE or RUN:KEY=VALUE, "
                             "e.g. --set seq_len=1024")
        fact = user_fact(key.strip(), value, source=source)
        out.setdefault(run.strip() if colon else None, {})[key.strip()] = fact
    return out


def _setting(item: object) -> tuple[str, str, str]:
    """How one ``--set`` string is shown in an error, its target and its value."""
    if not isinstance(item, str):
        raise UsageError(f"settings: {item!r} is not a KEY=VALUE string; give strings such as "
                         "'seq_len=1024', or a mapping such as {'seq_len': 1024}")
    target, eq, value = item.partition("=")
    return repr(item), target, value if eq else ""


def user_fact(key: str, value: Any, *, source: str) -> Fact[Any]:
    """A fact the user stated; raises :class:`UsageError` for an unknown key or a bad value."""
    if key not in FACT_FIELDS:
        raise UsageError(f"{source}: unknown key {key!r}; {did_you_mean(key, FACT_FIELDS)}"
                         f"known keys: {', '.join(FACT_FIELDS)}")
    if key in ("step_metric", "name"):
        return Fact(str(value), source, "user")
    parsed = facts_from_config({key: value}, where=source, kind="user").get(key)
    if parsed is None:
        kind = {"learning_rate": "a number",
                "flops_per_token": "a positive number"}.get(key, "a whole number ≥ 1")
        raise UsageError(f"{source}: {key}={value!r} is not {kind}")
    return Fact(parsed.value, source, "user")


def read_sidecar(folder: Path) -> dict[str | None, dict[str, Fact[Any]]]:
    """Facts from ``runcompare.toml`` in ``folder``: top-level keys for every run there,
    ``[runs.NAME]`` tables for one run. Missing file: no facts."""
    path = folder / SIDECAR
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid TOML ({exc}); fix the file or remove it") from exc
    tables = data.pop("runs", {})
    out: dict[str | None, dict[str, Fact[Any]]] = {None: _sidecar_facts(data, path)}
    for run, table in tables.items():
        if not isinstance(table, dict):
            raise InputError(f"{path}: [runs] must hold tables such as [runs.{run}]")
        out[run] = _sidecar_facts(table, path)
    return out


def _sidecar_facts(table: Mapping[str, Any], path: Path) -> dict[str, Fact[Any]]:
    facts = {}
    for key, value in table.items():
        try:
            fact = user_fact(key, value, source=str(path))
        except UsageError as exc:
            raise InputError(str(exc)) from exc
        facts[key] = Fact(fact.value, f"{path.name}: {key}", "config")
    return facts
