"""Regenerate the real Hugging Face Trainer logs checked into this repo.

What it makes (every run is a real ``transformers.Trainer`` run on CPU, tiny
model, synthetic token sequences of exactly 64 tokens, no padding, seed 42,
learning rate 3e-3, ``report_to=["tensorboard", "wandb"]`` with W&B offline):

  sample_logs/mamba/        MambaForCausalLM, per-device batch 8 x grad-accum 2 = global 16,
                            max_steps 100, logging_steps 5, eval every 25, checkpoint-100 kept
  sample_logs/attn/         LlamaForCausalLM, per-device batch 2 x grad-accum 8 = global 16,
                            otherwise identical to mamba
  tests/data/hf_resumed/    Llama, 2 x 8 = 16, max_steps 40, save every 20; leg 1 crashes
                            (uncaught exception) after step 30, leg 2 resumes from
                            checkpoint-20 (resume_from_checkpoint=True) into the same dir;
                            both legs' output appended to one train.log.  On CPU the resume
                            is exact: leg 2 re-logs steps 22-30 with bit-identical values.
  tests/data/hf_resumed_noskip/
                            same as hf_resumed, but leg 2 also sets ignore_data_skip=True, so
                            the re-run steps 22-30 see other batches and log different values
                            (and, a real Trainer quirk, `epoch` restarts from 0 after resume)
  tests/data/hf_ddp/        Llama, torchrun --nproc_per_node 2 (gloo, CPU),
                            4 x 2 accum x world 2 = 16, max_steps 30
  tests/data/hf_tokens/     Llama, 2 x 8 = 16, max_steps 30, include_num_input_tokens_seen="all"
  tests/data/hf_global32/   Llama, 4 x 8 = 32, max_steps 30
  tests/data/hf_seeds/      two seed groups of three runs each: Llama, 2 x 8 = 16, max_steps 40,
                            logging_steps 2, eval every 10, report_to=["tensorboard"];
                            lr3e-3_seed{1,2,3} (learning rate 3e-3) and lr1e-3_seed{1,2,3}
                            (1e-3), seeds 1, 2, 3 (model init and data order)
  tests/data/hf_v4_accum4/  Llama, 4 x 4 = 16, max_steps 30, trained with transformers 4.45.2
                            (before the 4.46 change to loss normalisation under gradient
                            accumulation) under the Python of another venv, OLD_TF_PYTHON;
                            report_to=["tensorboard"] only

Each run directory holds what the Trainer and its integrations wrote:
``train.log`` (stdout+stderr of the training process(es), interleaved in one
file, INFO verbosity, tqdm on), ``trainer_state.json``, ``checkpoint-N/``
(trainer_state.json, config files, training_args.bin), ``runs/<date>_<host>/``
(TensorBoard events) and ``wandb/offline-run-*/`` (incl. the ``.wandb`` file).
Model weights, optimizer/scheduler/RNG state and tokenizer files are deleted
afterwards to keep the repo small.  Absolute symlinks that W&B leaves in a run
folder (``logs/debug-core.log`` -> ~/.cache/wandb/...) are replaced by a copy
of the file they point to.  Nothing in the logs is edited.

Usage (from the repo root)::

    /work/genvenv/bin/python scripts/make_sample_logs.py            # everything
    /work/genvenv/bin/python scripts/make_sample_logs.py --only attn
    /work/genvenv/bin/python scripts/make_sample_logs.py --list

Versions used for the checked-in logs: Python 3.11, torch 2.13.0+cpu,
transformers 5.24.0, accelerate 1.15.0, wandb 0.31.0, tensorboard 2.21.0;
hf_v4_accum4 instead: transformers 4.45.2, accelerate 1.0.1, tokenizers 0.20.3
(same torch and tensorboard), from a venv made with::

    python3 -m venv /work/oldtf
    /work/oldtf/bin/pip install torch==2.13.0 transformers==4.45.2 accelerate==1.0.1 tensorboard

A run whose spec names a ``python`` is launched with that interpreter instead of
the one running this script.

Each run wipes and recreates its output directory.  Runtime: about 2-5
minutes in total on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKER = Path("scripts") / "_hf_train.py"

# Interpreter of the transformers 4.45 venv (see the docstring) for hf_v4_accum4.
OLD_TF_PYTHON = "/work/oldtf/bin/python"

COMMON = {
    "--learning-rate": "3e-3",
    "--warmup-steps": "5",
    "--seed": "42",
}


@dataclass
class Run:
    name: str
    out: str  # relative to the repo root
    model: str
    per_device: int
    accum: int
    max_steps: int
    logging_steps: int
    eval_steps: int
    save_steps: int
    save_total_limit: int | None = 1
    nproc: int = 1
    extra: list[str] = field(default_factory=list)
    crash_then_resume_at: int | None = None  # leg 1 crashes after this step, leg 2 resumes
    resume_extra: list[str] = field(default_factory=list)  # extra worker args for leg 2
    report_to: str = "tensorboard,wandb"  # TrainingArguments.report_to, comma-separated
    python: str | None = None  # interpreter to train with; None = the one running this script


RUNS = [
    Run("mamba", "sample_logs/mamba", "mamba", 8, 2, 100, 5, 25, 50),
    Run("attn", "sample_logs/attn", "llama", 2, 8, 100, 5, 25, 50),
    Run("hf_resumed", "tests/data/hf_resumed", "llama", 2, 8, 40, 2, 10, 20,
        save_total_limit=None, crash_then_resume_at=30),
    Run("hf_resumed_noskip", "tests/data/hf_resumed_noskip", "llama", 2, 8, 40, 2, 10, 20,
        save_total_limit=None, crash_then_resume_at=30, resume_extra=["--ignore-data-skip"]),
    Run("hf_ddp", "tests/data/hf_ddp", "llama", 4, 2, 30, 5, 10, 30, nproc=2),
    Run("hf_tokens", "tests/data/hf_tokens", "llama", 2, 8, 30, 5, 10, 30,
        extra=["--include-num-input-tokens-seen", "all"]),
    Run("hf_global32", "tests/data/hf_global32", "llama", 4, 8, 30, 5, 10, 30),
    Run("hf_v4_accum4", "tests/data/hf_v4_accum4", "llama", 4, 4, 30, 5, 10, 30,
        report_to="tensorboard", python=OLD_TF_PYTHON),
    *(Run(f"lr{lr}_seed{seed}", f"tests/data/hf_seeds/lr{lr}_seed{seed}", "llama", 2, 8, 40, 2,
          10, 40, report_to="tensorboard",
          extra=["--learning-rate", lr, "--seed", str(seed)])
      for lr in ("3e-3", "1e-3") for seed in (1, 2, 3)),
    # hf_seeds/lr3e-3_seed1 but for the weight decay and the optimizer ("what differs")
    Run("hf_wd0.1_adafactor", "tests/data/hf_wd0.1_adafactor", "llama", 2, 8, 40, 2, 10, 40,
        report_to="tensorboard",
        extra=["--seed", "1", "--weight-decay", "0.1", "--optim", "adafactor"]),
]

# Files that are model weights or large binary training state (or tokenizer files).
DELETE_NAMES = {
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "optimizer.pt",
    "scheduler.pt",
    "scaler.pt",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_cmd(run: Run, resume: bool = False, crash_at: int | None = None) -> list[str]:
    args = [
        "--model", run.model,
        "--output-dir", run.out,
        "--run-name", run.name,
        "--per-device-train-batch-size", str(run.per_device),
        "--gradient-accumulation-steps", str(run.accum),
        "--max-steps", str(run.max_steps),
        "--logging-steps", str(run.logging_steps),
        "--eval-steps", str(run.eval_steps),
        "--save-steps", str(run.save_steps),
        "--report-to", run.report_to,
    ]
    if run.save_total_limit is not None:
        args += ["--save-total-limit", str(run.save_total_limit)]
    for k, v in COMMON.items():
        args += [k, v]
    args += run.extra
    if resume:
        args.append("--resume")
    if crash_at is not None:
        args += ["--crash-at-step", str(crash_at)]
    python = run.python or sys.executable
    if run.nproc > 1:
        torchrun = Path(python).parent / "torchrun"
        launcher = [str(torchrun)] if torchrun.exists() else [python, "-m", "torch.distributed.run"]
        return launcher + [
            "--nproc_per_node", str(run.nproc),
            "--master_addr", "127.0.0.1",
            "--master_port", str(free_port()),
            str(WORKER),
        ] + args
    return [python, str(WORKER)] + args


def run_env(run: Run) -> dict[str, str]:
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("WANDB_"):
            del env[k]
    env.update(
        WANDB_MODE="offline",
        WANDB_DIR=run.out,  # -> <out>/wandb/offline-run-*/
        WANDB_PROJECT="runcompare-samples",
        PYTHONUNBUFFERED="1",  # keep stdout/stderr interleaving as it happens
        HF_HUB_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        CUDA_VISIBLE_DEVICES="",
    )
    return env


def launch(cmd: list[str], env: dict[str, str], log_path: Path) -> int:
    print("  $", " ".join(cmd), f">> {log_path.relative_to(REPO)} 2>&1", flush=True)
    t0 = time.time()
    with open(log_path, "ab") as log:
        rc = subprocess.run(cmd, check=False, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log).returncode
    print(f"    exit code {rc} after {time.time() - t0:.1f}s", flush=True)
    return rc


def cleanup(out: Path) -> None:
    time.sleep(2)  # let the wandb-core service finish writing its own logs
    for path in sorted(out.rglob("*")):
        if path.is_symlink():
            target = Path(os.readlink(path))
            if target.is_absolute():
                # W&B links logs/debug-core.log to ~/.cache/wandb/logs/...; keep the real file instead.
                path.unlink()
                if target.is_file():
                    shutil.copyfile(target, path)
            continue
        if not path.is_file():
            continue
        if path.name in DELETE_NAMES or (path.name.startswith("rng_state") and path.suffix == ".pth"):
            path.unlink()


def make(run: Run) -> None:
    out = REPO / run.out
    print(f"== {run.name}: {run.out}", flush=True)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    log = out / "train.log"
    env = run_env(run)
    if run.crash_then_resume_at is not None:
        rc1 = launch(worker_cmd(run, crash_at=run.crash_then_resume_at), env, log)
        if rc1 == 0:
            raise SystemExit(f"{run.name}: leg 1 was supposed to crash but exited 0")
        time.sleep(2)  # new TensorBoard dir name (second resolution) for leg 2
        rc = launch(worker_cmd(run, resume=True) + run.resume_extra, env, log)
    else:
        rc = launch(worker_cmd(run), env, log)
    if rc != 0:
        raise SystemExit(f"{run.name}: training failed with exit code {rc}; see {log}")
    cleanup(out)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and not p.is_symlink())
    print(f"    {run.out}: {size / 1024:.0f} KiB", flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", choices=[r.name for r in RUNS], help="regenerate only this run (repeatable)")
    p.add_argument("--list", action="store_true", help="list the runs and exit")
    a = p.parse_args(argv)
    if a.list:
        for r in RUNS:
            print(f"{r.name:12s} {r.out}")
        return
    selected = [r for r in RUNS if not a.only or r.name in a.only]
    for r in selected:
        if r.python is not None and not Path(r.python).exists():
            raise SystemExit(f"{r.name}: interpreter {r.python} not found; make it as the docstring says")
    for r in selected:
        make(r)


if __name__ == "__main__":
    main()
