"""A generated sweep of HF Trainer runs for the report's sweep-scale tests: each run a real
trainer_state.json of sample_logs/attn (the layout the Trainer writes) with its losses
scaled per run, beside a runcompare.toml that gives its sequence length and micro-batch
(two micro-batches across the sweep, so the hierarchy differs between runs)."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import SAMPLES

__all__ = ["write_sweep"]


def write_sweep(folder: Path, runs: int) -> list[Path]:
    """``runs`` run folders ``lr_<i>`` in ``folder``; run i's losses are attn's × (1 + i/100)."""
    state = json.loads((SAMPLES / "attn" / "trainer_state.json").read_text())
    paths = []
    for i in range(runs):
        run = folder / f"lr_{i:03d}"
        run.mkdir(parents=True)
        batch = 2 if i % 2 else 4
        history = [_scaled(entry, 1 + i / 100) for entry in state["log_history"]]
        scaled = dict(state, train_batch_size=batch, log_history=history)
        (run / "trainer_state.json").write_text(json.dumps(scaled, indent=2))
        (run / "runcompare.toml").write_text(f"seq_len = 64\nper_device_batch = {batch}\n"
                                             "grad_accum = 1\nworld_size = 1\n")
        paths.append(run)
    return paths


def _scaled(entry: dict, factor: float) -> dict:
    return {k: v * factor if k in ("loss", "eval_loss") else v for k, v in entry.items()}

