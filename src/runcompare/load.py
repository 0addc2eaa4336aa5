"""Read runs: detect the sources under a path, merge their facts, resolve the batch hierarchy
and put every point on every axis."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .axes import normalize
from .errors import InputError, UsageError
from .model import Fact, Finding, RawLog, Run
from .resolve import merge_facts, parse_settings, read_sidecar, resolve_batch, user_fact
from .sources import detect

__all__ = ["load", "load_many"]


def load(path: str | Path, *, name: str | None = None, source: str | None = None,
         **facts: Any) -> Run:
    """Read one run from ``path``; ``facts`` (e.g. ``seq_len=1024``) override what the logs say.

    >>> run = load("sample_logs/attn")                                  # doctest: +SKIP
    >>> run.frame(x="tokens").filter(metric="train/loss")               # doctest: +SKIP
    """
    user = {key: user_fact(key, value, source="load()") for key, value in facts.items()}
    if name is not None:
        user["name"] = Fact(name, "load()", "user")
    return _load(Path(path), source=source, user=user)


def load_many(paths: Iterable[str | Path], *, source: str | None = None,
              settings: Iterable[str] = (), **facts: Any) -> list[Run]:
    """Read several runs. ``settings`` are ``--set`` strings (``KEY=VALUE`` for every run,
    ``RUN:KEY=VALUE`` for the run named RUN); ``facts`` apply to every run."""
    per_run = parse_settings(settings)
    common = {key: user_fact(key, value, source="load_many()") for key, value in facts.items()}
    common.update(per_run.pop(None, {}))
    paths = [Path(p) for p in paths]
    names = _names(paths)
    unknown = set(per_run) - set(names)
    if unknown:
        raise UsageError(f"--set names no run called {', '.join(sorted(unknown))}; the runs "
                         f"are {', '.join(names)}")
    return [_load(path, source=source, user={**common, **per_run.get(run, {})}, default=run)
            for path, run in zip(paths, names)]


def _names(paths: list[Path]) -> list[str]:
    """Folder names, made unique by their parent folder where two runs share one."""
    names = [_folder_name(p) for p in paths]
    for i, name in enumerate(names):
        if names.count(name) > 1:
            names[i] = f"{paths[i].resolve().parent.name}/{name}"
    return names


def _folder_name(path: Path) -> str:
    path = path.resolve()
    folder = path.parent if path.is_file() else path
    if folder.name.startswith("checkpoint-"):
        folder = folder.parent
    return folder.name


def _load(path: Path, *, source: str | None, user: Mapping[str, Fact[Any]],
          default: str | None = None) -> Run:
    raws, findings = _read_all(path, source)
    chosen = max(raws, key=lambda raw: raw.points)  # first (preferred) source on a tie
    folder = path if path.is_dir() else path.parent
    name = (user.get("name") or Fact(None, "")).value or default or chosen.name \
        or _folder_name(path)
    sidecars = [read_sidecar(f) for f in (folder, folder.parent)]
    sidecar = [s.get(key, {}) for s in sidecars for key in (name, None)]
    facts, conflicts = merge_facts(user, *sidecar, *(raw.facts for raw in raws), run=name)
    batch, derived = resolve_batch(facts, run=name)
    scalars = normalize(chosen, batch, run=name)
    if len(raws) > 1:
        findings.append(Finding("info", "sources-merged",
                                f"points from {chosen.source}; facts from "
                                f"{', '.join(raw.source for raw in raws)}", name))
    findings += [f if f.run else Finding(f.level, f.code, f.message, name)
                 for f in (*(f for raw in raws for f in raw.findings), *conflicts, *derived)]
    return Run(name=name, path=path, format=chosen.source, sources=[r.source for r in raws],
               step_unit=chosen.step_unit, batch=batch, scalars=scalars, facts=facts,
               findings=findings, aliases=chosen.aliases)


def _read_all(path: Path, source: str | None) -> tuple[list[RawLog], list[Finding]]:
    """Every source's reading of ``path``; a source that fails is reported while another reads."""
    raws: list[RawLog] = []
    failures: list[InputError] = []
    for module in detect(path, source=source).values():
        try:
            raws.append(module.read(path))
        except InputError as exc:
            failures.append(exc)
    if not raws:
        raise failures[0]
    findings = [Finding("warning", "source-unreadable", str(exc)) for exc in failures]
    return raws, findings
