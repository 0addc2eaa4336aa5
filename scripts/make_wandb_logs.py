"""Make the small real W&B run folders under tests/data/wandb/ with the real wandb package.

Run from the repo root (offline; nothing leaves the machine)::

    WANDB_MODE=offline /work/genvenv/bin/python scripts/make_wandb_logs.py
    # optional: also a run written by the legacy (pure Python) wandb 0.16.6, kept in another
    # venv because it would replace the current wandb:
    WANDB_MODE=offline /work/genvenv/bin/python scripts/make_wandb_logs.py \\
        --legacy-python /tmp/wbold/bin/python

What it makes (values follow fixed formulas so the tests can check numbers):

  tests/data/wandb/project/wandb/   one wandb/ folder holding four run folders of three runs,
                                    as a script run several times in one directory leaves it:
    plain     no step metric: 30 optimizer steps, ``train/loss`` = 4 × 0.95^step and
              ``train/lr`` per step in one ``wandb.log`` call, ``eval/loss`` every 10 steps in a
              separate call (so ``_step`` reaches 32 after 30 steps); ``train/loss`` is NaN at
              step 17; config ``batch_size`` 16, ``seq_len`` 64, ``gradient_accumulation_steps`` 2
    custom    ``define_metric("*", step_metric="trainer/step")``: 20 optimizer steps of 4 micro-
              batches (the script counts micro-steps too), eval every 5 steps in a separate call
              without the step key (W&B fills it in), a nested ``grad`` dict; nested config
              ``data.seq_len`` 128, ``optim.micro_batch_size`` 4,
              ``optim.gradient_accumulation_steps`` 4, ``world_size`` 1
    resumed   two legs of run id ``resumed0`` (``resume="allow"``): leg 1 logs steps 1..30 and
              exits with code 1 (a crash), leg 2 resumes from a step-20 checkpoint and logs
              21..40; ``train/loss`` = 3 − step/100 + leg (so the legs differ)
  tests/data/wandb/legacy/wandb/    (with --legacy-python) the plain run written by wandb
              0.16.6, whose offline runs also keep files/wandb-metadata.json and
              files/wandb-summary.json, with nested dicts logged as one JSON value; then
              ``wandb sync`` against an unreachable server writes files/config.yaml (its
              sender saves the config before it first contacts the server) and is stopped.

Folder names carry the start second, so legs start at least a second apart. Logs of the
wandb internals (``logs/``, ``debug*.log``, ``tmp/``, ``requirements.txt``) are removed to keep
the repo small; nothing else is edited. Finally each ``.wandb`` file is checked for history
records with wandb's own protobuf classes.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "wandb"


def plain(wandb, directory: Path) -> None:
    """No step metric: W&B's _step counts the log calls."""
    run = wandb.init(project="runcompare-tests", name="plain", dir=directory,
                     config={"batch_size": 16, "seq_len": 64, "gradient_accumulation_steps": 2,
                             "learning_rate": 1e-3})
    for step in range(1, 31):
        loss = math.nan if step == 17 else 4.0 * 0.95 ** step
        run.log({"train/loss": loss, "train/lr": 1e-3 * min(1.0, step / 5)})
        if step % 10 == 0:
            run.log({"eval/loss": 4.2 * 0.95 ** step})
    print("plain: done")
    run.finish()


def custom(wandb, directory: Path) -> None:
    """A declared step metric, micro-batches counted by the script, nested dict and config."""
    run = wandb.init(project="runcompare-tests", name="custom", dir=directory,
                     config={"data": {"seq_len": 128},
                             "optim": {"micro_batch_size": 4, "gradient_accumulation_steps": 4},
                             "world_size": 1})
    run.define_metric("trainer/step")
    run.define_metric("*", step_metric="trainer/step")
    micro = 0
    for step in range(1, 21):
        micro += 4
        run.log({"trainer/step": step, "trainer/micro_step": micro,
                 "train/loss": 5.0 - 0.1 * step, "grad": {"norm": 1.0 / step}})
        if step % 5 == 0:
            run.log({"eval/loss": 5.5 - 0.1 * step})  # no step key: W&B adds the last one
    run.finish()


def resumed(wandb, directory: Path) -> None:
    """Two legs of one run id: a crash after step 30, a resume from the step-20 checkpoint."""
    for leg, steps, code in ((0, range(1, 31), 1), (1, range(21, 41), 0)):
        if leg:
            time.sleep(1.5)  # folder names carry the start second
        run = wandb.init(project="runcompare-tests", name="resumed", id="resumed0",
                         resume="allow", dir=directory,
                         config={"per_device_train_batch_size": 8,
                                 "gradient_accumulation_steps": 2})
        run.define_metric("train/global_step")
        run.define_metric("*", step_metric="train/global_step")
        for step in steps:
            run.log({"train/global_step": step, "train/loss": 3.0 - step / 100 + leg})
        run.finish(exit_code=code)


def _tidy(wandb_dir: Path) -> None:
    """Drop wandb's own debug logs and caches (not read by runcompare, large, absolute links)."""
    for path in sorted(wandb_dir.rglob("*"), reverse=True):
        name = path.name
        if path.is_symlink() and name != "latest-run":
            path.unlink()
        elif path.is_dir() and name in ("logs", "tmp"):
            shutil.rmtree(path)
        elif path.is_file() and (name.startswith("debug") or name == "requirements.txt"):
            path.unlink()


def records(file: Path):
    """Every Record of a .wandb file, decoded with wandb's own protobuf classes."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, parts = file.read_bytes(), 7, b""
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:
            pos += 32768 - pos % 32768
            continue
        _crc, length, kind = struct.unpack_from("<IHB", data, pos)
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        parts = chunk if kind in (1, 2) else parts + chunk
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(parts)
            yield record


def _history_count(file: Path) -> int:
    """History records in a .wandb file."""
    return sum(record.WhichOneof("record_type") == "history" for record in records(file))


def check(root: Path) -> None:
    for file in sorted(root.rglob("*.wandb")):
        if "latest-run" in file.parts:
            continue
        count = _history_count(file)
        print(f"{file.relative_to(REPO)}: {count} history records")
        if count == 0:
            raise SystemExit(f"{file}: no history written")


def legacy(python: str) -> None:
    """The plain run written by wandb 0.16.6, plus files/config.yaml from a failed sync."""
    target = OUT / "legacy"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    code = ("import sys, math, wandb; sys.path.insert(0, 'scripts'); "
            "import make_wandb_logs as m; m.plain_legacy(wandb, sys.argv[1])")
    # not the parent's WANDB_* (its wandb-core service would be reused by the old client)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true")
    subprocess.run([python, "-c", code, str(target)], check=True, cwd=REPO, env=env)
    folder = next((target / "wandb").glob("offline-run-*"))
    sync_env = {**env, "WANDB_MODE": "online", "WANDB_API_KEY": "0" * 40,
                "WANDB_BASE_URL": "http://127.0.0.1:9"}
    wandb_cli = str(Path(python).parent / "wandb")
    sync = subprocess.Popen([wandb_cli, "sync", str(folder)], cwd=target, env=sync_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(120):
        if (folder / "files" / "config.yaml").is_file():
            break
        time.sleep(0.5)
    time.sleep(1)
    sync.kill()
    sync.wait()
    _tidy(target)
    for path in target.rglob("*"):
        if path.is_dir() and path.name == "wandb" and path.parent != target:
            shutil.rmtree(path)


def plain_legacy(wandb, directory: str) -> None:
    """:func:`plain` plus a nested dict (the legacy writer logs it as one JSON value)."""
    run = wandb.init(project="runcompare-tests", name="plain", dir=directory,
                     config={"batch_size": 16, "seq_len": 64, "gradient_accumulation_steps": 2})
    for step in range(1, 31):
        run.log({"train/loss": 4.0 * 0.95 ** step, "opt": {"grad_norm": 1.0 / step}})
        if step % 10 == 0:
            run.log({"eval/loss": 4.2 * 0.95 ** step})
    run.finish()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--legacy-python", help="python of a venv with wandb==0.16.6")
    args = parser.parse_args()
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    project = OUT / "project"
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir(parents=True)
    for make in (plain, custom, resumed):
        make(wandb, project)
        time.sleep(1.5)
    _tidy(project)
    if args.legacy_python:
        legacy(args.legacy_python)
    check(OUT)
    print(f"wandb {wandb.__version__}, python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
