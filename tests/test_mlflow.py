"""The MLflow source on real stores (made by scripts/make_lightning_mlflow_logs.py): a file store
and an SQLite database. Damaged inputs are made in tmp_path from copies, as each test says.
"""

from __future__ import annotations

import hashlib
import math
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import runcompare as rc
from runcompare.errors import InputError
from runcompare.model import RAW_SCHEMA
from runcompare.sources import REGISTRY
from runcompare.sources.formats import _mlflow_sqlite as mlflow_sqlite
from runcompare.sources.formats import mlflow

from .conftest import DATA, SAMPLES

STORE = DATA / "mlflow" / "file_store"
MLRUNS = STORE / "mlruns"
DB = DATA / "mlflow" / "sqlite" / "mlflow.db"


def _file_runs() -> dict[str, Path]:
    return {mlflow.run_name(root): root for root in mlflow.expand(STORE)}


def _db_runs() -> dict[str, Path]:
    return {mlflow.run_name(root): root for root in mlflow.expand(DB.parent)}


def _lines(run: Path, key: str) -> list[list[str]]:
    return [line.split() for line in (run / "metrics" / key).read_text().splitlines()]


def _points(raw, metric: str) -> list[tuple[int, float]]:
    frame = raw.scalars.filter(metric=metric)
    return list(zip(frame.get_column("step").to_list(), frame.get_column("value").to_list()))


# -- file store ---------------------------------------------------------------------------


def test_registered_and_each_live_run_of_a_file_store_is_a_root():
    assert REGISTRY["mlflow"] is mlflow.FORMAT
    for path in (STORE, MLRUNS):
        assert mlflow.sniff(path)
        roots = mlflow.expand(path)
        assert [mlflow.run_name(r) for r in roots] == ["accum2", "accum1"]  # "deleted" skipped
        assert all(r.parent.parent == MLRUNS for r in roots)
    run = _file_runs()["accum2"]
    assert mlflow.expand(run) == [run] and mlflow.expand(run.parent) == mlflow.expand(STORE)


def test_file_store_points_are_the_metric_file_lines():
    run = _file_runs()["accum2"]
    raw = REGISTRY["mlflow"].read_at(run)
    lines = _lines(run, "train/loss")
    assert _points(raw, "train/loss") == [(int(s), float(v)) for _, v, s in lines]
    assert [int(s) for _, _, s in lines] == list(range(1, 25))
    assert lines[-1][1] == "3.9545921087265015"
    wall = raw.scalars.filter(metric="train/loss").get_column("wall_time").to_list()
    assert wall == [int(t) / 1000 for t, _, _ in lines]
    assert raw.scalars.filter(metric="eval/loss").get_column("step").to_list() == [8, 16, 24]
    assert raw.scalars.schema == pl.Schema(RAW_SCHEMA) and raw.step_unit == "optimizer"
    assert raw.name == "accum2" and raw.source == "mlflow"


def test_keys_with_a_slash_are_rebuilt_from_subfolders():
    raw = REGISTRY["mlflow"].read_at(_file_runs()["accum1"])
    assert sorted(raw.scalars.get_column("metric").unique()) == [
        "eval/loss", "train/grad_norm", "train/learning_rate", "train/loss",
        "train/num_input_tokens_seen"]
    assert raw.aliases == {"train/grad_norm": "grad_norm"}
    assert raw.points == 24 * 4 + 3


def test_params_are_facts_with_their_source():
    facts = REGISTRY["mlflow"].read_at(_file_runs()["accum2"]).facts
    assert facts["per_device_batch"].value == 4
    assert facts["per_device_batch"].source == "mlflow params: batch_size"
    assert facts["grad_accum"].value == 2
    assert facts["grad_accum"].source == "mlflow params: gradient_accumulation_steps"
    assert facts["seq_len"].value == 32 and facts["max_steps"].value == 24
    assert facts["learning_rate"].value == 0.003 and facts["seq_len"].kind == "config"


def test_the_step_unit_is_an_assumption_that_is_said():
    finding = next(f for f in REGISTRY["mlflow"].read_at(_file_runs()["accum2"]).findings
                   if f.code == "step-unit-assumed")
    assert finding.level == "info" and "optimizer steps" in finding.message


def test_files_are_every_file_read():
    run = _file_runs()["accum2"]
    found = mlflow.files(run)
    assert found[0] == run / "meta.yaml" and run / "metrics" / "train" / "loss" in found
    assert run / "params" / "batch_size" in found and run / "tags" / "mlflow.runName" in found


def test_a_deleted_run_read_directly_says_so():
    deleted = next(r for r in MLRUNS.glob("*/*") if (r / "meta.yaml").is_file()
                   and "lifecycle_stage: deleted" in (r / "meta.yaml").read_text())
    raw = REGISTRY["mlflow"].read_at(deleted)
    assert raw.name == "deleted" and _points(raw, "train/loss") == [(1, 9.0)]
    assert any(f.code == "deleted-run" for f in raw.findings)


def test_a_folder_of_several_runs_read_alone_names_them():
    with pytest.raises(InputError, match=r"holds 2 MLflow runs \(accum2 .*accum1"):
        REGISTRY["mlflow"].read_at(STORE)


def test_load_many_on_a_file_store_puts_runs_on_samples_and_tokens():
    runs = rc.load_many([STORE], settings=["world_size=1"], cache=False)
    assert [r.format for r in runs] == ["mlflow", "mlflow"]
    by_batch = {r.batch.global_batch.value: r for r in runs}
    assert set(by_batch) == {8, 4}  # accum2: 4 × 2, accum1: 4 × 1
    accum1 = by_batch[4]
    assert accum1.axis_sources["tokens"] == "logged counter train/num_input_tokens_seen"
    last = accum1.frame("tokens").filter(metric="train/loss").sort("step").row(-1, named=True)
    assert (last["step"], last["samples"], last["tokens"]) == (24, 96, 3072)
    assert by_batch[8].micro_steps == 48


def _copy_run(tmp_path: Path, name: str = "accum2") -> Path:
    target = tmp_path / "run" / _file_runs()[name].name
    shutil.copytree(_file_runs()[name], target)
    return target


def test_two_and_five_field_lines_and_bad_lines(tmp_path):
    # hand-edited copy of a real run: MLflow's other line forms (2 fields from before steps
    # existed, 5 with a dataset) and lines that are not metric lines
    run = _copy_run(tmp_path)
    with (run / "metrics" / "grad_norm").open("a") as handle:
        handle.write("1795947803600 0.5\n1795947803601 0.25 25 eval-set 3f2a1b\n")
        handle.write("garbage\n1795947803602 zero 26\n1795947803603 0.1 2.5\n")
    raw = REGISTRY["mlflow"].read_at(run)
    assert _points(raw, "train/grad_norm")[-2:] == [(0, 0.5), (25, 0.25)]
    finding = next(f for f in raw.findings if f.code == "damaged-input")
    assert finding.message.startswith("3 MLflow metric lines are not `timestamp value [step]`")
    assert "grad_norm line 27" in finding.message


def test_a_cut_off_last_metric_line_is_dropped(tmp_path):
    # hand-damaged copy: the last line of train/loss loses its step and newline
    run = _copy_run(tmp_path)
    file = run / "metrics" / "train" / "loss"
    file.write_bytes(file.read_bytes()[:-4])
    raw = REGISTRY["mlflow"].read_at(run)
    assert raw.scalars.filter(metric="train/loss").get_column("step").max() == 23
    assert any("line 24 is cut off" in f.message for f in raw.findings)


def test_nan_and_inf_lines_are_kept(tmp_path):
    # hand-edited copy: lines as MLflow writes float("nan") and float("inf")
    run = _copy_run(tmp_path)
    with (run / "metrics" / "train" / "loss").open("a") as handle:
        handle.write("1795947803700 nan 25\n1795947803701 -inf 26\n")
    values = REGISTRY["mlflow"].read_at(run).scalars.filter(metric="train/loss").get_column("value")
    assert math.isnan(values[-2]) and values[-1] == -math.inf


# -- SQLite -------------------------------------------------------------------------------


def test_each_live_run_of_a_database_is_a_virtual_root():
    for path in (DB, DB.parent):
        assert mlflow.sniff(path)
        roots = mlflow.expand(path)
        assert [mlflow.run_name(r) for r in roots] == ["accum2", "accum1", "lightning"]
        assert all(r.parent == DB and not r.exists() and mlflow.sniff(r) for r in roots)
    root = _db_runs()["accum2"]
    assert mlflow.expand(root) == [root] and mlflow.files(root) == [DB]


def test_both_stores_give_the_same_points_and_facts():
    for name in ("accum2", "accum1"):
        from_db, from_files = REGISTRY["mlflow"].read_at(_db_runs()[name]), REGISTRY["mlflow"].read_at(_file_runs()[name])
        columns = ["metric", "step", "value"]
        assert (from_db.scalars.sort(columns).select(columns).to_dicts()
                == from_files.scalars.sort(columns).select(columns).to_dicts())
        assert from_db.name == name
        assert {k: f.value for k, f in from_db.facts.items()} == {
            k: f.value for k, f in from_files.facts.items()}
    assert _db_runs()["accum2"] != _file_runs()["accum2"]
    fact = REGISTRY["mlflow"].read_at(_db_runs()["accum2"]).facts["grad_accum"]
    assert fact.source == "mlflow.db params: gradient_accumulation_steps"


def test_a_lightning_run_in_mlflow_keeps_lightnings_steps_and_says_so():
    raw = REGISTRY["mlflow"].read_at(_db_runs()["lightning"])
    assert raw.scalars.filter(metric="train/loss").get_column("step").to_list() == list(range(24))
    assert raw.aliases["train/loss"] == "train_loss_step" and raw.aliases["eval/loss"] == "val_loss"
    assert raw.facts["grad_accum"].source == "mlflow.db params: accumulate_grad_batches"
    finding = next(f for f in raw.findings if f.code == "step-unit-assumed")
    assert "Lightning's MLFlowLogger" in finding.message


def test_the_database_is_never_written(tmp_path):
    copy = tmp_path / "mlflow.db"
    shutil.copyfile(DB, copy)
    before = (hashlib.sha256(copy.read_bytes()).hexdigest(), copy.stat().st_mtime_ns)
    for root in mlflow.expand(copy):
        REGISTRY["mlflow"].read_at(root)
    assert (hashlib.sha256(copy.read_bytes()).hexdigest(), copy.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _all_points(db: Path) -> list[tuple[str, str, int, float]]:
    return sorted((mlflow.run_name(root), *row) for root in mlflow.expand(db)
                  for row in REGISTRY["mlflow"].read_at(root).scalars
                  .select("metric", "step", "value").iter_rows())


def test_a_wal_mode_database_is_read_without_creating_files_beside_it(tmp_path):
    # a real WAL-mode database: the checked-in one switched by sqlite3, closed cleanly
    copy = tmp_path / "mlflow.db"
    shutil.copyfile(DB, copy)
    conn = sqlite3.connect(copy)
    assert conn.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    conn.close()
    before = _digests(tmp_path)
    assert list(before) == ["mlflow.db"]
    assert _all_points(copy) == _all_points(DB) and len(_all_points(copy)) == 280
    assert _digests(tmp_path) == before  # no mlflow.db-wal, no mlflow.db-shm


def test_changes_a_live_writer_holds_in_the_wal_are_read_and_nothing_is_touched(tmp_path):
    # a writer that committed rows to the WAL and is still open (no checkpoint into the file)
    copy = tmp_path / "mlflow.db"
    shutil.copyfile(DB, copy)
    writer = sqlite3.connect(copy)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        run_id = _db_runs()["accum1"].name
        writer.execute("INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                       "VALUES ('train/loss', 0.125, 1795947809999, ?, 99, 0)", (run_id,))
        writer.commit()
        assert (tmp_path / "mlflow.db-wal").stat().st_size > 0
        before = _digests(tmp_path)
        loss = REGISTRY["mlflow"].read_at(copy / run_id).scalars.filter(metric="train/loss")
        assert loss.filter(step=99).get_column("value").to_list() == [0.125]
        assert _digests(tmp_path) == before
    finally:
        writer.close()


def test_a_killed_writers_journal_is_rolled_back_in_a_copy_and_left_in_place(tmp_path):
    # a real hot journal: a writer killed inside a transaction that spilled pages to the file
    copy = tmp_path / "mlflow.db"
    shutil.copyfile(DB, copy)
    writer = ("import os, sqlite3\n"
              f"conn = sqlite3.connect({str(copy)!r}, isolation_level=None)\n"
              "conn.execute('PRAGMA cache_size=1')\n"
              "conn.execute('BEGIN')\n"
              "conn.execute('UPDATE metrics SET value = value + 1000')\n"
              "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", writer], check=True)
    assert (tmp_path / "mlflow.db-journal").stat().st_size > 0
    before = _digests(tmp_path)
    assert _all_points(copy) == _all_points(DB)  # the committed values, none + 1000
    assert _digests(tmp_path) == before


def test_metric_rows_of_the_wrong_type_are_skipped_with_a_finding(tmp_path):
    # hand-edited copy: SQLite keeps any type in any column
    copy = tmp_path / "mlflow.db"
    shutil.copyfile(DB, copy)
    run_id = _db_runs()["accum2"].name
    with sqlite3.connect(copy) as conn:
        conn.execute("UPDATE metrics SET value = 'abc' WHERE rowid = (SELECT min(rowid) FROM "
                     "metrics WHERE run_uuid = ?)", (run_id,))
    conn.close()
    want = REGISTRY["mlflow"].read_at(DB / run_id).scalars.height
    raw = REGISTRY["mlflow"].read_at(copy / run_id)
    assert raw.scalars.height == want - 1
    finding = next(f for f in raw.findings if f.code == "damaged-input")
    assert "1 metric rows of run 'accum2'" in finding.message and "skipped" in finding.message


@pytest.mark.parametrize("name", ["mlflow.db", "runs.db"])
def test_bytes_that_are_not_utf8_are_an_error_naming_the_database(tmp_path, cli, name):
    # hand-damaged copies: a byte that is not UTF-8 in the schema (SQLite's own message then
    # holds it) and in a run's name
    data = bytearray(DB.read_bytes())
    data[data.index(b'CREATE TABLE "metrics"') + 8] = 0xA0
    schema = tmp_path / "schema" / name
    schema.parent.mkdir()
    schema.write_bytes(bytes(data))
    names = tmp_path / "names" / name
    names.parent.mkdir()
    shutil.copyfile(DB, names)
    with sqlite3.connect(names) as conn:
        conn.execute("UPDATE runs SET name = CAST(X'C5FF' AS TEXT)")
    conn.close()
    unreadable = f"{name}: cannot be read as an MLflow SQLite database"
    # a database not named mlflow.db whose tables cannot be listed is not taken for MLflow's
    said = {schema: unreadable if name == "mlflow.db" else f"{name}: no training logs found",
            names: unreadable}
    for damaged, message in said.items():
        result = cli("inspect", damaged, "--no-cache")
        assert result.exit_code == 1 and message in result.stderr, result.stderr


def _damaged(data: bytes, seed: int) -> bytes:
    """``data`` cut short, with a stretch zeroed, or with bits flipped (by ``seed``)."""
    rng = random.Random(seed)
    out = bytearray(data)
    if seed % 3 == 0:
        return bytes(out[:rng.randrange(len(out))])
    if seed % 3 == 1:
        start = rng.randrange(len(out))
        out[start:start + 4096] = bytes(len(out[start:start + 4096]))
        return bytes(out)
    for _ in range(rng.randint(1, 40)):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def test_a_damaged_database_beside_another_log_is_a_finding_or_an_error_line(tmp_path):
    # generated damage to real copies, each beside a real trainer_state.json: every command on
    # the folder reads the trainer state or stops with one clear error, never a traceback
    data = DB.read_bytes()
    for seed in range(120):
        folder = tmp_path / str(seed)
        folder.mkdir()
        shutil.copyfile(SAMPLES / "attn" / "trainer_state.json", folder / "trainer_state.json")
        (folder / ("mlflow.db", "runs.db", "x.sqlite")[seed % 3]).write_bytes(
            _damaged(data, seed))
        try:
            rc.load_many([folder], cache=False, settings=["world_size=1"])
        except rc.RuncompareError:
            pass


def test_nan_and_inf_stored_the_mlflow_way_come_back(tmp_path):
    # hand-edited copy: rows as MLflow's SQL store writes NaN (0.0, is_nan=1) and ±inf (±max)
    copy = tmp_path / "mlflow.db"
    shutil.copyfile(DB, copy)
    run_id = _db_runs()["accum2"].name
    with sqlite3.connect(copy) as conn:
        conn.executemany(
            "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
            "VALUES ('train/loss', ?, ?, ?, ?, ?)",
            [(0.0, 1795947803700, run_id, 25, 1), (1.7976931348623157e308, 1795947803701,
                                                   run_id, 26, 0),
             (-1.7976931348623157e308, 1795947803702, run_id, 27, 0)])
    conn.close()
    loss = REGISTRY["mlflow"].read_at(copy / run_id).scalars.filter(metric="train/loss")
    values = loss.filter(pl.col("step") > 24).sort("step").get_column("value")
    assert math.isnan(values[0]) and values[1] == math.inf and values[2] == -math.inf


def test_a_damaged_database_is_an_input_error_naming_it(tmp_path):
    # hand-damaged copies: garbage named mlflow.db, and the real db with its pages overwritten
    garbage = tmp_path / "a" / "mlflow.db"
    garbage.parent.mkdir()
    garbage.write_bytes(b"\x00\xff not sqlite" * 100)
    assert mlflow.sniff(garbage.parent) and mlflow.expand(garbage.parent) == [garbage]
    with pytest.raises(InputError, match=r"mlflow\.db: cannot be read as an MLflow SQLite"):
        REGISTRY["mlflow"].read_at(garbage.parent)
    broken = tmp_path / "b" / "mlflow.db"
    broken.parent.mkdir()
    data = bytearray(DB.read_bytes())
    data[100:len(data)] = bytes(len(data) - 100)
    broken.write_bytes(bytes(data))
    with pytest.raises(InputError, match="cannot be read as an MLflow SQLite database"):
        REGISTRY["mlflow"].read_at(broken)


def test_an_unknown_run_id_lists_the_live_ones():
    with pytest.raises(InputError, match="no run with id 'nope'"):
        REGISTRY["mlflow"].read_at(DB / "nope")


def test_an_sqlite_file_of_another_program_is_not_claimed(tmp_path):
    # hand-made: an SQLite database without MLflow's tables
    other = tmp_path / "cache.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    assert not mlflow_sqlite.is_database(other) and not mlflow.sniff(tmp_path)


def test_load_many_on_a_database_gives_one_run_per_run_row():
    runs = rc.load_many([DB.parent], settings=["world_size=1"], cache=False)
    assert [r.format for r in runs] == ["mlflow"] * 3
    assert [r.batch.global_batch.value for r in runs] == [8, 4, 8]


def test_the_page_reader_reads_every_table_as_sqlite_does():
    from runcompare.sources.codecs.sqlite_pages import Database

    pages = Database(DB.read_bytes())
    with sqlite3.connect(f"file:{DB}?immutable=1", uri=True) as conn:
        for name in pages.tables:
            table = pages.table(name)
            rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
            assert sorted(map(tuple, table.rows), key=repr) == sorted(rows, key=repr), name
            assert table.lost_pages == 0
    conn.close()


@pytest.mark.parametrize("kept", [0.95, 0.9, 0.8, 0.7])
def test_a_database_cut_short_keeps_the_rows_of_its_surviving_pages(tmp_path, kept):
    """The real database cut (SQLite refuses every query on it): the runs are read page by
    page, each point one the whole file holds, with a damaged-input warning."""
    whole = set(_all_points(DB))
    cut = tmp_path / "mlflow.db"
    data = DB.read_bytes()
    cut.write_bytes(data[:int(len(data) * kept)])
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        sqlite3.connect(f"file:{cut}?immutable=1", uri=True).execute(
            "SELECT count(*) FROM metrics").fetchone()
    points = set(_all_points(cut))
    assert points and points <= whole
    if kept >= 0.9:
        assert points == whole  # the metrics' pages lie before the cut
    raw = REGISTRY["mlflow"].read_at(mlflow.expand(cut)[0])
    message = {f.code: f.message for f in raw.findings}["damaged-input"]
    assert "SQLite refuses this database" in message and "read page by page" in message


def test_a_database_cut_before_its_tables_is_still_a_clear_error(tmp_path):
    cut = tmp_path / "mlflow.db"
    cut.write_bytes(DB.read_bytes()[:4096])
    with pytest.raises(InputError, match=r"mlflow\.db: cannot be read as an MLflow SQLite"):
        _all_points(cut)


KERAS = DATA / "mlflow" / "keras_autolog"


def _metric_file(key: str) -> list[tuple[int, float]]:
    """(step, value) of a metric file of the autolog run, read as MLflow writes it."""
    (run,) = [p for p in (KERAS / "mlruns").glob("*/*") if (p / "metrics").is_dir()]
    lines = (run / "metrics" / key).read_text().split()
    return [(int(lines[i + 2]), float(lines[i + 1])) for i in range(0, len(lines), 3)]


def test_keras_autolog_logs_per_epoch_and_the_step_unit_says_so(cli):
    got = cli.json("inspect", KERAS, "--no-cache")
    assert got["step_unit"] == "epoch" and got["format"] == "mlflow"
    (said,) = [f for f in got["findings"] if f["code"] == "step-is-epoch"]
    assert "mlflow.tensorflow.autolog" in said["message"]
    assert "step-unit-assumed" not in [f["code"] for f in got["findings"]]
    run = rc.load(KERAS, cache=False)
    for key, metric in (("loss", "train/loss"), ("val_loss", "eval/loss")):
        points = run.scalars.filter(metric=metric).sort("step")
        assert points.select("step", "value").rows() == _metric_file(key)
        # 4 epochs (params/epochs), logged at epochs 0..3
        assert points.get_column("epoch").to_list() == [0.0, 1.0, 2.0, 3.0]


def test_a_run_logged_by_hand_is_still_taken_as_optimizer_steps():
    raw = REGISTRY["mlflow"].read_at(_file_runs()["accum2"])
    assert raw.step_unit == "optimizer"
