"""Regenerate ``tests/data/batch_sweep/``: one tiny model trained at five global batches.

Every run is a real ``transformers.Trainer`` run on CPU through the same worker as
``make_sample_logs.py`` (``scripts/_hf_train.py``): the tiny ``LlamaForCausalLM`` (106,816
parameters), the same 8,192 synthetic training sequences of 64 tokens (seed 1234) and 64 eval
sequences, seed 42, learning rate 3e-3 with 5 warmup steps and then constant
(``lr_scheduler_type="constant_with_warmup"``, so the schedule is the same at every batch),
``max_grad_norm=1.0`` (the Trainer logs ``grad_norm`` before clipping),
``report_to=[]`` (``trainer_state.json`` and the console log ``train.log``, no progress
bar: ``disable_tqdm=True``). Only the global batch differs (micro-batch × accumulation):

  b4    4 × 1 =  4    500 steps, log every 10, eval every 10
  b8    8 × 1 =  8    350 steps, log every 7, eval every 8
  b16   8 × 2 = 16    250 steps, log every 5, eval every 5
  b32   8 × 4 = 32    180 steps, log every 4, eval every 4
  b64   8 × 8 = 64    140 steps, log every 2, eval every 3

Each run is long enough for every run to reach an eval loss of 1.7. After training the script
deletes model weights and optimizer state (as ``make_sample_logs.py`` does) and also the
``checkpoint-N/`` folders (the one checkpoint at the last step, a copy of the root's
trainer_state.json), to keep the folder small. Nothing in the logs is edited.

Usage (from the repo root; about 4 minutes on 2 CPU cores)::

    /path/to/python-with-torch-and-transformers scripts/make_batch_sweep.py
    .../python scripts/make_batch_sweep.py --only b16

Versions used for the checked-in logs: Python 3.11, torch 2.13.0+cpu, transformers 5.24.0,
accelerate 1.15.0, tensorboard 2.21.0.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_sample_logs import REPO, Run, make

OUT = "tests/data/batch_sweep"
EXTRA = ["--lr-scheduler-type", "constant_with_warmup", "--num-train-samples", "8192",
         "--disable-tqdm"]

#: name, micro-batch, accumulation, max steps, logging steps, eval steps
SWEEP = [
    ("b4", 4, 1, 500, 10, 10),
    ("b8", 8, 1, 350, 7, 8),
    ("b16", 8, 2, 250, 5, 5),
    ("b32", 8, 4, 180, 4, 4),
    ("b64", 8, 8, 140, 2, 3),
]

RUNS = [Run(name, f"{OUT}/{name}", "llama", micro, accum, steps, log, ev, steps + 1,
            report_to="none", extra=EXTRA)
        for name, micro, accum, steps, log, ev in SWEEP]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", choices=[r.name for r in RUNS],
                   help="regenerate only this run (repeatable)")
    a = p.parse_args(argv)
    for run in RUNS:
        if a.only and run.name not in a.only:
            continue
        make(run)
        for checkpoint in (REPO / run.out).glob("checkpoint-*"):
            shutil.rmtree(checkpoint)


if __name__ == "__main__":
    main()
