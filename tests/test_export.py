"""Exports of real runs read back by the tools they are for: polars, DuckDB, pandas, TensorBoard."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
import time
from pathlib import Path
from urllib.parse import unquote

import pandas as pd
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer

import runcompare as rc
from runcompare import export as export_module
from runcompare.export import encode_name, export, read_export
from runcompare.model import SCALAR_SCHEMA

from .conftest import DATA, SAMPLES

PATHS = (SAMPLES / "mamba", SAMPLES / "attn", DATA / "hf_tokens", DATA / "hf_ddp",
         DATA / "hf_global32", DATA / "hf_resumed")
#: Names a folder cannot hold as they are: a path separator, spaces, `=`, `%`, HTML, a leading
#: dot, digits a reader could take for a number.
AWKWARD = ("a/b <script>alert(1)</script>", "k=v 50%", "..", "007")


@pytest.fixture(scope="module")
def runs() -> list[rc.Run]:
    """The real runs, each with points on the step axis; cache off (module scope)."""
    return rc.load_many(PATHS, cache=False)


@pytest.fixture(scope="module")
def token_runs(runs) -> list[rc.Run]:
    """The runs that know their tokens (seq_len from sample_logs/runcompare.toml, or logged)."""
    return [run for run in runs if run.name in ("mamba", "attn", "hf_tokens", "hf_resumed")
            and run.scalars.get_column("tokens").null_count() == 0]


def renamed(run: rc.Run, name: str) -> rc.Run:
    return dataclasses.replace(run, name=name,
                               scalars=run.scalars.with_columns(run=pl.lit(name)))


def with_special_values(run: rc.Run) -> rc.Run:
    """A real run whose first points hold NaN, ±inf, a null epoch and wall time, and awkward
    floats."""
    row = pl.int_range(pl.len())
    special = {0: float("nan"), 1: float("inf"), 2: float("-inf"), 3: 0.1 + 0.2, 4: 5e-324}
    value = pl.col("value")
    for index, number in special.items():
        value = pl.when(row == index).then(number).otherwise(value)
    scalars = run.scalars.with_columns(
        value=value, epoch=pl.when(row == 5).then(None).otherwise(pl.col("epoch")),
        wall_time=pl.when(row == 0).then(None).otherwise(pl.col("wall_time")))
    return dataclasses.replace(run, scalars=scalars)


def assert_same_points(read: pl.DataFrame, runs: list[rc.Run]) -> None:
    """Same columns, types, rows per run and values (NaN equals NaN, nulls stay nulls)."""
    assert read.schema == pl.Schema(SCALAR_SCHEMA)
    assert read.height == sum(run.scalars.height for run in runs)
    for run in runs:
        got = read.filter(pl.col("run") == run.name).sort(pl.all())
        want = run.scalars.select(list(SCALAR_SCHEMA)).sort(pl.all())
        assert_frame_equal(got, want, check_exact=True)


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# parquet ---------------------------------------------------------------------------------------

def test_parquet_is_a_hive_dataset_polars_scans(runs, tmp_path):
    out = tmp_path / "runs.parquet"
    done = export(runs, out)
    assert done.format == "parquet" and done.runs == len(runs)
    assert done.files == [out / f"run={run.name}" / "part-0.parquet" for run in runs]
    read = pl.scan_parquet(out, hive_partitioning=True).collect()
    assert_same_points(read.select(list(SCALAR_SCHEMA)), runs)


def test_parquet_keeps_nan_inf_and_nulls(runs, tmp_path):
    special = [with_special_values(run) for run in runs[:2]]
    export(special, tmp_path / "runs.parquet")
    read = read_export(tmp_path / "runs.parquet")
    assert_same_points(read, special)
    values = read.filter(run=special[0].name).get_column("value")
    assert values.is_nan().sum() >= 1 and values.is_infinite().sum() >= 2


def test_awkward_run_names_are_percent_encoded_partitions(runs, tmp_path):
    named = [renamed(run, name) for run, name in zip(runs, AWKWARD)]
    out = tmp_path / "runs.parquet"
    export(named, out)
    folders = sorted(p.name for p in out.iterdir())
    assert folders == sorted(f"run={encode_name(name)}" for name in AWKWARD)
    assert all(p.parent.parent == out for p in out.rglob("*.parquet"))  # nothing escaped
    assert [unquote(folder.removeprefix("run=")) for folder in folders] == sorted(AWKWARD)
    read = pl.scan_parquet(out, hive_partitioning=True).collect()
    assert set(read.get_column("run")) == set(AWKWARD)
    assert_same_points(read.select(list(SCALAR_SCHEMA)), named)


def test_duckdb_reads_the_dataset_directly(runs, tmp_path):
    import duckdb
    named = [renamed(with_special_values(run), name) for run, name in zip(runs, AWKWARD)]
    out = tmp_path / "runs.parquet"
    export(named, out)
    columns = ", ".join(SCALAR_SCHEMA)
    relation = duckdb.sql(f"select {columns} from read_parquet('{out}/**/*.parquet', "
                          "hive_partitioning=true)")
    assert [str(t) for t in relation.types] == ["VARCHAR", "VARCHAR", "DOUBLE", "BIGINT",
                                                "BIGINT", "BIGINT", "BIGINT", "DOUBLE",
                                                "DOUBLE", "DOUBLE", "DOUBLE", "DOUBLE"]
    read = pl.DataFrame(relation.fetchall(), schema=SCALAR_SCHEMA, orient="row")
    assert_same_points(read, named)


def test_pandas_reads_the_dataset_with_partitioning_off(runs, tmp_path):
    export(runs[:2], tmp_path / "runs.parquet")
    frame = pd.read_parquet(tmp_path / "runs.parquet", partitioning=None)
    assert list(frame.columns) == list(SCALAR_SCHEMA)
    assert frame.groupby("run").size().to_dict() == {r.name: r.scalars.height for r in runs[:2]}


def test_a_single_run_is_a_dataset_too(runs, tmp_path):
    done = export(runs[:1], tmp_path / "one")
    assert done.files == [tmp_path / "one" / "run=mamba" / "part-0.parquet"]
    assert_same_points(read_export(tmp_path / "one", format="parquet"), runs[:1])


# csv and jsonl ---------------------------------------------------------------------------------

def test_csv_round_trips_with_its_schema(runs, tmp_path):
    special = [with_special_values(run) for run in runs]
    done = export(special, tmp_path / "runs.csv")
    assert done.format == "csv" and done.files == [tmp_path / "runs.csv"]
    header, first = (tmp_path / "runs.csv").read_text().splitlines()[:2]
    assert header == ",".join(SCALAR_SCHEMA) and ",NaN," in first
    assert_same_points(pl.read_csv(tmp_path / "runs.csv", schema=SCALAR_SCHEMA), special)
    assert_same_points(read_export(tmp_path / "runs.csv"), special)


def test_jsonl_is_strict_json_and_round_trips(runs, tmp_path):
    special = [renamed(with_special_values(run), name) for run, name in zip(runs, AWKWARD)]
    export(special, tmp_path / "runs.jsonl")
    lines = (tmp_path / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == sum(run.scalars.height for run in special)

    def reject(constant: str) -> None:
        raise AssertionError(f"not strict JSON: {constant}")

    rows = [json.loads(line, parse_constant=reject) for line in lines]
    assert list(rows[0]) == list(SCALAR_SCHEMA)
    assert [row["value"] for row in rows[:3]] == ["NaN", "Infinity", "-Infinity"]
    assert rows[3]["value"] == 0.1 + 0.2 and rows[4]["value"] == 5e-324
    assert rows[5]["epoch"] is None and rows[0]["wall_time"] is None
    assert_same_points(read_export(tmp_path / "runs.jsonl"), special)


# tensorboard -----------------------------------------------------------------------------------

def read_tensorboard(folder: Path) -> pl.DataFrame:
    """Every scalar of one run folder, read by TensorBoard's own event accumulator."""
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    points = [(tag, event.step, event.value, event.wall_time)
              for tag in accumulator.Tags()["scalars"] for event in accumulator.Scalars(tag)]
    return pl.DataFrame(points, orient="row", schema={
        "metric": pl.String, "x": pl.Int64, "value": pl.Float64, "wall_time": pl.Float64})


def expected_events(run: rc.Run, x: str) -> pl.DataFrame:
    """The run's points as TensorBoard keeps them: step = the axis, values as float32."""
    return run.frame(x).select(
        "metric", pl.col(x).alias("x"), pl.col("value").cast(pl.Float32).cast(pl.Float64),
        "wall_time")


@pytest.mark.parametrize("x", ["tokens", "samples", "step"])
def test_tensorboard_steps_are_the_axis(token_runs, tmp_path, x):
    special = [with_special_values(token_runs[0]), *token_runs[1:]]
    done = export(special, tmp_path / "tb", format="tensorboard",
                  x=None if x == "tokens" else x)
    assert len(done.files) == len(special)
    for run in special:
        got = read_tensorboard(tmp_path / "tb" / run.name).sort(pl.all())
        want = expected_events(run, x).sort(pl.all())
        assert got.height == run.scalars.height
        assert_frame_equal(got.drop("wall_time"), want.drop("wall_time"), check_exact=True)
        logged = want.get_column("wall_time").is_not_null()
        assert got.filter(logged).get_column("wall_time").equals(
            want.filter(logged).get_column("wall_time"))
        assert (got.filter(~logged).get_column("wall_time") == 0).all()  # unset, not now


def test_exports_at_different_times_are_byte_identical(runs, tmp_path, monkeypatch):
    # runs with logged wall times (attn, hf_resumed) and one without (trainer_state.json alone)
    chosen = [*(run for run in runs if run.name in ("attn", "hf_resumed")),
              rc.load(DATA / "hf_ddp", source="hf-trainer", cache=False)]
    assert chosen[2].scalars.get_column("wall_time").null_count() == chosen[2].scalars.height
    trees = []
    for clock in (1_000_000_000.5, 2_000_000_000.25):  # the clock moves between the exports
        monkeypatch.setattr(time, "time", lambda clock=clock: clock)
        for fmt in ("tensorboard", "parquet", "csv", "jsonl"):
            out = tmp_path / str(clock) / fmt
            export(chosen, out, format=fmt, x="step" if fmt == "tensorboard" else None)
        trees.append(tree_digest(tmp_path / str(clock)))
    assert trees[0] == trees[1]
    assert sorted(name for name in trees[0] if name.startswith("tensorboard/")) == [
        "tensorboard/attn/events.out.tfevents.1795946647.runcompare",
        "tensorboard/hf_ddp/events.out.tfevents.0000000000.runcompare",
        "tensorboard/hf_resumed/events.out.tfevents.1795946895.runcompare"]


def test_tensorboard_records_carry_tfrecord_crcs(token_runs, tmp_path):
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    done = export(token_runs[:1], tmp_path / "tb", format="tensorboard")
    data, pos, records = done.files[0].read_bytes(), 0, 0
    while pos < len(data):  # every record checked against tensorboard's own CRC
        (length,) = struct.unpack_from("<Q", data, pos)
        (head_crc,) = struct.unpack_from("<I", data, pos + 8)
        (data_crc,) = struct.unpack_from("<I", data, pos + 12 + length)
        assert head_crc == masked_crc32c(data[pos:pos + 8])
        assert data_crc == masked_crc32c(data[pos + 12:pos + 12 + length])
        pos, records = pos + 16 + length, records + 1
    assert pos == len(data) and records > 10


def test_tensorboard_keeps_logged_wall_times(runs, tmp_path):
    resumed = next(run for run in runs if run.name == "hf_resumed")
    assert resumed.scalars.get_column("wall_time").null_count() == 0
    export([resumed], tmp_path / "tb", format="tensorboard", x="step")
    got = read_tensorboard(tmp_path / "tb" / "hf_resumed").sort(pl.all())
    assert_frame_equal(got, expected_events(resumed, "step").sort(pl.all()), check_exact=True)


def test_tensorboard_shows_one_run_per_folder_with_every_metric(token_runs, tmp_path):
    named = [renamed(run, name) for run, name in zip(token_runs, AWKWARD)]
    export(named, tmp_path / "tb", format="tensorboard")
    multiplexer = EventMultiplexer().AddRunsFromDirectory(str(tmp_path / "tb"))
    multiplexer.Reload()
    tags = multiplexer.PluginRunToTagToContent("scalars")  # what TensorBoard's UI lists
    assert {unquote(name): set(found) for name, found in tags.items()} == {
        run.name: set(run.metrics) for run in named}
    assert "a/b %3Cscript%3Ealert(1)%3C/script%3E" in tags  # `/` nests, `<` is encoded


def test_tensorboard_axis_a_run_lacks_is_missing_info(runs, tmp_path):
    ddp = next(run for run in runs if run.name == "hf_ddp")
    with pytest.raises(rc.MissingInfoError, match="--set hf_ddp:seq_len=N"):
        export([ddp], tmp_path / "tb", format="tensorboard")
    assert not (tmp_path / "tb").exists()


def test_tensorboard_refuses_a_time_axis(runs, tmp_path):
    with pytest.raises(rc.UsageError, match="whole numbers"):
        export(runs[:1], tmp_path / "tb", format="tensorboard", x="elapsed")


# names, destinations ---------------------------------------------------------------------------

def test_names_must_be_unique_and_not_clash_by_case(runs, tmp_path):
    with pytest.raises(rc.UsageError, match="unique"):
        export([runs[0], runs[0]], tmp_path / "a.parquet")
    with pytest.raises(rc.UsageError, match="differ only in case"):
        export([renamed(runs[0], "Run"), renamed(runs[1], "run")], tmp_path / "b.parquet")


def test_existing_export_needs_force_and_is_replaced_whole(runs, tmp_path):
    out = tmp_path / "runs.parquet"
    export(runs, out)
    with pytest.raises(rc.InputError, match="already exists; pass --force"):
        export(runs[:1], out)
    export(runs[:1], out, force=True)
    assert [p.name for p in out.iterdir()] == ["run=mamba"]  # no stale partitions
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.parquet"]  # no scratch left


def test_force_leaves_a_folder_that_is_not_an_export_alone(runs, tmp_path):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "todo.txt").write_text("keep me")
    with pytest.raises(rc.InputError, match="is not a parquet export"):
        export(runs[:1], out, force=True)
    assert (out / "todo.txt").read_text() == "keep me"


def test_an_empty_folder_is_used_as_it_is(runs, tmp_path):
    (tmp_path / "tb").mkdir()
    export(runs[:1], tmp_path / "tb", format="tensorboard", x="step")
    assert [p.name for p in (tmp_path / "tb").iterdir()] == ["mamba"]


def test_a_failed_write_keeps_the_earlier_export(runs, tmp_path, monkeypatch):
    out = tmp_path / "runs.csv"
    export(runs, out)
    before = out.read_bytes()

    def disk_full(frames, to):
        raise OSError(28, "No space left on device")

    monkeypatch.setitem(export_module._WRITERS, "csv", disk_full)
    with pytest.raises(rc.InputError, match="No space left on device"):
        export(runs[:1], out, force=True)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv"]


# the command line ------------------------------------------------------------------------------

def test_cli_writes_every_format_and_never_touches_the_inputs(cli, tmp_path):
    inputs = {path: tree_digest(path) for path in (SAMPLES / "mamba", SAMPLES / "attn")}
    runs = (SAMPLES / "mamba", SAMPLES / "attn")
    for args in (["-o", tmp_path / "new" / "deeper" / "runs.parquet"],
                 ["-o", tmp_path / "runs.csv"], ["-o", tmp_path / "runs.jsonl"],
                 ["-o", tmp_path / "tb", "--format", "tensorboard", "--x", "samples"]):
        result = cli("export", *runs, *args)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.startswith("wrote 162 points of 2 run(s) as ")
    assert (tmp_path / "new" / "deeper" / "runs.parquet" / "run=attn" / "part-0.parquet").is_file()
    assert read_export(tmp_path / "runs.csv").equals(read_export(tmp_path / "runs.jsonl"))
    assert sorted(p.name for p in (tmp_path / "tb").iterdir()) == ["attn", "mamba"]
    assert {path: tree_digest(path) for path in inputs} == inputs


def test_cli_format_from_suffix_else_parquet(cli, tmp_path):
    result = cli("export", SAMPLES / "attn", "-o", tmp_path / "runs")
    assert result.exit_code == 0, result.stderr
    assert "as parquet" in result.stdout and (tmp_path / "runs" / "run=attn").is_dir()


def test_cli_unknown_format_is_a_usage_error(cli, tmp_path):
    result = cli("export", SAMPLES / "attn", "-o", tmp_path / "out", "--format", "xlsx")
    assert result.exit_code == 2
    assert result.stderr == ("error: unknown export format 'xlsx'; choose one of parquet, csv, "
                             "jsonl, tensorboard\n")
    assert not (tmp_path / "out").exists()


def test_cli_existing_output_exit_1_then_force(cli, tmp_path):
    out = tmp_path / "runs.csv"
    assert cli("export", SAMPLES / "attn", "-o", out).exit_code == 0
    result = cli("export", SAMPLES / "attn", "-o", out)
    assert result.exit_code == 1 and "pass --force" in result.stderr
    assert cli("export", SAMPLES / "attn", "-o", out, "--force").exit_code == 0


def test_cli_missing_axis_names_the_fix(cli, tmp_path):
    result = cli("export", DATA / "hf_ddp", "-o", tmp_path / "tb", "--format", "tensorboard")
    assert result.exit_code == 1 and "--set hf_ddp:seq_len=N" in result.stderr
    fixed = cli("export", DATA / "hf_ddp", "-o", tmp_path / "tb", "--format", "tensorboard",
                "--set", "seq_len=64")
    assert fixed.exit_code == 0, fixed.stderr


def test_cli_x_only_for_tensorboard(cli, tmp_path):
    result = cli("export", SAMPLES / "attn", "-o", tmp_path / "r.parquet", "--x", "step")
    assert result.exit_code == 2 and "leave --x out" in result.stderr


def test_cli_renamed_run_with_awkward_name(cli, tmp_path):
    name = "a/b <script>=x"
    result = cli("export", SAMPLES / "attn", "-o", tmp_path / "r.parquet",
                 "--set", f"attn:name={name}", "--source", "hf-trainer", "--no-cache",
                 "--duplicates", "keep-first")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "r.parquet" / "run=a%2Fb%20%3Cscript%3E%3Dx").is_dir()
    assert pl.scan_parquet(tmp_path / "r.parquet").collect().get_column("run").unique()\
        .to_list() == [name]


def test_read_export_names_a_path_it_cannot_read(tmp_path):
    with pytest.raises(rc.InputError, match="cannot be read as a csv export"):
        read_export(tmp_path / "missing.csv")


def test_cli_output_is_required(cli):
    result = cli("export", SAMPLES / "attn")
    assert result.exit_code == 2 and "Missing option '-o' / '--output'" in result.stderr
