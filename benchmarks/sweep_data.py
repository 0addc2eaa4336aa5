"""Synthetic sweeps on disk for ``benchmarks/sweep.py``: N runs of 5 metrics × 2,000 steps,
as HF Trainer output dirs (``trainer_state.json`` in the Trainer's layout) or TensorBoard
runs (one event file each, written by the ``tensorboard`` package's own ``EventFileWriter``).

    python benchmarks/sweep_data.py DIR --runs 400 --format hf|tensorboard

Made once per folder (a ``.done`` marker) and reused.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

METRICS = ("loss", "grad_norm", "learning_rate", "entropy", "mean_token_accuracy")
STEPS = 2000


def _value(metric: str, run: int, step: int) -> float:
    base = {"loss": 2 + 8 / math.sqrt(step), "grad_norm": 1 / math.sqrt(step),
            "learning_rate": 3e-4 * (1 - step / (STEPS + 1)), "entropy": 1 + 1 / step,
            "mean_token_accuracy": 1 - 1 / math.sqrt(step)}[metric]
    return base * (1 + run / 1000) + 0.01 * math.sin(step * 0.37 + run)


def write_hf(folder: Path, run: int) -> None:
    history = [{**{m: _value(m, run, s) for m in METRICS}, "epoch": s / STEPS, "step": s}
               for s in range(1, STEPS + 1)]
    state = {"best_global_step": None, "best_metric": None, "best_model_checkpoint": None,
             "epoch": 1.0, "eval_steps": 500, "global_step": STEPS, "is_hyper_param_search": False,
             "is_local_process_zero": True, "is_world_process_zero": True,
             "log_history": history, "logging_steps": 1, "max_steps": STEPS,
             "num_input_tokens_seen": 0, "num_train_epochs": 1, "save_steps": 500,
             "stateful_callbacks": {}, "total_flos": 1.0e12, "train_batch_size": 8,
             "trial_name": None, "trial_params": None}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True))


def write_tensorboard(folder: Path, run: int) -> None:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder), max_queue_size=10_000, flush_secs=3600)
    start = 1.7e9 + run * 10_000
    for step in range(1, STEPS + 1):
        for metric in METRICS:
            summary = Summary(value=[Summary.Value(tag=f"train/{metric}",
                                                   simple_value=_value(metric, run, step))])
            writer.add_event(Event(wall_time=start + step, step=step, summary=summary))
    writer.close()


def make(root: Path, runs: int, fmt: str) -> list[Path]:
    """The ``runs`` run folders of format ``fmt`` under ``root``, written unless already
    there."""
    folder = root / f"{fmt}-{runs}x{len(METRICS)}x{STEPS}"
    paths = [folder / f"run_{i:04d}" for i in range(runs)]
    if (folder / ".done").is_file():
        return paths
    write = write_hf if fmt == "hf" else write_tensorboard
    started = time.perf_counter()
    for i, path in enumerate(paths):
        write(path, i)
    (folder / ".done").write_text(f"{time.perf_counter() - started:.1f} s\n")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--format", choices=("hf", "tensorboard"), default="hf")
    args = parser.parse_args()
    print(make(args.root, args.runs, args.format)[0].parent)


if __name__ == "__main__":
    main()
