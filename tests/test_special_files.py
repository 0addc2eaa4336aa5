"""Special files where logs are looked for (issue: damaged, hostile and odd input): a FIFO
named like any format's log never makes runcompare wait, a FIFO given as the log is a clear
line, and the real logs beside such files are read as without them."""

from __future__ import annotations

import os
import shutil
import signal

import pytest

import runcompare as rc

from .conftest import DATA

#: A name each format looks for, relative to a run folder.
NAMES = {
    "tensorboard": "events.out.tfevents.1.host",
    "wandb": "wandb/run-20240101_000000-abcdefgh/run-abcdefgh.wandb",
    "lightning": "lightning_logs/version_0/metrics.csv",
    "mlflow-file": "mlruns/0/abc/metrics/loss",
    "mlflow-db": "mlflow.db",
    "text": "train.log",
    "jsonl": "metrics.jsonl",
    "hf-trainer": "trainer_state.json",
    "axolotl": "axolotl.yml",
}


class Blocked(BaseException):
    """Raised in a test blocked on a special file (no reader may catch it as an OSError)."""


@pytest.fixture(autouse=True)
def _no_hang():
    """A test that would block on a FIFO fails after 20 s instead of hanging CI."""
    def stop(*_):
        raise Blocked("blocked on a special file")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("kind", list(NAMES))
def test_a_fifo_named_like_a_log_is_passed_over(tmp_path, kind):
    run = tmp_path / "run"
    shutil.copytree(DATA / "tensorboard" / "tf2", run)  # a real log beside it
    fifo = run / NAMES[kind]
    fifo.parent.mkdir(parents=True, exist_ok=True)
    if fifo.exists():
        fifo.unlink()
    os.mkfifo(fifo)
    loaded = rc.load(run, cache=False)
    alone = rc.load(DATA / "tensorboard" / "tf2", cache=False)
    assert loaded.scalars.height == alone.scalars.height


def test_a_fifo_given_as_the_log_is_a_clear_line(cli, tmp_path):
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    result = cli("inspect", fifo)
    assert result.exit_code == 1 and "not a regular file or folder (a FIFO" in result.stderr


def test_a_fifo_in_place_of_an_hf_runs_config_is_passed_over(tmp_path):
    shutil.copytree(DATA / "hf_tokens", tmp_path / "run")
    (tmp_path / "run" / "config.json").unlink()
    os.mkfifo(tmp_path / "run" / "config.json")
    run = rc.load(tmp_path / "run", cache=False, source="hf-trainer")
    assert run.scalars.height == rc.load(DATA / "hf_tokens", cache=False,
                                         source="hf-trainer").scalars.height
