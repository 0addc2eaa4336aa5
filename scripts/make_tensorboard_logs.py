"""Write the TensorBoard test logs in tests/data/tensorboard/ with the real writers.

Run with a Python that has torch and tensorboard (the samples extra)::

    python scripts/make_tensorboard_logs.py [--out tests/data/tensorboard] [--tf-python PY]

Every file is written by a real writer: ``torch.utils.tensorboard.SummaryWriter`` (simple_value
scalars, ``new_style=True`` float and double tensors, a ``purge_step`` restart, text, a
histogram, an image, a graph, ``add_hparams``), the ``tensorboard`` package's own
``tensorboard.summary.Writer`` (tensor scalars), and, when a Python with TensorFlow is given
as ``--tf-python`` (or this one has it), TF2's ``tf.summary`` (scalars as ``tensor_content``,
text, hparams) and TF1's merged graph-mode summaries (several values in one event). The damaged cases under
``damaged/`` are copies of a real file cut short or with bytes changed; what was done to each
is in tests/data/README-tensorboard.md. Values depend on the step only, so tests can check
them; file names and wall times change with each run of this script.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ARGS = {"output_dir": "out", "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2,
        "max_steps": 30, "learning_rate": 3e-4, "logging_steps": 1, "eval_steps": 10, "seed": 7}


def loss(step: int, seed: int = 0) -> float:
    """The logged loss at ``step`` (the same formula the tests check)."""
    return 4.0 * math.exp(-step / 15) + 0.5 + 0.01 * seed


def lr(step: int) -> float:
    return 3e-4 * min(1.0, step / 10)


def torch_simple(out: Path) -> None:
    """simple_value scalars, HF-style args text, a histogram, an image, a graph, hparams."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    folder = out / "torch_simple"
    writer = SummaryWriter(str(folder))
    writer.add_text("args", json.dumps(ARGS, indent=2), 0)
    writer.add_image("sample", np.arange(12, dtype=np.uint8).reshape(3, 2, 2), 0)
    writer.add_graph(torch.nn.Linear(2, 1), torch.zeros(1, 2))
    for step in range(1, 31):
        writer.add_scalar("train/loss", loss(step), step)
        writer.add_scalar("train/learning_rate", lr(step), step)
        writer.add_scalar("train/epoch", step / 30, step)
        if step % 10 == 0:
            writer.add_scalar("eval/loss", loss(step) + 0.1, step)
            writer.add_histogram("weights", np.linspace(-1, 1, 16) * step, step)
    writer.add_hparams({"lr": 3e-4, "batch_size": 4, "optimizer": "adamw"},
                       {"hparam/final_loss": loss(30)})
    writer.close()


def torch_new_style(out: Path) -> None:
    """Scalars as tensors: float_val (new_style) and double_val (double_precision)."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(out / "torch_new_style"))
    for step in range(0, 50, 5):
        writer.add_scalar("train/loss", loss(step), step, new_style=True)
        writer.add_scalar("train/loss_f64", loss(step), step, new_style=True,
                          double_precision=True)
    writer.close()


def torch_purge(out: Path) -> None:
    """A run killed after step 29 and restarted from a step-20 checkpoint with purge_step."""
    from torch.utils.tensorboard import SummaryWriter

    folder = out / "torch_purge"
    first = SummaryWriter(str(folder))
    for step in range(30):
        first.add_scalar("train/loss", loss(step), step)
    first.close()
    time.sleep(1.1)  # the restart happens later; file names carry whole seconds
    second = SummaryWriter(str(folder), purge_step=20)
    for step in range(20, 40):
        second.add_scalar("train/loss", loss(step) - 0.25, step)
    second.close()


def tb_writer(out: Path) -> None:
    """The tensorboard package's writers: Writer.add_scalar (float tensors) in tb_writer/, and
    scalar summaries of half, double and int64 tensors made with its tensor_util, written by
    its EventFileWriter in tb_typed/."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.scalar import metadata
    from tensorboard.summary import Writer
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    folder = out / "tb_writer"
    writer = Writer(str(folder))
    for step in range(10):
        writer.add_scalar("train/loss", loss(step), step)
    writer.close()
    events = EventFileWriter(str(out / "tb_typed"))
    for step in range(10):
        event = event_pb2.Event(wall_time=time.time(), step=step)
        typed = (("half", np.float16(loss(step))), ("double", np.float64(loss(step))),
                 ("int64", np.int64(1000 * step)))
        for tag, value in typed:
            event.summary.value.add(tag=f"train/loss_{tag}" if tag != "int64" else "train/tokens",
                                    tensor=tensor_util.make_tensor_proto(value),
                                    metadata=metadata.create_summary_metadata("", ""))
        events.add_event(event)
    events.close()


def seeds(out: Path) -> None:
    """A logdir of three runs, one folder per seed, as TensorBoard shows them; each states its
    configuration with ``add_hparams`` (identical but for the seed: a seed group)."""
    from torch.utils.tensorboard import SummaryWriter

    for seed in range(3):
        writer = SummaryWriter(str(out / "seeds" / f"seed{seed}"))
        for step in range(1, 21):
            writer.add_scalar("train/loss", loss(step, seed), step)
        writer.add_hparams({"seed": seed, "per_device_train_batch_size": 8,
                            "gradient_accumulation_steps": 2, "learning_rate": 3e-4},
                           {"hparam/final_loss": loss(20, seed)})
        writer.close()


TF2_SCRIPT = """
import json, math, sys
import tensorflow as tf
from tensorboard.plugins.hparams import api as hp
args = json.loads(sys.argv[2])
writer = tf.summary.create_file_writer(sys.argv[1])
with writer.as_default():
    hp.hparams({"learning_rate": 3e-4, "per_device_train_batch_size": 4, "optimizer": "adamw"})
    tf.summary.text("args", json.dumps(args), step=0)
    for step in range(25):
        tf.summary.scalar("train/loss", 4.0 * math.exp(-step / 15) + 0.5, step=step)
        tf.summary.scalar("train/grad_norm", 1.0 + step / 100, step=step)
        if step % 5 == 0:
            tf.summary.histogram("weights", tf.linspace(-1.0, 1.0, 16) * step, step=step)
writer.close()
"""


TF1_SCRIPT = """
import math, sys
import tensorflow as tf
tf.compat.v1.disable_eager_execution()
step_loss = tf.compat.v1.placeholder(tf.float32, [])
tf.compat.v1.summary.scalar("loss", step_loss)
tf.compat.v1.summary.scalar("accuracy", 1.0 - step_loss / 10.0)
tf.compat.v1.summary.histogram("weights", tf.ones([4]) * step_loss)
merged = tf.compat.v1.summary.merge_all()
with tf.compat.v1.Session() as session:
    writer = tf.compat.v1.summary.FileWriter(sys.argv[1], session.graph)
    for step in range(0, 40, 2):
        value = 4.0 * math.exp(-step / 15) + 0.5
        writer.add_summary(session.run(merged, {step_loss: value}), step)
    writer.close()
"""


def tf2(out: Path, python: str | None) -> None:
    """TF2 ``tf.summary`` (scalars as tensor_content) in tf2/, and TF1 graph-mode merged
    summaries (several values per event, simple_value scalars, a graph) in tf1/."""
    python = python or sys.executable
    probe = subprocess.run([python, "-c", "import tensorflow"], capture_output=True, check=False)
    if probe.returncode:
        print("tf1/ and tf2/ kept as they were: no TensorFlow (pass --tf-python)")
        return
    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin"}
    for name, script in (("tf2", TF2_SCRIPT), ("tf1", TF1_SCRIPT)):
        shutil.rmtree(out / name, ignore_errors=True)
        command = [python, "-c", script, str(out / name), json.dumps(ARGS)]
        subprocess.run(command, check=True, env=env)


def damaged(out: Path) -> None:
    """Copies of torch_new_style's file, each damaged one way (see README-tensorboard.md)."""
    source = next((out / "torch_new_style").glob("*tfevents*"))
    data = source.read_bytes()
    heads = _record_offsets(data)
    middle = heads[len(heads) // 2]
    cases = {
        "truncated": data[:heads[-1] + 20],             # last record cut inside its data
        "truncated_header": data[:heads[-1] + 5],       # cut inside the last header
        "crc_data": _flip(data, middle + 14),           # one data byte changed
        "crc_length": _flip(data, middle + 1),          # a length byte changed
        "garbage": data[:middle] + bytes(range(97, 97 + 26)) * 3 + data[middle:],
        "not_events": b"this is not a TensorBoard event file\n" * 4,
    }
    for name, content in cases.items():
        folder = out / "damaged" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / source.name).write_bytes(content)


def _record_offsets(data: bytes) -> list[int]:
    heads, pos = [], 0
    while pos + 12 <= len(data):
        heads.append(pos)
        pos += int.from_bytes(data[pos:pos + 8], "little") + 16
    return heads


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1:]


_FOLDERS = {"torch_simple": ["torch_simple"], "torch_new_style": ["torch_new_style"],
            "torch_purge": ["torch_purge"], "tb_writer": ["tb_writer", "tb_typed"],
            "seeds": ["seeds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("tests/data/tensorboard"))
    parser.add_argument("--tf-python", help="a Python with TensorFlow, for the tf2/ logs")
    options = parser.parse_args()
    for make in (torch_simple, torch_new_style, torch_purge, tb_writer, seeds):
        for name in _FOLDERS[make.__name__]:
            shutil.rmtree(options.out / name, ignore_errors=True)
        make(options.out)
    shutil.rmtree(options.out / "damaged", ignore_errors=True)
    damaged(options.out)
    tf2(options.out, options.tf_python)
    total = sum(f.stat().st_size for f in options.out.rglob("*") if f.is_file())
    print(f"wrote {options.out} ({total} bytes)")


if __name__ == "__main__":
    main()
