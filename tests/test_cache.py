"""The cache of parsed runs: round trip, invalidation, a cache that cannot be written."""

from __future__ import annotations

import importlib
import io
import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

import runcompare as rc
from runcompare.cache import cache_dir, points_stream, read_cached, stream_points
from runcompare.model import RAW_SCHEMA, SCALAR_SCHEMA, Fact, Finding, RawLog
from runcompare.sources import REGISTRY, Format

from .conftest import DATA


class Counting:
    """A source whose reads are counted; it returns a RawLog with every field set."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.reads = 0

    @property
    def format(self) -> Format:
        return Format("counting", "counted reads", read=self.read, files=self.files)

    def files(self, path: Path) -> list[Path]:
        return sorted(path.glob("*.log"))

    def read(self, path: Path, *, hints=None) -> RawLog:
        self.reads += 1
        scalars = pl.DataFrame(
            {"metric": ["train/loss", "train/loss", "eval/loss"], "value": [2.5, float("nan"), 1.0],
             "step": [1, 2, 2], "wall_time": [10.0, None, 12.5], "leg": [0, 1, 1]},
            schema=RAW_SCHEMA)
        return RawLog(
            source="counting", path=path, scalars=scalars, step_unit="micro",
            facts={"per_device_batch": Fact(8, "args: batch", "config"),
                   "learning_rate": Fact(3e-4, "args: lr", "config"),
                   "seed": Fact(7.0, "args: seed", "logged"),
                   "name": Fact("attn", "toml", "user")},
            findings=[Finding("warning", "damaged-input", "x.log: byte 3: bad", "attn"),
                      Finding("info", "note", "plain")],
            files=self.files(path), aliases={"train/loss": "loss"}, name="attn",
            leg_starts={1: 2})


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "a.log").write_text("first")
    return folder


def _same(a: RawLog, b: RawLog) -> None:
    assert a.scalars.equals(b.scalars, null_equal=True)
    for name in ("source", "path", "step_unit", "facts", "findings", "files", "aliases", "name",
                 "leg_starts"):
        assert getattr(a, name) == getattr(b, name), name
    assert {k: type(f.value) for k, f in a.facts.items()} == {
        k: type(f.value) for k, f in b.facts.items()}


def test_every_field_survives_the_round_trip(run_dir):
    source = Counting(run_dir)
    first = read_cached(source.format, run_dir)
    second = read_cached(source.format, run_dir)
    assert source.reads == 1
    _same(first, second)
    assert sorted(p.suffix for p in cache_dir().glob("counting-*")) == [".arrow", ".json"]


def test_a_grown_changed_or_new_file_means_a_fresh_read(run_dir):
    source = Counting(run_dir)
    read_cached(source.format, run_dir)
    (run_dir / "a.log").write_text("first and more")
    read_cached(source.format, run_dir)
    assert source.reads == 2
    stat = (run_dir / "a.log").stat()
    os.utime(run_dir / "a.log", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    read_cached(source.format, run_dir)
    assert source.reads == 3
    (run_dir / "b.log").write_text("second")
    read_cached(source.format, run_dir)
    read_cached(source.format, run_dir)
    assert source.reads == 4


def _a_tick_after(file: Path) -> None:
    """Wait until a file written now gets a later ctime than ``file`` (a coarse clock)."""
    probe = file.parent.parent / "probe"
    while True:
        probe.write_text("tick")
        if probe.stat().st_ctime_ns > file.stat().st_ctime_ns:
            return


def test_a_same_size_edit_with_its_mtime_put_back_means_a_fresh_read(run_dir):
    log = run_dir / "a.log"
    source = Counting(run_dir)
    read_cached(source.format, run_dir)
    before = log.stat()
    _a_tick_after(log)
    log.write_text("FIRST")  # edited in place, then `touch -r` / `rsync -t` put the mtime back
    os.utime(log, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (log.stat().st_size, log.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    read_cached(source.format, run_dir)
    assert source.reads == 2
    copy = run_dir.parent / "a.log"  # a same-size file put in its place by `cp -p`, `mv`
    copy.write_text("FiRsT")
    os.utime(copy, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(copy, log)
    read_cached(source.format, run_dir)
    read_cached(source.format, run_dir)
    assert source.reads == 3


def test_the_model_config_an_hf_run_reads_is_in_the_listing(tmp_path):
    run = tmp_path / "hf_tokens"
    shutil.copytree(DATA / "hf_tokens", run)
    assert rc.load(run).facts["transformers_version"].value == "5.24.0"
    config = run / "config.json"
    config.write_text(config.read_text().replace('"5.24.0"', '"5.99.9"'))
    assert rc.load(run).facts["transformers_version"].value == "5.99.9"


#: Hand edits of a cache entry's JSON that leave it valid JSON of the wrong types.
_WRONG_TYPES = {
    "facts a list": lambda meta: {**meta, "facts": []},
    "a finding a number": lambda meta: {**meta, "findings": [1]},
    "points a string": lambda meta: {**meta, "points": "3"},
    "leg starts a list": lambda meta: {**meta, "leg_starts": [1, 2]},
    "a fact's value a word": lambda meta: {**meta, "facts": {
        **meta["facts"], "per_device_batch": {"value": "eight", "source": "x", "kind": "config"}}},
    "the entry a list": lambda meta: [meta],
}


@pytest.mark.parametrize("edit", list(_WRONG_TYPES.values()), ids=list(_WRONG_TYPES))
def test_an_entry_of_wrong_types_is_treated_as_missing(run_dir, edit):
    source = Counting(run_dir)
    first = read_cached(source.format, run_dir)
    (entry,) = cache_dir().glob("counting-*.json")
    text = entry.read_text()
    start = text.index("{")
    entry.write_text(text[:start] + json.dumps(edit(json.loads(text[start:]))))
    again = read_cached(source.format, run_dir)
    assert source.reads == 2
    _same(first, again)
    assert again.facts["per_device_batch"].value == 8


def test_disabled_cache_neither_reads_nor_writes(run_dir):
    source = Counting(run_dir)
    read_cached(source.format, run_dir, enabled=False)
    read_cached(source.format, run_dir, enabled=False)
    assert source.reads == 2 and not list(cache_dir().glob("counting-*"))


def test_a_cache_that_cannot_be_written_is_skipped(run_dir, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    source = Counting(run_dir)
    raw = read_cached(source.format, run_dir)
    read_cached(source.format, run_dir)
    assert source.reads == 2 and raw.points == 3


def test_a_damaged_cache_entry_is_read_again(run_dir):
    source = Counting(run_dir)
    read_cached(source.format, run_dir)
    (entry,) = cache_dir().glob("counting-*.arrow")
    entry.write_bytes(b"PAR1 not really")
    again = read_cached(source.format, run_dir)
    assert source.reads == 2 and again.points == 3
    assert read_cached(source.format, run_dir).points == 3 and source.reads == 2


def test_another_spelling_of_the_path_gets_its_own_spelling_back(run_dir, monkeypatch):
    source = Counting(run_dir)
    read_cached(source.format, run_dir)
    monkeypatch.chdir(run_dir.parent)
    relative = read_cached(source.format, Path("run"))
    assert source.reads == 1
    assert relative.path == Path("run") and relative.files == [Path("run/a.log")]


def test_tensorboard_runs_come_back_identical_from_the_cache(tmp_path):
    folder = tmp_path / "purge"
    shutil.copytree(DATA / "tensorboard" / "torch_purge", folder)
    cold = rc.load(folder, source="tensorboard")
    raw = read_cached(REGISTRY["tensorboard"], folder)
    assert raw.leg_starts == {1: 20}
    warm = rc.load(folder, source="tensorboard")
    assert warm.scalars.equals(cold.scalars) and warm.findings == cold.findings
    with open(next(folder.glob("*tfevents*")), "ab") as file:
        file.write(b"\x00" * 5)  # the run is still writing: a torn record appears
    grown = rc.load(folder, source="tensorboard")
    assert any(f.code == "damaged-input" for f in grown.findings)


def test_hints_are_part_of_the_key(run_dir):
    module = Counting(run_dir)
    read_cached(module.format, run_dir, hints={"step_metric": "a"})
    read_cached(module.format, run_dir, hints={"step_metric": "a"})
    read_cached(module.format, run_dir, hints={"step_metric": "b"})
    assert module.reads == 2


#: Real runs of every format, each read twice: built, then whole from the cache.
WHOLE = ["hf_resumed", "hf_seeds", "hf_ddp", "tensorboard/torch_purge", "tensorboard/seeds",
         "wandb/project", "lightning", "mlflow/file_store", "mlflow/sqlite",
         "text/megatron_restart", "text/torchtitan_resume", "batch_sweep"]


@pytest.mark.parametrize("name", WHOLE)
def test_a_whole_run_from_the_cache_is_the_run_built(name, monkeypatch):
    first = rc.load_many([DATA / name], settings=["seq_len=64"])
    module = importlib.import_module("runcompare.load.build")
    monkeypatch.setattr(module, "build_run", lambda *a, **k: pytest.fail("built again"))
    again = rc.load_many([DATA / name], settings=["seq_len=64"])
    assert len(again) == len(first) > 0
    for a, b in zip(first, again):
        assert b.scalars.equals(a.scalars) and b.to_json() == a.to_json()
        assert (b.batch, b.facts, b.findings, b.hparams, b.legs, b.axis_sources, b.aliases) == (
            a.batch, a.facts, a.findings, a.hparams, a.legs, a.axis_sources, a.aliases)


def test_a_whole_run_is_built_again_when_its_settings_files_or_sidecar_change(tmp_path,
                                                                              monkeypatch):
    run = tmp_path / "sweep" / "run"
    shutil.copytree(DATA / "hf_seeds" / "lr1e-3_seed1", run)
    module = importlib.import_module("runcompare.load.build")
    real, builds = module.build_run, []
    monkeypatch.setattr(module, "build_run",
                        lambda *a, **k: (builds.append(1), real(*a, **k))[1])
    assert rc.load(run).batch.seq_len.value is None and len(builds) == 1
    rc.load(run)
    assert len(builds) == 1  # whole from the cache
    assert rc.load(run, settings=["seq_len=64"]).batch.seq_len.value == 64 and len(builds) == 2
    (tmp_path / "sweep" / "runcompare.toml").write_text("seq_len = 128\n")  # beside the run
    assert rc.load(run).batch.seq_len.value == 128 and len(builds) == 3
    state = run / "trainer_state.json"
    state.write_text(state.read_text().replace('"loss": ', '"loss": 1'))  # losses edited
    edited = rc.load(run)
    assert len(builds) == 4 and edited.scalars.filter(metric="train/loss").height > 0
    rc.load(run)
    assert len(builds) == 4
    assert len(rc.load(run, cache=False).scalars) == len(edited.scalars) and len(builds) == 5


@pytest.mark.parametrize("change", ["edited", "sidecar", "passed over"])
def test_a_run_whose_files_change_while_it_is_built_is_not_kept(tmp_path, monkeypatch, change):
    run = tmp_path / "sweep" / "run"
    shutil.copytree(DATA / "hf_seeds" / "lr1e-3_seed1", run)
    state = run / "trainer_state.json"
    module = importlib.import_module("runcompare.load.build")
    real, builds = module.build_run, []

    def build_and_change(*args, **kwargs):
        built = real(*args, **kwargs)
        if not builds:  # the first build only: the file changes after it was read
            if change == "edited":
                state.write_text(state.read_text().replace('"loss": ', '"loss": 1'))
            elif change == "sidecar":
                (run / "runcompare.toml").write_text("seq_len = 64\n")
            else:
                (run / "to_nowhere").symlink_to(tmp_path / "gone")
        builds.append(built)
        return built

    monkeypatch.setattr(module, "build_run", build_and_change)
    first = rc.load(run)
    assert len(builds) == 1 and not _packs()  # what was built is not what is there now
    again = rc.load(run)
    assert len(builds) == 2 and len(_packs()) == 1
    if change == "edited":
        losses = [r.scalars.filter(metric="train/loss").get_column("value") for r in (first, again)]
        assert losses[1].min() > 10 > losses[0].max()  # "5.5" read as it was, "15.5" now
    elif change == "sidecar":
        assert again.batch.seq_len.value == 64 and first.batch.seq_len.value is None
    else:
        codes = [{f.code for f in r.findings} for r in (first, again)]
        assert "passed-over" in codes[1] - codes[0]
    rc.load(run)
    assert len(builds) == 2  # kept once the files held still


def test_a_cache_folder_removed_between_reads_is_made_again(tmp_path):
    run = rc.load(DATA / "hf_tokens")
    shutil.rmtree(cache_dir())
    again = rc.load(DATA / "hf_tokens")
    assert again.scalars.equals(run.scalars)
    assert len(_packs()) == 1  # the whole run


def test_parsed_sources_are_kept_beside_the_built_run_only_for_large_runs(tmp_path,
                                                                          monkeypatch):
    """A small run's parsed sources are not kept (it parses about as fast as the entry reads
    back); from ``SOURCES_FROM`` bytes they are, and a build with new settings uses them."""
    from runcompare import cache

    run = tmp_path / "run"
    shutil.copytree(DATA / "hf_seeds" / "lr1e-3_seed1", run)
    size = sum(f.stat().st_size for f in run.rglob("*") if f.is_file())
    assert size < cache.SOURCES_FROM
    rc.load(run)
    assert [p.name for p in cache_dir().iterdir()] == ["built"] and len(_packs()) == 1
    shutil.rmtree(cache_dir())
    monkeypatch.setattr(importlib.import_module("runcompare.load.build"), "SOURCES_FROM", 1)
    first = rc.load(run)
    kinds = sorted(p.name.split("-")[0] for p in cache_dir().iterdir())
    assert kinds.count("built") == 1 and len(kinds) > 1  # the run, and its parsed sources
    hf = REGISTRY["hf-trainer"]
    monkeypatch.setitem(hf.__dict__, "read", lambda *a, **k: pytest.fail("parsed again"))
    again = rc.load(run, duplicates="keep-first")  # built again, from the parsed sources
    assert again.scalars.equals(first.scalars)


def _packs() -> list[Path]:
    return sorted(cache_dir().glob("built/*/*.pack"))


@pytest.fixture
def counted_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the runs built (not taken whole from the cache) from here on."""
    module = importlib.import_module("runcompare.load.build")
    real, builds = module.build_run, []

    def build(path, name, *args, **kwargs):
        builds.append(path.name)
        return real(path, name, *args, **kwargs)

    monkeypatch.setattr(module, "build_run", build)
    return builds


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DATA / "hf_seeds", tmp_path / "sweep"))


def test_a_sweep_is_kept_in_one_pack_and_only_a_changed_run_is_built_again(sweep,
                                                                          counted_builds):
    first = rc.load_many([sweep])
    names = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    assert sorted(counted_builds) == names and len(first) == len(names) > 2
    assert len(_packs()) == 1  # one file for the whole sweep
    assert [r.to_json() for r in rc.load_many([sweep])] == [r.to_json() for r in first]
    assert len(counted_builds) == len(names) and len(_packs()) == 1  # nothing built or kept
    state = sweep / names[0] / "trainer_state.json"
    state.write_text(state.read_text().replace('"loss": ', '"loss": 1'))
    again = rc.load_many([sweep])
    assert counted_builds[len(names):] == [names[0]] and len(_packs()) == 2
    assert again[0].scalars.filter(metric="train/loss").get_column("value").min() >= 1
    assert [r.to_json() for r in again[1:]] == [r.to_json() for r in first[1:]]
    rc.load_many([sweep])
    rc.load(sweep / names[1])  # one run alone: the sweep's pack has it (its key differs)
    assert counted_builds[len(names) + 1:] == [names[1]]


def test_packs_are_merged_once_there_are_enough(sweep, counted_builds):
    from runcompare.cache import PACKS

    names = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    rc.load_many([sweep])
    for _ in range(PACKS - 2):  # a run changes before each read: one more pack each time
        (sweep / names[0] / "trainer_state.json").touch()
        rc.load_many([sweep])
    assert len(_packs()) == PACKS - 1
    (sweep / names[1] / "trainer_state.json").touch()
    rc.load_many([sweep])
    assert len(_packs()) == 1  # the eighth took in the seven before it
    built = len(counted_builds)
    assert len(rc.load_many([sweep])) == len(names) and len(counted_builds) == built


def test_a_damaged_pack_is_not_taken_for_a_whole_one(sweep, counted_builds):
    names = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    first = rc.load_many([sweep])
    (pack,) = _packs()
    data = bytearray(pack.read_bytes())
    data[-100] ^= 0xFF  # in the last run's points
    pack.write_bytes(bytes(data))
    again = rc.load_many([sweep])
    assert counted_builds[len(names):] == [names[-1]]  # only its run is built again
    assert [r.to_json() for r in again] == [r.to_json() for r in first]
    assert again[-1].scalars.equals(first[-1].scalars)
    for pack in _packs():
        pack.write_bytes(pack.read_bytes().replace(b'"entries": {"', b'"entries": {"0', 1))
    rc.load_many([sweep])  # an index edited: its digest no longer matches, every run again
    assert len(counted_builds) == 2 * len(names) + 1



def test_two_reads_at_once_both_keep_their_runs(sweep, counted_builds, tmp_path):
    """Two processes reading the same sweep at once (two terminals): each writes its pack, and
    a third read builds nothing."""
    import subprocess
    import sys

    script = f"import runcompare; runcompare.load_many([{str(sweep)!r}], workers=1)"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    both = [subprocess.Popen([sys.executable, "-c", script], env=env) for _ in range(2)]
    assert [process.wait(timeout=120) for process in both] == [0, 0]
    assert len(_packs()) in (1, 2)  # 1: one read found the other's pack
    runs = rc.load_many([sweep])
    assert not counted_builds and len(runs) == 6


def test_every_point_carries_its_runs_name_built_and_read_back():
    """The run column holds one value (model.with_constants): every point has the run's
    name, in runs built afresh and in the same runs read back whole from the cache."""
    paths = [DATA / "hf_seeds", DATA / "tensorboard" / "torch_simple"]
    for read in (rc.load_many(paths), rc.load_many(paths)):  # built, then from the cache
        assert len(read) == 7
        for run in read:
            names = run.scalars.get_column("run")
            assert names.len() == run.scalars.height > 0
            assert names.to_list() == [run.name] * names.len()


def test_a_stream_leaves_out_the_empty_columns_and_the_run_name_and_reads_back_the_same():
    """points_stream writes a column of nulls as its name only (a run of trainer_state.json
    logs no wall time: 7 of its 12 columns are empty), the run's name once, not on every
    point, text as bytes, and values logged as doubles uncompressed after the compressed
    stream (those logged as float32 compress: in it); stream_points makes them again."""
    hf_run = rc.load(DATA / "hf_seeds" / "lr1e-3_seed1", source="hf-trainer", cache=False)
    tb_run = rc.load(DATA / "tensorboard" / "torch_simple", cache=False)
    hf, tb = hf_run.scalars, tb_run.scalars
    for run, points in ((hf_run, hf), (tb_run, tb), (hf_run, hf.clear()), (hf_run, hf.head(1))):
        for same in ({}, {"run": run.name}):
            stream = points_stream(points, same)
            head, _, body = stream.partition(b"\n")
            empty = [c for c in points.columns if c not in same and points.height
                     and points.get_column(c).null_count() == points.height]
            height, empty_written, same_written, split = json.loads(head)
            assert [height, empty_written, same_written] == [points.height, empty, same]
            packed = pl.read_ipc_stream(io.BytesIO(body[:split]))
            plain = pl.read_ipc_stream(io.BytesIO(body[split:])).columns if body[split:] else []
            assert sorted(packed.columns + plain) == sorted(
                c for c in points.columns if c not in empty and c not in same)
            if points is hf or points is tb:  # logged as doubles, and as float32
                assert plain == (["value"] if points is hf else [])
            assert all(packed.get_column(c).dtype == pl.Binary
                       for c in ("run", "metric") if c in packed.columns)
            back = stream_points(stream, SCALAR_SCHEMA)
            assert back.equals(points) and back.schema == points.schema
    doubles = pl.DataFrame({"value": [0.1, 0.2, 0.3]})  # nothing but the uncompressed stream
    assert stream_points(points_stream(doubles), {"value": pl.Float64}).equals(doubles)
    assert "wall_time" in json.loads(points_stream(hf).partition(b"\n")[0])[1]
    assert "wall_time" not in json.loads(points_stream(tb).partition(b"\n")[0])[1]
