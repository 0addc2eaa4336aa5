"""One look at each folder while the formats detect what a path holds
(``codecs.files.one_look``), and a fresh look at the next detection."""

from __future__ import annotations

import shutil

import runcompare as rc
from runcompare.sources.codecs.files import files_in, folders_in, one_look

from .conftest import DATA

SWEEP = DATA / "batch_sweep"  # HF Trainer output dirs written by the Trainer


def test_a_folder_changed_during_one_look_is_seen_as_at_its_start_then_as_it_is(tmp_path):
    (tmp_path / "a").mkdir()
    with one_look():
        assert [f.name for f in folders_in(tmp_path)] == ["a"]
        (tmp_path / "b").mkdir()
        (tmp_path / "log.txt").write_text("x\n")
        with one_look():  # nested: the outer look
            assert [f.name for f in folders_in(tmp_path)] == ["a"]
        assert files_in(tmp_path) == []
    assert [f.name for f in folders_in(tmp_path)] == ["a", "b"]
    assert [f.name for f in files_in(tmp_path)] == ["log.txt"]


def test_a_run_added_to_a_sweep_between_two_reads_is_read_the_second_time(tmp_path):
    for name in ("b4", "b16"):
        shutil.copytree(SWEEP / name, tmp_path / name)
    first = rc.load_many([tmp_path])
    assert [run.name for run in first] == ["b4", "b16"]
    shutil.copytree(SWEEP / "b8", tmp_path / "b8")
    second = rc.load_many([tmp_path])
    assert [run.name for run in second] == ["b4", "b8", "b16"]
    assert [run.batch.global_batch.value for run in second] == [
        run.batch.global_batch.value for run in rc.load_many([SWEEP / n for n in ("b4", "b8",
                                                                                 "b16")])]
