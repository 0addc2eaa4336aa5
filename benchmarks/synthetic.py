"""Synthetic runs built straight into runcompare's data model, for the benchmarks that time
what happens after reading (comparing, reporting)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import polars as pl

from runcompare.model import SCALAR_SCHEMA, BatchConfig, Fact, Run

__all__ = ["make_run", "runs_from_arguments"]


def make_run(i: int, points: int) -> Run:
    rng = np.random.default_rng(i)
    step = np.arange(1, points + 1, dtype=np.int64) * (1 + i % 3)  # 3 logging rates
    global_batch = 16 * (1 + i % 2)
    loss = 2 + 8 / np.sqrt(step) + rng.normal(0, 0.05, points)
    frame = pl.DataFrame({
        "run": f"run{i}", "metric": "train/loss", "value": loss, "step": step,
        "micro_step": step * 2, "samples": step * global_batch,
        "tokens": step * global_batch * 1024, "epoch": step / 1e4,
        "wall_time": 1.7e9 + step * 0.5, "elapsed": step * 0.5,
        "flops": step * global_batch * 1024 * 6e6, "device_hours": step * 0.5 / 3600,
    }, schema=SCALAR_SCHEMA)
    batch = BatchConfig(global_batch=Fact(global_batch, "bench"), seq_len=Fact(1024, "bench"),
                        tokens_per_step=Fact(global_batch * 1024, "bench"),
                        world_size=Fact(1, "bench"))
    return Run(name=f"run{i}", path=Path("."), format="bench", sources=["bench"],
               step_unit="optimizer", batch=batch, scalars=frame)


def runs_from_arguments(description: str) -> tuple[argparse.Namespace, list[Run]]:
    """``--runs`` (default 20) synthetic runs of ``--points`` (default 100,000) points each,
    from the command line of a benchmark described by ``description``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--points", type=int, default=100_000)
    args = parser.parse_args()
    return args, [make_run(i, args.points) for i in range(args.runs)]
