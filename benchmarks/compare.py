"""Time compare(): 20 runs × 100,000 points each aligned, smoothed and summarised.

    python benchmarks/compare.py [--runs 20] [--points 100000]

Goal (issue 6): under 2 s on the 2-core reference machine. The runs are synthetic loss curves
built straight into runcompare's data model (reading is benchmarked elsewhere).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl

import runcompare as rc
from runcompare.model import SCALAR_SCHEMA, BatchConfig, Fact, Run


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
    }, schema=SCALAR_SCHEMA)
    batch = BatchConfig(global_batch=Fact(global_batch, "bench"), seq_len=Fact(1024, "bench"),
                        tokens_per_step=Fact(global_batch * 1024, "bench"),
                        world_size=Fact(1, "bench"))
    return Run(name=f"run{i}", path=Path("."), format="bench", sources=["bench"],
               step_unit="optimizer", batch=batch, scalars=frame)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--points", type=int, default=100_000)
    args = parser.parse_args()
    runs = [make_run(i, args.points) for i in range(args.runs)]
    start = time.perf_counter()
    result = rc.compare(runs, x="tokens", smooth="5%")
    seconds = time.perf_counter() - start
    print(f"{args.runs} runs × {args.points:,} points: aligned {result.aligned.height:,} rows, "
          f"smoothed and summarised in {seconds:.2f} s (goal < 2 s)")


if __name__ == "__main__":
    main()
