"""Runs staged together (issue 32): each step of reading a run (detection and the cache's
look, the read, the build, the cache's entry) done for a few runs before the next step, with
the same runs, findings and errors as one run at a time; no more runs held at once than their
bytes allow. Real HF runs (tests/data/hf_seeds) in a sweep, one of them damaged."""

from __future__ import annotations

import importlib
import shutil

import pytest

import runcompare as rc
from runcompare.cache import cache_dir

from .conftest import DATA

schedule = importlib.import_module("runcompare.load.schedule")
build = importlib.import_module("runcompare.load.build")


@pytest.fixture()
def sweep(tmp_path):
    """The six seed runs twice over (a/, b/) and a run whose trainer_state.json is cut off."""
    for group in "ab":
        for run in sorted((DATA / "hf_seeds").glob("lr*")):
            shutil.copytree(run, tmp_path / group / run.name)
    state = (DATA / "hf_seeds" / "lr1e-3_seed1" / "trainer_state.json").read_bytes()
    cut = tmp_path / "a" / "lr3e-3_seedcut"
    cut.mkdir()
    (cut / "trainer_state.json").write_bytes(state[:len(state) // 2])  # a cut-off file
    return [tmp_path / "a", tmp_path / "b"]


def _read(paths, **options):
    return rc.load_many(paths, settings=["seq_len=64"], **options)


def _seen(runs):
    return [(r.name, r.to_json(), [(f.level, f.code, f.message, f.run) for f in r.findings])
            for r in runs]


def test_runs_staged_together_are_the_runs_staged_one_at_a_time(sweep, monkeypatch):
    together = [_read(sweep, cache=False), _read(sweep), _read(sweep)]  # none, cold, warm
    monkeypatch.setattr(schedule, "TOGETHER", 1)
    alone = _read(sweep, cache=False)
    assert len(alone) == 13 and any(f.code == "damaged-input" for r in alone for f in r.findings)
    for runs in together:
        assert _seen(runs) == _seen(alone)
        assert all(a.scalars.equals(b.scalars) for a, b in zip(runs, alone, strict=True))
    assert _seen(_read(sweep, workers=2)) == _seen(alone)  # chunks staged in a worker too


def _steps(monkeypatch):
    """Which run each read and build step was for, in the order they came."""
    seen = []
    reads, builds = build.read_sidecars, build.build_run
    monkeypatch.setattr(build, "read_sidecars",
                        lambda path: (seen.append(("read", path.name)), reads(path))[1])
    monkeypatch.setattr(build, "build_run", lambda path, name, *args: (
        seen.append(("build", path.name)), builds(path, name, *args))[1])
    return seen


def test_runs_are_read_together_only_while_their_files_are_small(sweep, monkeypatch):
    seen = _steps(monkeypatch)
    runs = sorted(sweep[1].iterdir())[:3]
    rc.load_many(runs)
    names = [p.name for p in runs]
    assert seen == [("read", n) for n in names] + [("build", n) for n in names]
    seen.clear()
    rc.load_many(runs, cache=False)  # read without the cache: not listed, so one at a time
    assert seen == [(step, n) for n in names for step in ("read", "build")]
    seen.clear()
    shutil.rmtree(cache_dir())
    monkeypatch.setattr(schedule, "TOGETHER_BYTES", 1)  # any run's files: more than that
    rc.load_many(runs)
    assert seen == [(step, n) for n in names for step in ("read", "build")]


def test_the_first_error_in_the_runs_order_is_raised(sweep, monkeypatch):
    """A reader's bug in the third run's read is raised, not the one in the fifth run's
    detection (which came first, as every run is detected before any is read)."""
    runs = sorted(sweep[1].iterdir())[:6]
    undetected, unread = runs[4], runs[2]
    formats, reads = schedule._formats, build.read_sources

    def detected(task):
        if task.root == undetected:
            raise RuntimeError("detection of the fifth")
        return formats(task)

    def read(formats_found, path, *args):
        if path == unread:
            raise KeyError("read of the third")
        return reads(formats_found, path, *args)

    monkeypatch.setattr(schedule, "_formats", detected)
    monkeypatch.setattr(build, "read_sources", read)
    with pytest.raises(KeyError, match="read of the third"):
        rc.load_many(runs, cache=False)
    runs[2], runs[4] = runs[4], runs[2]  # now the detection's run comes first
    with pytest.raises(RuntimeError, match="detection of the fifth"):
        rc.load_many(runs, cache=False)
