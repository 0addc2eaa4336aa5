"""Special files where logs are looked for (issue: damaged, hostile and odd input): a FIFO
named like any format's log never makes runcompare wait, a FIFO given as the log is a clear
line, and the real logs beside such files are read as without them. What could not be read
(a FIFO, a link to nothing or in a loop, no permission) is named in a ``passed-over`` finding.

The permission tests read as the user ``nobody`` (uid 65534) when the tests run as root, who
may read anything: the effective uid is switched for the read and back."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import tempfile
from pathlib import Path

import pytest

import runcompare as rc

from .conftest import DATA, SAMPLES

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


def _special(path, how):
    if how == "fifo":
        os.mkfifo(path)
    elif how == "loop":
        os.symlink(path.name, path)
    else:
        os.symlink("nowhere", path)


@pytest.mark.parametrize("how", ["fifo", "loop", "dangling"])
@pytest.mark.parametrize("kind", list(NAMES))
def test_what_no_reader_can_open_is_named_in_a_finding(tmp_path, kind, how):
    run = tmp_path / "run"
    shutil.copytree(DATA / "tensorboard" / "tf2", run)
    entry = run / NAMES[kind]
    entry.parent.mkdir(parents=True, exist_ok=True)
    if entry.exists():
        entry.unlink()
    _special(entry, how)
    loaded = rc.load(run, cache=False)
    assert loaded.scalars.height == rc.load(DATA / "tensorboard" / "tf2", cache=False).scalars.height
    why = {"fifo": "a FIFO, socket or device", "loop": "a symbolic link in a loop",
           "dangling": "a symbolic link to nothing"}[how]
    message = {f.code: f.message for f in loaded.findings}["passed-over"]
    assert f"{NAMES[kind]} ({why}" in message and message.endswith("fix the links)")


@contextlib.contextmanager
def _as_nobody():
    """Reads inside are made as a user who is not root (``nobody`` when the tests run as root)."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.fixture
def shared_tmp():
    """A folder the user ``nobody`` may enter (pytest's own are the owner's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="runcompare-perm-"))
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(folder)


def _open_to_all(root):
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if path.is_dir() else 0))


@pytest.mark.parametrize("kind", ["text", "lightning", "mlflow-file", "mlflow-db", "jsonl",
                                  "tensorboard"])
def test_a_log_this_user_may_not_read_is_named_and_the_rest_is_read(shared_tmp, kind):
    run = shared_tmp / "run"
    shutil.copytree(DATA / "tensorboard" / "tf2", run)
    entry = run / NAMES[kind]
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text("step,loss\n1,2.5\n")
    _open_to_all(run)
    entry.chmod(0)
    rc.load(run, cache=False)  # as root first: every module the read needs is imported
    with _as_nobody():
        loaded = rc.load(run, cache=False)
    assert loaded.scalars.height == rc.load(DATA / "tensorboard" / "tf2", cache=False).scalars.height
    message = {f.code: f.message for f in loaded.findings}["passed-over"]
    assert f"{NAMES[kind]} (permission denied)" in message


def test_an_hf_dir_whose_runs_folder_may_not_be_read_says_so(shared_tmp):
    run = shared_tmp / "hf"
    shutil.copytree(DATA / "hf_tokens", run)
    _open_to_all(run)
    rc.load(run, cache=False)
    (run / "runs").chmod(0)
    with _as_nobody():
        loaded = rc.load(run, cache=False)
    assert "hf-trainer" in loaded.sources
    assert "runs/ (permission denied)" in {f.code: f.message for f in loaded.findings}["passed-over"]


def test_a_folder_whose_only_log_may_not_be_read_is_a_clear_line(shared_tmp, cli):
    run = shared_tmp / "run"
    run.mkdir()
    shutil.copy(SAMPLES / "attn" / "train.log", run / "train.log")
    _open_to_all(run)
    warm = shutil.copytree(run, shared_tmp / "warm")
    cli("inspect", warm, "--no-cache")  # as root first: every module the command needs is imported
    (run / "train.log").chmod(0)
    with _as_nobody():
        result = cli("inspect", run, "--no-cache")
    assert result.exit_code == 1
    assert "train.log (permission denied); if they hold logs, make them readable" in result.stderr


def test_a_log_given_that_this_user_may_not_read_is_a_clear_line(shared_tmp, cli):
    log = shared_tmp / "train.log"
    shutil.copy(SAMPLES / "attn" / "train.log", log)
    warm = shutil.copy(log, shared_tmp / "warm.log")
    cli("inspect", warm, "--no-cache")  # as root first: every module the command needs is imported
    log.chmod(0)
    with _as_nobody():
        result = cli("inspect", log, "--no-cache")
    assert result.exit_code == 1  # not 2, a usage error: the path is right, its mode is not
    assert result.stderr == (f"error: {log}: cannot be read (permission denied); make it "
                             "readable (chmod +r) or read it as a user who may\n")


#: Where W&B's service (wandb-core) logs on the machine a run was made on, and the link to it
#: that it makes in the run folder: ``symlinkDebugCore`` in wandb/wandb
#: core/internal/stream/streamlogger.go (commit 03920715bbc416a80e869662fe100308c2364304)
#: does ``os.Symlink(loggerPath, <run>/logs/debug-core.log)``, the path being the absolute
#: ``<user cache dir>/wandb/logs/core-debug-<date>_<time>.log`` (observability.GetLoggerPath).
CORE_LOG = "/home/trainer/.cache/wandb/logs/core-debug-20261129_100737.log"
WANDB_LOGS = "wandb/offline-run-20261129_100737-wqchi4g2/logs"


def _moved_wandb_run(tmp_path: Path, link: str = f"{WANDB_LOGS}/debug-core.log",
                     target: str = CORE_LOG) -> Path:
    """The real run tests/data/hf_global32 (Trainer + TensorBoard + W&B offline) as it reads
    on another machine: its ``debug-core.log`` a link to the W&B log in the cache folder of
    the machine it was made on (scripts/make_sample_logs.py kept a copy of that file
    instead), which is not here."""
    run = tmp_path / "run"
    shutil.copytree(DATA / "hf_global32", run, symlinks=True)
    entry = run / link
    entry.parent.mkdir(parents=True, exist_ok=True)
    if entry.exists() or entry.is_symlink():
        entry.unlink()
    os.symlink(target, entry)
    return run


def test_the_link_wandb_leaves_to_its_own_log_is_no_warning(tmp_path, cli):
    run = _moved_wandb_run(tmp_path)
    assert not (run / WANDB_LOGS / "debug-core.log").exists()  # the link leads nowhere
    loaded = rc.load(run, cache=False)
    alone = rc.load(DATA / "hf_global32", cache=False)
    assert "passed-over" not in {f.code for f in loaded.findings}
    # every number of trainer_state.json's 10 log_history entries but step and epoch
    assert loaded.scalars.height == alone.scalars.height == 35
    assert loaded.sources == alone.sources == ["hf-trainer", "tensorboard", "wandb", "hf-stdout"]
    result = cli("inspect", run, "--no-cache")
    assert result.exit_code == 0 and "passed-over" not in result.stdout + result.stderr


@pytest.mark.parametrize(("link", "target", "why"), [
    (f"{WANDB_LOGS}/debug-core.log", "debug-core.log", "a symbolic link in a loop"),
    (f"{WANDB_LOGS}/debug-core.log", "../../nowhere.log", "a symbolic link to nothing"),
    (f"{WANDB_LOGS}/debug-core.log", "/home/trainer/train.log", "a symbolic link to nothing"),
    (f"{WANDB_LOGS}/core.log", CORE_LOG, "a symbolic link to nothing"),
    ("logs/debug-core.log", CORE_LOG, "a symbolic link to nothing"),
])
def test_other_links_to_nothing_are_still_named(tmp_path, link, target, why):
    """Only the link W&B makes is passed over in silence: one it would not make (a relative
    target, another name, outside a W&B run folder) or a loop is still a warning."""
    run = _moved_wandb_run(tmp_path, link, target)
    loaded = rc.load(run, cache=False)
    message = {f.code: f.message for f in loaded.findings}["passed-over"]
    assert f"1 entry under it could not be read and was passed over: {link} ({why})" in message
