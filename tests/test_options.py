"""The reading options as one object: what it holds, what it refuses, and that the command
line and the Python API read the same runs with it."""

from __future__ import annotations

import dataclasses
import importlib
import shutil

import pytest

import runcompare as rc
from runcompare.errors import UsageError
from runcompare.load import ReadOptions, read_runs

from .conftest import DATA, SAMPLES


def test_the_options_are_frozen_and_keep_a_copy_of_the_settings():
    settings = ["seq_len=64"]
    options = ReadOptions(settings=settings, cache=False)
    settings.append("attn:grad_accum=8")
    assert options.settings == ("seq_len=64",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.source = "tensorboard"  # type: ignore[misc]
    assert ReadOptions(settings={"seq_len": 64}).settings == {"seq_len": 64}


@pytest.mark.parametrize(("given", "message"), [
    ({"pattern": r"step (?P<step>\d+)", "source": "hf-trainer"},
     "--pattern reads with the text source, not 'hf-trainer'"),
    ({"duplicates": "keep-newest"},
     "--duplicates 'keep-newest': choose one of keep-last, keep-first, all"),
])
def test_options_that_cannot_go_together_are_refused_where_they_are_made(given, message):
    with pytest.raises(UsageError) as caught:
        ReadOptions(**given)
    assert str(caught.value) == message


def test_read_runs_with_the_options_reads_what_load_many_reads_with_the_keywords():
    options = ReadOptions(settings=["seq_len=64"], cache=False)
    by_object = read_runs([SAMPLES / "attn", SAMPLES / "mamba"], options)
    by_keywords = rc.load_many([SAMPLES / "attn", SAMPLES / "mamba"], settings=["seq_len=64"],
                               cache=False)
    assert [r.name for r in by_object] == ["attn", "mamba"]
    for a, b in zip(by_object, by_keywords):
        assert a.scalars.equals(b.scalars) and a.to_json() == b.to_json()
        assert a.batch.seq_len.value == 64 and a.batch.tokens_per_step.value == 16 * 64


def test_the_command_line_passes_its_reading_options_as_one_object(cli, monkeypatch):
    seen: list[ReadOptions] = []
    module = importlib.import_module("runcompare.load")
    real = module.read_runs
    monkeypatch.setattr(module, "read_runs", lambda paths, options: (
        seen.append(options), real(paths, options))[1])
    result = cli("inspect", SAMPLES / "attn", "--set", "seq_len=64", "--no-cache",
                 "--duplicates", "keep-first", "--json")
    assert result.exit_code == 0, result.stderr
    [options] = seen
    assert (options.settings, options.cache, options.duplicates, options.source,
            options.workers) == (("seq_len=64",), False, "keep-first", None, None)


def test_runcompare_toml_is_read_once_for_a_run(tmp_path, monkeypatch):
    run = tmp_path / "sweep" / "run"
    shutil.copytree(DATA / "hf_seeds" / "lr1e-3_seed1", run)
    (tmp_path / "sweep" / "runcompare.toml").write_text("seq_len = 128\n")
    build = importlib.import_module("runcompare.load.build")
    real, read = build.read_sidecar, []
    monkeypatch.setattr(build, "read_sidecar", lambda folder: (read.append(folder),
                                                               real(folder))[1])
    assert rc.load(run, cache=False).batch.seq_len.value == 128
    assert read == [run, run.parent]  # the run's folder, then its parent: each once
