"""One look at each folder and path while the formats detect and read what a path holds
(``codecs.files.one_look``), and a fresh look at the next detection."""

from __future__ import annotations

import os
import shutil

import pytest

import runcompare as rc
from runcompare.load import schedule
from runcompare.load.build import Given
from runcompare.sources.codecs.files import (
    files_below,
    files_in,
    folders_in,
    is_dir,
    is_file,
    one_look,
    resolved,
)

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


def test_what_a_path_is_is_looked_at_once_inside_a_look_and_said_as_pathlib_says_it(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "trainer_state.json").write_text("{}")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    os.mkfifo(tmp_path / "fifo")
    paths = [tmp_path / n for n in ("run", "run/trainer_state.json", "dangling", "fifo",
                                    "missing", "run/trainer_state.json/below")]
    assert [(is_file(p), is_dir(p)) for p in paths] == [(p.is_file(), p.is_dir()) for p in paths]
    assert [(is_file(p), is_dir(p)) for p in paths[:2]] == [(False, True), (True, False)]
    with one_look():
        assert is_file(paths[1])
        (tmp_path / "run" / "trainer_state.json").unlink()
        assert is_file(paths[1])  # the look's moment
    assert not is_file(paths[1])  # a fresh look


def test_a_path_is_resolved_as_pathlib_resolves_it_and_once_inside_a_look(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    os.symlink(tmp_path / "a", tmp_path / "link")
    paths = [tmp_path / n for n in ("a", "link", "link/file", "missing/x", "a/../b")]
    assert [resolved(p) for p in paths] == [p.resolve() for p in paths]
    assert resolved(tmp_path / "link") == tmp_path / "a"
    with one_look():
        assert resolved(tmp_path / "link") == tmp_path / "a"
        (tmp_path / "link").unlink()
        os.symlink(tmp_path / "b", tmp_path / "link")
        assert resolved(tmp_path / "link") == tmp_path / "a"  # the look's moment
    assert resolved(tmp_path / "link") == tmp_path / "b"  # a fresh look


def test_a_path_pathlib_may_not_look_at_raises_again_inside_a_look(tmp_path, monkeypatch):
    real = os.stat

    def denied(path, *args, **kwargs):
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", denied)
    with one_look():
        for _ in range(2):
            with pytest.raises(PermissionError):
                is_dir(tmp_path / "locked")


def test_files_below_finds_what_glob_finds(tmp_path):
    for rel in ("a/meta.yaml", "b/c/meta.yaml", ".hidden/meta.yaml", "a/other.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    for depth in (1, 2):
        assert sorted(files_below(tmp_path, "meta.yaml", depth)) == sorted(
            tmp_path.glob("*/" * depth + "meta.yaml"))


def test_reading_a_run_of_a_sweep_stats_each_path_a_few_times_not_each_format_anew(
        tmp_path, monkeypatch):
    """177 stats (139 of the run's folder) before the look spanned detection and the read;
    40 (10) with it."""
    shutil.copytree(SWEEP / "b4", tmp_path / "b4")
    real, counted = os.stat, []

    def counting(path, *args, **kwargs):
        counted.append(str(path))
        return real(path, *args, **kwargs)

    root = tmp_path / "b4"
    task = schedule.Task(root, root.name, False, root.name, Given({}, {}, {}, "keep-last"),
                         None, None, False, True)
    monkeypatch.setattr(os, "stat", counting)
    read = schedule.stage(task)
    assert read.run is not None and read.run.scalars.height > 0
    of_root = [p for p in counted if p == str(tmp_path / "b4")]
    assert len(of_root) <= 16, len(of_root)
    assert len(counted) <= 60, len(counted)

