"""Benchmark: read a .wandb file holding 1,000,000 history values; print values/s.

The file is written by the real wandb package in offline mode (100,000 ``wandb.log`` calls of
10 metrics each, plus ``train/global_step`` declared as the step metric, the way the HF Trainer
logs), once, into a cache folder; later runs reuse it. Writing needs a Python with wandb::

    /work/devvenv/bin/python benchmarks/wandb_ingest.py --wandb-python /work/genvenv/bin/python

Options: ``--calls N`` (log calls, default 100,000), ``--metrics M`` (values per call,
default 10), ``--repeat R`` (timed reads, default 5; the best wall time and the best CPU time
are reported, since the machine may be busy with other work), ``--dir`` (cache folder),
``--tensorboard DIR`` (also time ``tensorboard.read`` of the event file(s) in DIR, e.g. the
1,000,000-scalar file that ``benchmarks/tensorboard_ingest.py`` writes, alternating with the
W&B reads in this process, and print the ratio of the best wall times). Last, both are read
from a filled parquet cache (in a temporary folder), as ``runcompare`` reads them again.
The CPU time includes polars' worker threads, so it can exceed the wall time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRITER = """
import math, sys, wandb
calls, metrics, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
run = wandb.init(project="runcompare-bench", name="bench", dir=folder,
                 settings=wandb.Settings(console="off", x_disable_stats=True),
                 config={"per_device_train_batch_size": 8, "gradient_accumulation_steps": 4})
run.define_metric("train/global_step")
run.define_metric("*", step_metric="train/global_step")
names = [f"train/metric_{j}" for j in range(metrics)]
for step in range(1, calls + 1):
    row = {name: math.sin(step * 0.001 + j) for j, name in enumerate(names)}
    row["train/global_step"] = step
    run.log(row)
run.finish()
"""


def make(folder: Path, calls: int, metrics: int, python: str) -> Path:
    """Write the run with the real wandb (offline) unless it is there; return its run folder."""
    done = folder / "DONE"
    if not done.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
        started = time.perf_counter()
        subprocess.run([python, "-c", WRITER, str(calls), str(metrics), str(folder)],
                       check=True, env=env)
        print(f"wrote {calls:,} log calls × {metrics} values with wandb in "
              f"{time.perf_counter() - started:.0f} s")
        done.write_text("ok\n")
    return next((folder / "wandb").glob("offline-run-*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--metrics", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--wandb-python", default=sys.executable)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--tensorboard", type=Path, default=None)
    args = parser.parse_args()
    folder = args.dir or Path(tempfile.gettempdir()) / (
        f"runcompare-bench-wandb-{args.calls}x{args.metrics}")
    run = make(folder, args.calls, args.metrics, args.wandb_python)
    from runcompare.sources.formats.wandb import run_folder as wandb

    file = next(run.glob("*.wandb"))
    times, cpu, tb_times, tb_cpu = [], [], [], []
    for _ in range(args.repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        raw = wandb.read(run)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        if args.tensorboard is not None:
            from runcompare.sources.formats import tensorboard

            started, started_cpu = time.perf_counter(), time.process_time()
            tb = tensorboard.read(args.tensorboard)
            tb_times.append(time.perf_counter() - started)
            tb_cpu.append(time.process_time() - started_cpu)
    best = min(times)
    values = raw.points  # metric values (the step metric is the step, not a value)
    print(f"{file.name}: {file.stat().st_size / 1e6:.1f} MB, {values:,} values "
          f"({raw.scalars.get_column('metric').n_unique()} metrics, step unit "
          f"{raw.step_unit})")
    print(f"read: best {best:.3f} s wall of {args.repeat} -> {values / best:,.0f} values/s; "
          f"best CPU {min(cpu):.3f} s")
    if tb_times:
        per_point = (best / values) / (min(tb_times) / tb.points)
        print(f"tensorboard.read of {args.tensorboard.name}: {tb.points:,} values, best "
              f"{min(tb_times):.3f} s wall, best CPU {min(tb_cpu):.3f} s; W&B ÷ TensorBoard "
              f"time per point {per_point:.2f}× (wall)")
    cached(run, args.tensorboard, args.repeat)


def cached(run: Path, logdir: Path | None, repeat: int) -> None:
    """Best time of a cached read (``read_cached`` with a filled cache in a temporary
    folder), of the W&B run and of the TensorBoard logdir when given."""
    from runcompare import cache
    from runcompare.sources.formats import tensorboard
    from runcompare.sources.formats.wandb import run_folder as wandb

    with tempfile.TemporaryDirectory() as folder:
        os.environ["XDG_CACHE_HOME"] = folder
        for name, module, path in (("wandb", wandb, run), ("tensorboard", tensorboard, logdir)):
            if path is None:
                continue
            cache.read_cached(name, module, path)  # fills the cache
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                points = cache.read_cached(name, module, path).points
                times.append(time.perf_counter() - started)
            print(f"{name} cached: best {min(times):.3f} s wall for {points:,} values")


if __name__ == "__main__":
    main()
