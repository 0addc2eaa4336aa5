"""Write the JSON-lines test logs under tests/data/jsonl/ (see tests/data/jsonl/README.md).

Each log is written by a real hand-written training loop (below): logistic regression on a
fixed synthetic data set, trained with mini-batch SGD in numpy, that appends one
``json.dumps`` object per optimizer step to ``metrics.jsonl`` the way such loops commonly do
(``{"step": 10, "loss": 0.52, "lr": 0.05, "grad_norm": 0.31, "wall_time": ...}``), and every
``EVAL_EVERY`` steps one object with a nested ``eval`` section. Three runs:

* ``plain``: 60 steps, batch 16;
* ``resumed``: killed after step 35, restarted from its step-30 checkpoint and run to 60, both
  processes appending to one file (steps 31-35 are logged twice);
* ``diverged``: a learning rate that makes the loss overflow: ``json.dumps`` writes ``NaN``
  and ``Infinity``, as Python does.

Needs numpy only. Run from the repository root::

    python scripts/make_jsonl_logs.py
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "jsonl"
EVAL_EVERY = 10
BATCH = 16
FEATURES = 8


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=FEATURES)
    x = rng.normal(size=(1200, FEATURES))
    y = (x @ weights + rng.normal(scale=0.5, size=1200) > 0).astype(np.float64)
    return x[:1000], y[:1000], x[1000:], y[1000:]


def loss_and_grad(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        p = 1 / (1 + np.exp(-(x @ w)))
        loss = float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
        return loss, x.T @ (p - y) / len(y)


def train(log: Path, *, steps: int, lr: float, start: int = 0, stop: int | None = None,
          w: np.ndarray | None = None, seed: int = 1) -> np.ndarray:
    """Steps ``start + 1`` .. ``stop or steps`` of SGD with a 5-step warmup; returns the
    weights (the "checkpoint")."""
    x, y, x_eval, y_eval = data()
    rng = np.random.default_rng(seed + start)
    w = np.zeros(FEATURES) if w is None else w.copy()
    with log.open("a") as out:
        for step in range(start + 1, (stop or steps) + 1):
            rate = lr * min(1.0, step / 5)
            batch = rng.choice(len(x), BATCH, replace=False)
            loss, grad = loss_and_grad(w, x[batch], y[batch])
            w -= rate * grad
            out.write(json.dumps({"step": step, "loss": loss, "lr": rate,
                                  "grad_norm": float(np.linalg.norm(grad)),
                                  "wall_time": time.time()}) + "\n")
            if step % EVAL_EVERY == 0:
                eval_loss, _ = loss_and_grad(w, x_eval, y_eval)
                accuracy = float(np.mean(((x_eval @ w) > 0) == (y_eval > 0.5)))
                out.write(json.dumps({"step": step,
                                      "eval": {"loss": eval_loss, "accuracy": accuracy}}) + "\n")
    return w


def main() -> None:
    shutil.rmtree(OUT / "plain", ignore_errors=True)
    shutil.rmtree(OUT / "resumed", ignore_errors=True)
    shutil.rmtree(OUT / "diverged", ignore_errors=True)
    for name in ("plain", "resumed", "diverged"):
        (OUT / name).mkdir(parents=True)
    train(OUT / "plain" / "metrics.jsonl", steps=60, lr=0.5)
    checkpoint = train(OUT / "resumed" / "metrics.jsonl", steps=60, lr=0.5, stop=30)
    train(OUT / "resumed" / "metrics.jsonl", steps=60, lr=0.5, start=30, stop=35, w=checkpoint)
    train(OUT / "resumed" / "metrics.jsonl", steps=60, lr=0.5, start=30, w=checkpoint)
    train(OUT / "diverged" / "metrics.jsonl", steps=20, lr=5e4)


if __name__ == "__main__":
    main()
