"""The TensorBoard source on real event files (tests/data/README-tensorboard.md says how each
was made), checked against the tensorboard package's own protobuf parsing."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import runcompare as rc
from runcompare.errors import InputError
from runcompare.sources import REGISTRY
from runcompare.sources.formats import _tensorboard_events as tfevents
from runcompare.sources.formats import tensorboard

from .conftest import DATA, SAMPLES

TB = DATA / "tensorboard"
F32 = 1e-6  # relative precision of a float32


def loss(step: int, seed: int = 0) -> float:
    """What scripts/make_tensorboard_logs.py logged."""
    return 4.0 * math.exp(-step / 15) + 0.5 + 0.01 * seed


def event_file(folder: Path) -> Path:
    (file,) = [f for f in folder.iterdir() if "tfevents" in f.name]
    return file


def reference(file: Path) -> list[tuple[str, int, float]]:
    """(tag, step, value) of every scalar, parsed record by record with tensorboard's protobuf
    classes: simple_value, and tensors whose tag has the scalars plugin."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2
    from tensorboard.util import tensor_util

    points, plugins = [], {}
    for record in RawEventFileLoader(str(file)).Load():
        event = event_pb2.Event.FromString(record)
        for value in event.summary.value:
            if value.metadata.plugin_data.plugin_name:
                plugins.setdefault(value.tag, value.metadata.plugin_data.plugin_name)
            if value.HasField("simple_value"):
                points.append((value.tag, event.step, value.simple_value))
            elif value.HasField("tensor") and plugins.get(value.tag) == "scalars":
                number = float(tensor_util.make_ndarray(value.tensor).reshape(-1)[0])
                points.append((value.tag, event.step, number))
    return points


def ours(file: Path) -> list[tuple[str, int, float]]:
    frame = tfevents.decode(file.read_bytes()).scalars
    return list(frame.select("metric", "step", "value").iter_rows())


REAL_FILES = sorted(f for f in [*TB.rglob("*tfevents*"), *SAMPLES.glob("*/runs/*/*tfevents*"),
                                *DATA.glob("hf_*/runs/*/*tfevents*")]
                    if "damaged" not in f.parts)


@pytest.mark.parametrize("file", REAL_FILES,
                         ids=lambda f: f.parent.parent.name + "/" + f.parent.name)
def test_every_scalar_of_every_real_file_matches_tensorboards_own_parser(file):
    assert _nan_named(ours(file)) == _nan_named(reference(file))


def _nan_named(points: list[tuple[str, int, float]]) -> list[tuple[str, int, object]]:
    """``points`` with each NaN as the text "NaN" (a NaN equals no other NaN)."""
    return [(tag, step, "NaN" if math.isnan(value) else value) for tag, step, value in points]


def test_simple_values_text_hparams_and_what_is_skipped():
    raw = REGISTRY["tensorboard"].read_at(TB / "torch_simple")
    counts = dict(raw.scalars.group_by("metric").len().iter_rows())
    assert counts == {"train/loss": 30, "train/learning_rate": 30, "train/epoch": 30,
                      "eval/loss": 3, "hparam/final_loss": 1}
    losses = raw.scalars.filter(metric="train/loss").sort("step")
    assert losses.get_column("step").to_list() == list(range(1, 31))
    assert np.allclose(losses.get_column("value"), [loss(s) for s in range(1, 31)], rtol=F32)
    evals = raw.scalars.filter(metric="eval/loss").sort("step")
    assert evals.get_column("step").to_list() == [10, 20, 30]
    assert raw.facts["per_device_batch"].value == 4
    assert raw.facts["per_device_batch"].source == (
        "tensorboard args/text_summary: per_device_train_batch_size")
    assert raw.facts["grad_accum"].value == 2 and raw.facts["grad_accum"].kind == "config"
    assert raw.facts["max_steps"].value == 30
    (skipped,) = [f for f in raw.findings if f.code == "non-scalar-skipped"]
    assert skipped.level == "info"
    assert "graphs 1" in skipped.message and "histograms 3" in skipped.message
    assert "images 1" in skipped.message
    assert raw.step_unit == "optimizer" and raw.source == "tensorboard"
    assert set(raw.leg_starts) == set() and raw.scalars.get_column("leg").unique().to_list() == [0]
    assert dict(raw.scalars.schema) == {"metric": pl.String, "value": pl.Float64,
                                        "step": pl.Int64, "wall_time": pl.Float64,
                                        "leg": pl.Int32}


def test_the_add_hparams_folder_belongs_to_its_run_and_gives_facts():
    folder = next(p for p in (TB / "torch_simple").iterdir() if p.is_dir())
    hparams = tfevents.decode(event_file(folder).read_bytes()).hparams
    assert hparams == {"lr": pytest.approx(3e-4), "batch_size": 4.0, "optimizer": "adamw"}
    assert tensorboard.expand(TB / "torch_simple") == [TB / "torch_simple"]
    tf2 = REGISTRY["tensorboard"].read_at(TB / "tf2").facts
    assert tf2["per_device_batch"].value == 4
    assert tf2["per_device_batch"].source == "tensorboard hparams: per_device_train_batch_size"


@pytest.mark.parametrize(("folder", "tags", "steps", "exact"), [
    ("torch_new_style", ["train/loss", "train/loss_f64"], range(0, 50, 5), "train/loss_f64"),
    ("tb_writer", ["train/loss"], range(10), None),
    ("tb_typed", ["train/loss_double", "train/loss_half", "train/tokens"], range(10),
     "train/loss_double"),
    ("tf2", ["train/grad_norm", "train/loss"], range(25), None),
])
def test_tensor_scalars_in_every_encoding(folder, tags, steps, exact):
    frame = REGISTRY["tensorboard"].read_at(TB / folder).scalars
    assert sorted(frame.get_column("metric").unique()) == tags
    for tag in tags:
        points = frame.filter(metric=tag).sort("step")
        assert points.get_column("step").to_list() == list(steps)
        if tag == "train/grad_norm":
            continue
        if tag == "train/tokens":  # an int64 tensor: decoded through the protobuf fallback
            assert points.get_column("value").to_list() == [1000.0 * s for s in steps]
            continue
        expected = [loss(s) for s in steps]
        rtol = 0 if tag == exact else 1e-3 if tag.endswith("half") else F32
        assert np.allclose(points.get_column("value"), expected, rtol=rtol, atol=0)


def test_tf1_merged_summaries_hold_several_values_per_event():
    raw = REGISTRY["tensorboard"].read_at(TB / "tf1")
    frame = raw.scalars.sort("metric", "step")
    assert dict(frame.group_by("metric").len().iter_rows()) == {"loss": 20, "accuracy": 20}
    losses = frame.filter(metric="loss")
    assert losses.get_column("step").to_list() == list(range(0, 40, 2))
    assert np.allclose(losses.get_column("value"), [loss(s) for s in range(0, 40, 2)],
                       rtol=F32)
    accuracy = frame.filter(metric="accuracy").get_column("value")
    assert np.allclose(accuracy, 1 - losses.get_column("value") / 10, rtol=F32)
    (skipped,) = [f for f in raw.findings if f.code == "non-scalar-skipped"]
    assert "histograms 20" in skipped.message and "graphs 2" in skipped.message


def test_the_add_hparams_folder_read_on_its_own_is_a_run_of_its_metrics():
    (folder,) = [f for f in (TB / "seeds" / "seed0").iterdir() if f.is_dir()]
    run = rc.load(folder, source="tensorboard", cache=False)  # once a polars error
    points = run.scalars.select("metric", "step", "value").iter_rows()
    assert [(m, s, pytest.approx(v, rel=F32)) for m, s, v in points] == reference(
        event_file(folder))


def test_purge_step_restart_is_a_leg_that_orphans_later_points():
    raw = REGISTRY["tensorboard"].read_at(TB / "torch_purge")
    assert raw.leg_starts == {1: 20}
    legs = raw.scalars.group_by("leg").agg(pl.len(), pl.col("step").min().alias("first"))
    assert sorted(legs.iter_rows()) == [(0, 30, 0), (1, 20, 20)]
    run = rc.load(TB / "torch_purge", source="tensorboard")
    losses = run.scalars.filter(metric="train/loss").sort("step")
    assert losses.get_column("step").to_list() == list(range(40))
    assert np.allclose(losses.get_column("value"),
                       [loss(s) - (0.25 if s >= 20 else 0) for s in range(40)], rtol=F32)
    (dropped,) = [f for f in run.findings if f.code == "duplicates-dropped"]
    assert dropped.message.startswith("10 points of train/loss")
    every = rc.load(TB / "torch_purge", source="tensorboard", duplicates="all")
    assert every.scalars.height == 50


def test_a_logdir_of_seeds_is_three_runs():
    roots = tensorboard.expand(TB / "seeds")
    assert roots == [TB / "seeds" / f"seed{i}" for i in range(3)]
    runs = rc.load_many([TB / "seeds"], source="tensorboard")
    assert [run.name for run in runs] == ["seed0", "seed1", "seed2"]
    for seed, run in enumerate(runs):
        losses = run.scalars.filter(metric="train/loss").sort("step")
        assert losses.height == 20
        assert losses.get_column("value")[-1] == pytest.approx(loss(20, seed), rel=F32)
    with pytest.raises(InputError, match=r"holds 3 TensorBoard runs \(seed0, seed1, seed2\)"):
        REGISTRY["tensorboard"].read_at(TB / "seeds")


def test_run_roots_of_a_mixed_logdir():
    roots = [p.relative_to(TB).as_posix() for p in tensorboard.expand(TB)]
    assert "torch_simple" in roots and "tf2" in roots and "seeds/seed1" in roots
    assert not any(root.startswith("torch_simple/") for root in roots)
    assert tensorboard.expand(SAMPLES / "attn") == [SAMPLES / "attn"]
    assert tensorboard.expand(DATA / "hf_resumed" / "runs") == [DATA / "hf_resumed" / "runs"]
    assert tensorboard.expand(DATA / "hf_resumed") == [DATA / "hf_resumed"]


HF_RUNS = sorted({p.parents[2] for p in [*SAMPLES.glob("*/runs/*/*tfevents*"),
                                          *DATA.glob("hf_*/runs/*/*tfevents*")]})


@pytest.mark.parametrize("path", HF_RUNS, ids=lambda p: p.name)
def test_hf_runs_give_the_same_points_and_batch_from_tensorboard_as_from_trainer_state(path):
    tb = _same_points(path)
    hf = rc.load(path, source="hf-trainer")
    assert tb.batch.global_batch.value == hf.batch.global_batch.value
    assert tb.batch.per_device_batch.value == hf.batch.per_device_batch.value
    assert tb.total("tokens") == hf.total("tokens")
    assert tb.facts["train_steps_per_second"].source.startswith(
        "tensorboard train/train_steps_per_second at step")


def test_hf_resumed_run_gives_the_same_points_as_its_final_trainer_state():
    raw = REGISTRY["tensorboard"].read_at(DATA / "hf_resumed")
    assert raw.scalars.get_column("leg").unique().sort().to_list() == [0, 1]
    run = _same_points(DATA / "hf_resumed")
    dropped = {f.message.split(" points of ")[1].split()[0]: int(f.message.split()[0])
               for f in run.findings if f.code == "duplicates-dropped"}
    first_resumed = raw.scalars.filter(leg=1).get_column("step").min()
    crashed = raw.scalars.filter((pl.col("leg") == 0) & (pl.col("step") >= first_resumed))
    assert dropped == dict(crashed.group_by("metric").len().iter_rows())
    assert run.batch.grad_accum.value == 8
    assert run.batch.grad_accum.source == (
        "tensorboard args/text_summary: gradient_accumulation_steps")


def _same_points(path: Path) -> rc.Run:
    tb = rc.load(path, source="tensorboard")
    hf = rc.load(path, source="hf-trainer")
    key = ["metric", "step"]
    a = tb.scalars.select(*key, "value").sort(key)
    b = hf.scalars.select(*key, "value").sort(key)
    assert a.select(key).equals(b.select(key))
    assert np.allclose(a.get_column("value"), b.get_column("value"), rtol=F32, atol=1e-12)
    assert tb.format == "tensorboard" and tb.scalars.get_column("wall_time").null_count() == 0
    return tb


@pytest.mark.parametrize(("case", "points", "words"), [
    ("truncated", 19, "truncated last record"),
    ("truncated_header", 19, "truncated last record (5 bytes of its 12-byte header"),
    ("crc_data", 19, "CRC mismatch"),
    ("crc_length", 19, "garbage"),
    ("garbage", 20, "78 bytes of garbage"),
])
def test_damage_keeps_what_is_readable_and_says_where(case, points, words):
    raw = REGISTRY["tensorboard"].read_at(TB / "damaged" / case)
    assert raw.points == points
    (finding,) = [f for f in raw.findings if f.code == "damaged-input"]
    assert finding.level == "warning" and words in finding.message
    assert event_file(TB / "damaged" / case).name in finding.message
    assert " byte " in finding.message
    run = rc.load(TB / "damaged" / case, source="tensorboard")
    assert any(f.code == "damaged-input" for f in run.findings)


def test_a_file_that_is_no_event_file_is_an_input_error_naming_it():
    with pytest.raises(InputError, match="not_events.*no readable TensorBoard event"):
        REGISTRY["tensorboard"].read_at(TB / "damaged" / "not_events")


def test_an_empty_event_file_is_a_run_with_no_points_yet(tmp_path):
    (tmp_path / "events.out.tfevents.1700000000.host.1.0").write_bytes(b"")
    raw = REGISTRY["tensorboard"].read_at(tmp_path)
    assert raw.points == 0 and [f.code for f in raw.findings] == ["no-scalars"]


def test_an_empty_file_and_every_cut_of_a_real_file(tmp_path):
    data = event_file(TB / "torch_new_style").read_bytes()
    target = tmp_path / "events.out.tfevents.1.host"
    counts = []
    for cut in range(0, len(data) + 1, 7):
        target.write_bytes(data[:cut])
        counts.append(tfevents.decode(data[:cut]).scalars.height)
        try:
            REGISTRY["tensorboard"].read_at(tmp_path)
        except InputError:
            assert counts[-1] == 0
    assert counts == sorted(counts) and counts[-1] == 20


def test_two_writers_at_once_are_one_leg(tmp_path):
    file = event_file(TB / "torch_new_style")
    for rank in range(2):
        shutil.copy(file, tmp_path / f"{file.name}.rank{rank}")
    raw = REGISTRY["tensorboard"].read_at(tmp_path)
    assert raw.scalars.get_column("leg").unique().to_list() == [0] and raw.points == 40
    assert [f.code for f in raw.findings] == ["concurrent-writers"]


def test_a_later_file_with_new_tags_only_continues_the_leg(tmp_path):
    shutil.copy(event_file(TB / "tb_writer"), tmp_path)
    shutil.copy(event_file(TB / "tb_typed"), tmp_path)
    raw = REGISTRY["tensorboard"].read_at(tmp_path)
    assert raw.scalars.get_column("leg").unique().to_list() == [0] and raw.points == 40


def test_a_leg_that_starts_over_is_pointed_out(tmp_path):
    for seed in (0, 1):
        shutil.copy(event_file(TB / "seeds" / f"seed{seed}"), tmp_path)
    raw = REGISTRY["tensorboard"].read_at(tmp_path)
    assert raw.scalars.group_by("leg").len().sort("leg").get_column("len").to_list() == [20, 20]
    (finding,) = [f for f in raw.findings if f.code == "leg-restarts-from-scratch"]
    assert "starts again at step 1" in finding.message


def test_registry_and_load_put_tensorboard_points_on_every_axis():
    run = rc.load(TB / "torch_simple", source="tensorboard")
    assert run.format == "tensorboard" and run.batch.per_device_batch.value == 4
    frame = run.frame(x="epoch").filter(metric="train/loss").sort("step")
    assert frame.get_column("epoch").to_list() == pytest.approx([s / 30 for s in range(1, 31)],
                                                                rel=F32)
    assert "train/epoch" not in run.metrics
    assert REGISTRY["tensorboard"].finds(TB / "tf2") and not REGISTRY["tensorboard"].finds(DATA / "lightning")
    assert tensorboard.files(TB / "torch_purge") == sorted((TB / "torch_purge").iterdir())
