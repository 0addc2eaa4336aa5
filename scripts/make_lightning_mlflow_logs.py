"""Make the small real Lightning and MLflow logs under tests/data/ with the real packages.

Run from the repo root (CPU, about half a minute; nothing leaves the machine)::

    /work/genvenv/bin/python scripts/make_lightning_mlflow_logs.py

Needs ``lightning`` and ``mlflow`` (``pip install lightning mlflow "torch==2.13.0"``).

Every run trains the same tiny bigram language model (embedding 16 → linear 64 → vocab 64)
on deterministic synthetic sequences of 32 tokens (arithmetic progressions mod 64), seed 0,
AdamW lr 3e-3 with a linear decay, for a few dozen optimizer steps. What it makes:

  tests/data/lightning/lightning_logs/   CSVLogger, two versions of one script
    version_0   batch_size 4, Trainer(accumulate_grad_batches=2), max_steps 24, validation
                every 16 training batches (8 optimizer steps); the module saves batch_size,
                seq_len, lr and accumulate_grad_batches with save_hyperparameters();
                ``train_loss`` on_step+on_epoch, ``val_loss``, LearningRateMonitor (``lr-AdamW``)
    version_1   batch_size 8, accumulate_grad_batches 1 passed to the Trainer only (so, as in
                most real scripts, hparams.yaml does not record it), max_steps 16, then
                ``trainer.test()`` on the validation data (``test_loss``)
  tests/data/mlflow/file_store/mlruns/   MLflow file store (MLFLOW_ALLOW_FILE_STORE=true)
    experiment "tiny-lm": runs "accum2" (batch_size 4, gradient_accumulation_steps 2: global
    batch 8) and "accum1" (batch_size 4, 1: global batch 4), plain torch loops logging
    ``train/loss``, ``train/learning_rate``, ``grad_norm`` each optimizer step (step = updates
    done, 1-based),
    ``eval/loss`` every 8 steps, ``train/num_input_tokens_seen`` (a token counter) in accum1,
    params batch_size, gradient_accumulation_steps, seq_len, learning_rate, max_steps;
    a third run "deleted" removed with ``mlflow.delete_run`` (meta.yaml says deleted).
  tests/data/mlflow/sqlite/mlflow.db     MLflow's default SQLite store, the same two runs
    plus "lightning" (Lightning's MLFlowLogger: keys ``train_loss_step``, ``epoch``, 0-based
    steps) and a deleted run; then VACUUMed with page_size 512 to keep it small.

Only the folders named above are copied out of a temporary working folder; the absolute paths
inside meta.yaml / the runs table point to that (deleted) folder. Losses are reproducible on
the same software; timestamps and run ids change on every regeneration.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")

import lightning as L
import mlflow
import torch
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.loggers import CSVLogger, MLFlowLogger
from torch.utils.data import DataLoader, TensorDataset

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
VOCAB, SEQ_LEN, LR = 64, 32, 3e-3


def sequences(count: int, seed: int) -> torch.Tensor:
    """``count`` arithmetic progressions mod VOCAB with a random start and stride 1..4."""
    gen = torch.Generator().manual_seed(seed)
    start = torch.randint(0, VOCAB, (count, 1), generator=gen)
    stride = torch.randint(1, 5, (count, 1), generator=gen)
    return (start + stride * torch.arange(SEQ_LEN)) % VOCAB


class Bigram(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 16), torch.nn.Linear(16, 64),
                                       torch.nn.ReLU(), torch.nn.Linear(64, VOCAB))

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        logits = self.net(batch[:, :-1])
        return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                 batch[:, 1:].reshape(-1))


def schedule(optimizer: torch.optim.Optimizer, max_steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 - s / max_steps)


class LitBigram(L.LightningModule):
    def __init__(self, batch_size: int, seq_len: int = SEQ_LEN, lr: float = LR,
                 max_steps: int = 24, **extra: int) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = Bigram()

    def training_step(self, batch: list[torch.Tensor], _: int) -> torch.Tensor:
        loss = self.model.loss(batch[0])
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch: list[torch.Tensor], _: int) -> None:
        self.log("val_loss", self.model.loss(batch[0]))

    def test_step(self, batch: list[torch.Tensor], _: int) -> None:
        self.log("test_loss", self.model.loss(batch[0]))

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        return {"optimizer": optimizer, "lr_scheduler": {
            "scheduler": schedule(optimizer, self.hparams.max_steps), "interval": "step"}}


def loaders(batch_size: int) -> tuple[DataLoader, DataLoader]:
    train = DataLoader(TensorDataset(sequences(128, 1)), batch_size=batch_size)
    val = DataLoader(TensorDataset(sequences(32, 2)), batch_size=16)
    return train, val


def lightning_run(logger: L.pytorch.loggers.Logger, *, batch_size: int, accum: int,
                  max_steps: int, save_accum: bool, test: bool = False) -> None:
    torch.manual_seed(0)
    extra = {"accumulate_grad_batches": accum} if save_accum else {}
    module = LitBigram(batch_size=batch_size, max_steps=max_steps, **extra)
    trainer = L.Trainer(max_steps=max_steps, accumulate_grad_batches=accum, logger=logger,
                        log_every_n_steps=1, val_check_interval=16, accelerator="cpu",
                        callbacks=[LearningRateMonitor("step")], enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    train, val = loaders(batch_size)
    trainer.fit(module, train, val)
    if test:
        trainer.test(module, val, verbose=False)


def make_lightning(work: Path) -> None:
    for accum, batch_size, max_steps, save in ((2, 4, 24, True), (1, 8, 16, False)):
        lightning_run(CSVLogger(work / "lightning"), batch_size=batch_size, accum=accum,
                      max_steps=max_steps, save_accum=save, test=not save)
    copy(work / "lightning" / "lightning_logs", DATA / "lightning" / "lightning_logs")


def torch_run(name: str, *, batch_size: int, accum: int, max_steps: int = 24,
              tokens: bool = False) -> None:
    """A plain loop logging to the active MLflow tracking URI; step = optimizer updates done."""
    torch.manual_seed(0)
    model = Bigram()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    scheduler = schedule(optimizer, max_steps)
    train, val = loaders(batch_size)
    with mlflow.start_run(run_name=name):
        mlflow.log_params({"batch_size": batch_size, "gradient_accumulation_steps": accum,
                           "seq_len": SEQ_LEN, "learning_rate": LR, "max_steps": max_steps})
        step, seen, batches = 0, 0, iter(())
        while step < max_steps:
            total = 0.0
            for _ in range(accum):
                batch = next(batches, None)
                if batch is None:
                    batches = iter(train)
                    batch = next(batches)
                loss = model.loss(batch[0]) / accum
                loss.backward()
                total += loss.item()
                seen += batch[0].numel()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
            lr = scheduler.get_last_lr()[0]
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            metrics = {"train/loss": total, "train/learning_rate": lr, "grad_norm": norm}
            if tokens:
                metrics["train/num_input_tokens_seen"] = seen
            if step % 8 == 0:
                with torch.no_grad():
                    metrics["eval/loss"] = sum(model.loss(b[0]).item() for b in val) / len(val)
            mlflow.log_metrics(metrics, step=step)


def deleted_run() -> None:
    with mlflow.start_run(run_name="deleted") as run:
        mlflow.log_metric("train/loss", 9.0, step=1)
    mlflow.delete_run(run.info.run_id)


def make_mlflow_file_store(work: Path) -> None:
    store = work / "file_store" / "mlruns"
    mlflow.set_tracking_uri(store.as_uri())
    mlflow.set_experiment("tiny-lm")
    torch_run("accum2", batch_size=4, accum=2)
    torch_run("accum1", batch_size=4, accum=1, tokens=True)
    deleted_run()
    copy(store, DATA / "mlflow" / "file_store" / "mlruns")


def make_mlflow_sqlite(work: Path) -> None:
    db = work / "sqlite" / "mlflow.db"
    db.parent.mkdir(parents=True)
    uri = f"sqlite:///{db}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("tiny-lm")
    torch_run("accum2", batch_size=4, accum=2)
    torch_run("accum1", batch_size=4, accum=1, tokens=True)
    deleted_run()
    logger = MLFlowLogger(experiment_name="tiny-lm-lightning", run_name="lightning",
                          tracking_uri=uri)
    lightning_run(logger, batch_size=4, accum=2, max_steps=24, save_accum=True)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA page_size = 512")  # takes effect with the VACUUM below
    conn.execute("VACUUM")
    conn.close()
    target = DATA / "mlflow" / "sqlite"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(db, target / "mlflow.db")


def copy(source: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("artifacts"))


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="rc-lm-") as tmp:
        work = Path(tmp)
        cwd = os.getcwd()
        os.chdir(work)  # MLflow puts artifact folders under the working directory
        try:
            make_lightning(work)
            make_mlflow_file_store(work)
            make_mlflow_sqlite(work)
        finally:
            os.chdir(cwd)
    for folder in ("lightning", "mlflow"):
        size = sum(f.stat().st_size for f in (DATA / folder).rglob("*") if f.is_file())
        print(f"tests/data/{folder}: {size:,} bytes")


if __name__ == "__main__":
    main()
