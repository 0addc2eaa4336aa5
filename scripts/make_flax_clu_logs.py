"""Write TensorBoard event files with flax's and clu's writers, and what tensorboard reads in them.

    python -m venv /tmp/flaxvenv && /tmp/flaxvenv/bin/pip install jax flax clu tensorflow-cpu
    /tmp/flaxvenv/bin/python scripts/make_flax_clu_logs.py

(flax 0.12.8, clu 0.0.12, jax 0.10.2, tensorflow-cpu 2.21.0, tensorboard 2.21.0 were used.)
Each writer logs the scalars of a short training loop as JAX arrays (``train/loss`` and
``train/learning_rate`` every step 1-12, ``eval/accuracy`` at 4, 8, 12; one NaN loss at step 7,
and a step past 2**31 for ``train/tokens``), hyperparameters and an image:

- ``tests/data/tensorboard/flax/``: ``flax.metrics.tensorboard.SummaryWriter`` (``scalar``,
  ``hparams``, ``image``, ``text``);
- ``tests/data/tensorboard/clu/``: ``clu.metric_writers.create_default_writer`` (a
  ``MultiWriter`` of a logging writer and clu's TensorFlow summary writer; ``write_scalars``,
  ``write_hparams``, ``write_images``).

Then every event of every file is read back with tensorboard's own ``EventFileLoader`` and
the scalars (tag, step, wall time, value as tensorboard's ``tensor_util.make_ndarray`` gives
it) are written to ``tests/data/tensorboard/flax_clu_expected.json``: the numbers
``tests/test_tensorboard_flax_clu.py`` holds runcompare's reader to. Each run wipes and
rewrites both folders; values depend on the step only, file names and wall times change.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent / "tests" / "data" / "tensorboard"
STEPS = range(1, 13)
HPARAMS = {"learning_rate": 3e-4, "batch_size": 16, "optimizer": "adamw", "warmup": 4}


def loss(step: int) -> jnp.ndarray:
    """The loss logged at ``step`` (a NaN at step 7, as a diverged batch logs)."""
    return jnp.float32(math.nan) if step == 7 else jnp.float32(4 * math.exp(-step / 5) + 0.1)


def learning_rate(step: int) -> jnp.ndarray:
    return jnp.float32(3e-4 * min(1.0, step / 4))


def image() -> np.ndarray:
    """A 8 × 8 RGB gradient, as uint8 (height, width, channels)."""
    ramp = np.linspace(0, 255, 8, dtype=np.uint8)
    return np.stack([np.tile(ramp, (8, 1)), np.tile(ramp[:, None], (1, 8)),
                     np.full((8, 8), 128, np.uint8)], axis=-1)


def write_flax(folder: Path) -> None:
    from flax.metrics.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    writer.hparams(HPARAMS)
    writer.text("notes", "flax SummaryWriter test log", 0)
    for step in STEPS:
        writer.scalar("train/loss", loss(step), step)
        writer.scalar("train/learning_rate", learning_rate(step), step)
        if step % 4 == 0:
            writer.scalar("eval/accuracy", jnp.float32(0.5 + step / 40), step)
            writer.image("eval/sample", image(), step)
    writer.scalar("train/tokens", jnp.int32(12 * 4096), 2**31 + 12)
    writer.close()


def write_clu(folder: Path) -> None:
    from clu import metric_writers

    writer = metric_writers.create_default_writer(str(folder), asynchronous=False)
    writer.write_hparams(HPARAMS)
    for step in STEPS:
        writer.write_scalars(step, {"train/loss": loss(step),
                                    "train/learning_rate": learning_rate(step)})
        if step % 4 == 0:
            writer.write_scalars(step, {"eval/accuracy": jnp.float32(0.5 + step / 40)})
            writer.write_images(step, {"eval/sample": image()[None]})
    writer.write_scalars(2**31 + 12, {"train/tokens": jnp.int32(12 * 4096)})
    writer.flush()
    writer.close()


def scalars_read_back(folder: Path) -> list[dict[str, object]]:
    """Every scalar of every event file in ``folder``, as tensorboard's EventFileLoader reads
    it: tag, step, wall time, value (a simple_value, or a 0-d tensor of the scalars plugin)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    out: list[dict[str, object]] = []
    for file in sorted(folder.rglob("*tfevents*")):
        for event in EventFileLoader(str(file)).Load():
            for value in event.summary.value:
                kind = value.WhichOneof("value")
                plugin = value.metadata.plugin_data.plugin_name
                if kind == "simple_value":
                    number = float(value.simple_value)
                elif kind == "tensor" and plugin == "scalars":
                    number = float(tensor_util.make_ndarray(value.tensor).item())
                else:
                    continue
                out.append({"file": file.name, "tag": value.tag, "step": event.step,
                            "wall_time": event.wall_time,
                            "value": None if math.isnan(number) else number})
    return out


def main() -> None:
    expected: dict[str, list[dict[str, object]]] = {}
    for name, write in (("flax", write_flax), ("clu", write_clu)):
        folder = ROOT / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        write(folder)
        expected[name] = scalars_read_back(folder)
        print(f"{folder}: {len(expected[name])} scalars")
    (ROOT / "flax_clu_expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
