"""TensorBoard event files written by flax's and clu's writers (issue #29), made by
scripts/make_flax_clu_logs.py, held to what tensorboard's own EventFileLoader read in them
(tests/data/tensorboard/flax_clu_expected.json, written by the same script)."""

from __future__ import annotations

import json
import math

import pytest

from runcompare.sources import REGISTRY

from .conftest import DATA

TB = DATA / "tensorboard"
EXPECTED = json.loads((TB / "flax_clu_expected.json").read_text())


def _key(tag: str, step: int, wall_time: float, value: float | None) -> tuple:
    return (tag, step, wall_time, "NaN" if value is None or math.isnan(value) else value)


@pytest.mark.parametrize("writer", ["flax", "clu"])
def test_every_scalar_exactly_as_tensorboard_reads_it(writer):
    raw = REGISTRY["tensorboard"].read_at(TB / writer)
    got = sorted(_key(r["metric"], r["step"], r["wall_time"], r["value"])
                 for r in raw.scalars.iter_rows(named=True))
    want = sorted(_key(e["tag"], e["step"], e["wall_time"], e["value"])
                  for e in EXPECTED[writer])
    assert got == want and len(got) == 28
    # the float32 values as float32 gives them, the NaN kept, a step past 2**31 whole
    loss = raw.scalars.filter(metric="train/loss").sort("step")
    assert loss.get_column("value").to_list()[0] == 3.37492299079895
    assert math.isnan(loss.filter(step=7).get_column("value")[0])
    assert raw.scalars.filter(metric="train/tokens").rows()[0][1:3] == (49152.0, 2**31 + 12)


@pytest.mark.parametrize("writer", ["flax", "clu"])
def test_hparams_and_images(writer, cli):
    raw = REGISTRY["tensorboard"].read_at(TB / writer)
    assert {k: v.value for k, v in raw.hparams.items()} == {
        "learning_rate": 3e-4, "batch_size": 16, "warmup": 4, "optimizer": "adamw"}
    skipped = [f.message for f in raw.findings if f.code == "non-scalar-skipped"]
    assert len(skipped) == 1 and "images 3" in skipped[0]
    got = cli.json("inspect", TB / writer, "--no-cache", "--set", "grad_accum=1")
    assert got["format"] == "tensorboard" and got["points"] == 28
    assert sorted(got["metrics"]) == ["eval/accuracy", "train/learning_rate", "train/loss",
                                      "train/tokens"]
