"""fairseq training logs (issue #29), on a real hydra_train.log from a public repository
(tests/data/fairseq/README.md), held to json.loads of every stats line."""

from __future__ import annotations

import json
import re

from runcompare.sources import REGISTRY

from .conftest import DATA

HERE = DATA / "fairseq" / "wav2vec2_hydra"
LOG = HERE / "hydra_train.log"
_LINE = re.compile(r"^\[[^\]]+\]\[(train_inner|train|valid)\]\[INFO\] - (\{.*\})$")


def _stats(tag: str) -> list[dict]:
    found = [_LINE.match(line) for line in LOG.read_text().splitlines()]
    return [json.loads(m.group(2)) for m in found if m and m.group(1) == tag]


def _series(raw, metric: str) -> list[tuple[int, float]]:
    return raw.scalars.filter(metric=metric).sort("step").select("step", "value").rows()


def test_train_inner_lines_are_train_points_at_num_updates():
    raw = REGISTRY["fairseq"].read_at(LOG)
    inner = _stats("train_inner")
    assert len(inner) == 23
    for key, metric in (("loss", "train/loss"), ("lr", "train/learning_rate"),
                        ("gnorm", "train/grad_norm"), ("bsz", "train/bsz"),
                        ("update", "train/epoch")):
        assert _series(raw, metric) == [(int(r["num_updates"]), float(r[key])) for r in inner]
    steps = [s for s, _ in _series(raw, "train/loss")]
    assert steps[0] == 200 and steps[-1] == 4600 and len(steps) == 23
    assert _series(raw, "train/loss")[-1] == (4600, 3.922)


def test_validation_is_eval_and_the_epoch_averages_are_kept_apart():
    raw = REGISTRY["fairseq"].read_at(LOG)
    valid = _stats("valid")
    assert _series(raw, "eval/loss") == [(int(r["valid_num_updates"]), float(r["valid_loss"]))
                                         for r in valid]
    assert [s for s, _ in _series(raw, "eval/loss")] == [479, 958, 1437, 1916, 2394, 2874,
                                                         3354, 3833, 4312, 4791]
    assert _series(raw, "eval/loss")[-1] == (4791, 3.792)
    # best_loss is printed from the second validation on
    assert len(_series(raw, "eval/best_loss")) == 9
    epochs = _stats("train")
    assert _series(raw, "train/epoch_loss") == [(int(r["train_num_updates"]),
                                                 float(r["train_loss"])) for r in epochs]
    assert _series(raw, "train/epoch_loss")[0] == (479, 7.864)
    # every number of every stats line is a point, none more (epoch and num_updates are axes)
    expected = sum(len(r) - 2 for r in _stats("train_inner") + epochs + valid)
    assert raw.scalars.height == expected
    assert raw.scalars.get_column("leg").unique().to_list() == [0]


def test_facts_are_only_what_the_log_states(cli):
    raw = REGISTRY["fairseq"].read_at(LOG)
    assert raw.facts["global_step"].value == 4791
    assert raw.facts["world_size"].value == 8
    # bsz and wpb are per-interval averages that vary here: no batch fact, a finding says why
    assert "global_batch" not in raw.facts and "tokens_per_step" not in raw.facts
    codes = [f.code for f in raw.findings]
    assert codes.count("batch-varies") == 2 and "fp16-overflow" in codes
    assert "19 fp16 gradient overflows" in next(f.message for f in raw.findings
                                                if f.code == "fp16-overflow")
    got = cli.json("inspect", HERE, "--no-cache")
    assert got["format"] == "fairseq" and got["steps"]["optimizer"] == 4791


def test_two_runs_appended_are_two_legs(tmp_path):
    text = LOG.read_text()
    (tmp_path / "train.log").write_text(text + text)
    raw = REGISTRY["fairseq"].read_at(tmp_path / "train.log")
    legs = raw.scalars.filter(metric="train/loss").group_by("leg").len().sort("leg").rows()
    assert legs == [(0, 23), (1, 23)]


def test_a_last_line_cut_mid_object_is_no_point_and_is_reported(tmp_path):
    text = LOG.read_text()
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    cut = text.rstrip("\n")[:-len(last)] + last[:len(last) // 2]
    (tmp_path / "train.log").write_text(cut)
    whole = REGISTRY["fairseq"].read_at(LOG)
    raw = REGISTRY["fairseq"].read_at(tmp_path / "train.log")
    assert raw.scalars.filter(metric="train/epoch_loss").height == 9
    assert raw.scalars.height == whole.scalars.height - (len(_stats("train")[-1]) - 2)
    assert any(f.code in ("unparsed-lines", "damaged-input") for f in raw.findings)


def test_other_logs_are_not_taken(tmp_path):
    (tmp_path / "train.log").write_text("2024-01-01 10:00:00 | INFO | root | hello\n"
                                        "step 10 | loss 2.0\n")
    assert not REGISTRY["fairseq"].finds(tmp_path / "train.log")
