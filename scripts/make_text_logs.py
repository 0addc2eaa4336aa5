"""Write the plain-text test logs under tests/data/text/ (see tests/data/text/README.md).

Two kinds of files:

* made by real programs: ``seed_trainer/train.log`` is the stdout+stderr of a small real
  PyTorch training loop (below, ``SEED_TRAINER``) that shows a tqdm bar over micro-steps and
  prints ``[step N epoch E] loss=... tflops=... mfu=...`` lines; ``hf4x_attn/train.log`` is the
  real transformers 5.24 stdout of ``sample_logs/attn`` with every dict reformatted the way
  transformers 4.x prints it (numbers, not strings; loss rounded to 4 decimals, epoch to 2);
* hand-made to the documented formats (../shared/FORMATS.md §4, the writers' print
  statements): Megatron-LM, nanoGPT, torchtitan and generic ``key=value`` logs, with made-up
  but self-consistent numbers (a Megatron batch ramp follows ``--rampup-batch-size`` exactly).

Run from the repository root (the seed trainer needs torch and tqdm)::

    /work/genvenv/bin/python scripts/make_text_logs.py
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "text"
START = datetime(2024, 3, 1, 9, 0, 0)


def loss_at(step: int, base: float = 10.5, floor: float = 2.0) -> float:
    """A smooth, decreasing made-up loss curve."""
    return floor + (base - floor) * math.exp(-step / 60) + 0.01 * math.sin(step)


# --- Megatron-LM -------------------------------------------------------------------------

MEGATRON_ARGS = {
    "micro_batch_size": 4, "global_batch_size": 128, "seq_length": 1024,
    "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1,
    "context_parallel_size": 1, "world_size": 16, "data_parallel_size": 8,
    "train_iters": 200, "log_interval": 10, "eval_interval": 50, "lr": 0.00015,
    "rampup_batch_size": "['32', '32', '3000']",
}


def megatron_args(overrides: dict[str, object]) -> list[str]:
    """The arguments block, as ``megatron/training/arguments.py:_print_args`` prints it."""
    args = {**MEGATRON_ARGS, **overrides}
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in sorted(args.items())]
    lines.append("-------------------- end of arguments ---------------------")
    return lines


def ramp_batch(consumed: int, start: int = 32, incr: int = 32, samples: int = 3000,
               final: int = 128) -> int:
    """Megatron's ``--rampup-batch-size start incr samples``: start + int(consumed /
    (samples / ((final - start) / incr))) × incr until ``samples`` were consumed."""
    if consumed >= samples:
        return final
    per_increment = samples / ((final - start) // incr)
    return start + int(consumed / per_increment) * incr


def megatron_train_line(it: int, total: int, consumed: int, batch: int, loss: float,
                        stamp: datetime | None, nan_iters: int = 0) -> str:
    """One line of ``training_log`` (megatron/training/training.py)."""
    text = f" [{stamp:%Y-%m-%d %H:%M:%S}]" if stamp else ""
    text += f" iteration {it:8d}/{total:8d} |"
    text += f" consumed samples: {consumed:12d} |"
    text += f" elapsed time per iteration (ms): {812.3 + it % 7:.1f} |"
    text += f" throughput per GPU (TFLOP/s/GPU): {180.2 - it % 5:.1f} |"
    text += f" learning rate: {1.5e-4 * min(1.0, it / 50):.6E} |"
    text += f" global batch size: {batch:5d} |"
    text += f" lm loss: {loss:.6E} |"
    text += f" loss scale: {1.0:.1f} |"
    text += f" grad norm: {0.8 + 1 / it:.3f} |"
    text += f" number of skipped iterations: {0:3d} |"
    text += f" number of nan iterations: {nan_iters:3d} |"
    return text


def megatron_validation(where: str, loss: float) -> list[str]:
    """``evaluate_and_print_results``: a dashed box around one line."""
    line = f" validation loss at {where} | lm loss value: {loss:.6E} | " \
           f"lm loss PPL: {math.exp(min(20, loss)):.6E} | "
    return ["-" * (len(line) + 1), line, "-" * (len(line) + 1)]


def megatron_ramp() -> str:
    """200 iterations with a batch ramp 32 → 128 (timestamps), log every 10, eval every 50."""
    lines = [("using world size: 16, data-parallel size: 8, context-parallel size: 1, "
              "tensor-model-parallel size: 2, pipeline-model-parallel size: 1"),
             *megatron_args({}), "> building train, validation, and test datasets ...",
             "[after dataloaders are built] datetime: 2024-03-01 09:00:00", "training ..."]
    consumed = 0
    for it in range(1, 201):
        batch = ramp_batch(consumed)
        consumed += batch
        if it % 10 == 0:
            stamp = START + timedelta(seconds=0.8 * it)
            lines.append(megatron_train_line(it, 200, consumed, batch, loss_at(it), stamp))
        if it % 50 == 0:
            lines += megatron_validation(f"iteration {it} on validation set", loss_at(it) + 0.05)
    lines += megatron_validation("iteration 200 on test set", loss_at(200) + 0.07)
    return "\n".join(lines) + "\n"


def megatron_restart() -> str:
    """No timestamps (pre-2024 Megatron): crash after iteration 130, checkpoint at 100,
    relaunch appended to the same file; plus a truncated line and a few garbage bytes."""
    lines = [*megatron_args({"rampup_batch_size": None, "global_batch_size": 64}), "training ..."]
    for it in range(10, 131, 10):
        lines.append(megatron_train_line(it, 200, it * 64, 64, loss_at(it), None))
        if it == 100:
            lines.append("  successfully saved checkpoint from iteration     100 to /ckpt "
                         "[ t 1/2, p 1/1 ]")
    lines.append(megatron_train_line(131, 200, 131 * 64, 64, loss_at(131), None)[:120])
    lines.append("[E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout")
    lines += megatron_args({"rampup_batch_size": None, "global_batch_size": 64})
    lines.append(" loading checkpoint from /ckpt at iteration 100")
    lines.append("  successfully loaded checkpoint from /ckpt [ t 1/2, p 1/1 ] at iteration 100")
    for it in range(110, 201, 10):
        nan = 1 if it == 150 else 0
        lines.append(megatron_train_line(it, 200, it * 64, 64, loss_at(it) - 0.003, None, nan))
        if it % 50 == 0:
            lines += megatron_validation(f"iteration {it}", loss_at(it) + 0.04)
    lines += megatron_validation("the end of training for test data", loss_at(200) + 0.06)
    return "\n".join(lines) + "\n"


# --- nanoGPT -----------------------------------------------------------------------------

NANOGPT_CONFIG = """\
# train a miniature character-level shakespeare model
out_dir = 'out-shakespeare-char'
eval_interval = 250 # keep frequent because we'll overfit
eval_iters = 200
log_interval = 10 # don't print too too often
gradient_accumulation_steps = 1
batch_size = 64
block_size = 256 # context of up to 256 previous characters
learning_rate = 1e-3 # with baby networks can afford to go a bit higher
max_iters = 5000
"""


def nanogpt() -> str:
    """train.py of nanoGPT on shakespeare_char, 500 iterations, resumed once at 250."""
    lines = ["Overriding config with config/train_shakespeare_char.py:", NANOGPT_CONFIG.rstrip(),
             "Overriding: max_iters = 500", "tokens per iteration will be: 16,384",
             "found vocab_size = 65 (inside data/shakespeare_char/meta.pkl)",
             "Initializing a new model from scratch", "number of parameters: 10.65M",
             "using fused AdamW: True", "compiling the model... (takes a ~minute)"]
    running = -1.0
    for it in range(301):
        if it % 250 == 0:
            lines.append(f"step {it}: train loss {loss_at(it, 4.3, 1.0):.4f}, "
                         f"val loss {loss_at(it, 4.3, 1.05):.4f}")
            if it:
                lines.append("saving checkpoint to out-shakespeare-char")
        if it % 10 == 0:
            mfu = running if it >= 50 else -1.0
            lines.append(f"iter {it}: loss {loss_at(it, 4.3, 1.0):.4f}, time "
                         f"{32.87 + it % 3:.2f}ms, mfu {mfu * 100:.2f}%")
            running = 0.1134
    lines += ["Overriding config with config/train_shakespeare_char.py:", "init_from = 'resume'",
              "tokens per iteration will be: 16,384", "Resuming training from out-shakespeare-char",
              "number of parameters: 10.65M"]
    for it in range(250, 501):
        if it % 250 == 0:
            lines.append(f"step {it}: train loss {loss_at(it, 4.3, 1.0):.4f}, "
                         f"val loss {loss_at(it, 4.3, 1.05):.4f}")
        if it % 10 == 0:
            mfu = 0.1120 if it >= 300 else -1.0
            lines.append(f"iter {it}: loss {loss_at(it, 4.3, 0.99):.4f}, time "
                         f"{33.01 + it % 3:.2f}ms, mfu {mfu * 100:.2f}%")
    return "\n".join(lines) + "\n"


# --- torchtitan --------------------------------------------------------------------------

COLORS = {"red": "\033[31m", "green": "\033[32m", "orange": "\033[38;2;255;165;0m",
          "yellow": "\033[33m", "blue": "\033[34m", "cyan": "\033[36m", "magenta": "\033[35m",
          "reset": "\033[39m"}


def titan(stamp: datetime, message: str) -> str:
    """torchtitan's logging format: ``[titan] %(asctime)s - %(name)s - %(levelname)s - ...``."""
    return f"[titan] {stamp:%Y-%m-%d %H:%M:%S},{stamp.microsecond // 1000:03d} - root - INFO - " \
           + message


def torchtitan() -> str:
    """A llama3 debug run: 100 steps, log every 10, validation every 50; mfu N/A once."""
    c = COLORS
    t = START
    lines = [titan(t, "Starting job: Llama 3 8B training"),
             titan(t, "Building 1-D device mesh with ['dp_shard'], [8]"),
             titan(t, f"{c['blue']}Model llama3 8B {c['red']}size: 8,030,261,248 total "
                      f"parameters{c['reset']}"),
             titan(t, "Training starts at step 1, with local batch size 1, global batch size 8, "
                      "gradient accumulation steps 1, sequence length 8192, total steps 100 "
                      "(warmup 20)")]
    for step in range(1, 101):
        t += timedelta(seconds=1.25)
        if step == 1 or step % 10 == 0:
            mfu = "N/A" if step == 1 else f"{30.45 + step % 4:.2f}%"
            lines.append(titan(t, (
                f"{c['red']}step: {step:2}  {c['green']}loss: {loss_at(step, 12.0, 3.0):7.4f}  "
                f"{c['orange']}grad_norm: {1.2345 + 1 / step:7.4f}  "
                f"{c['yellow']}memory: {30.12:5.2f}GiB({38.10:.2f}%)  "
                f"{c['blue']}tps: {round(6543.4 + step):,}  "
                f"{c['cyan']}tflops: {301.23 + step % 3:,.2f}  "
                f"{c['magenta']}mfu: {mfu}{c['reset']}")))
        if step % 50 == 0:
            lines.append(titan(t, (
                f"{c['yellow']}validate step: {step:2}  {c['green']}loss: "
                f"{loss_at(step, 12.0, 3.1):7.4f}  {c['yellow']}memory: {30.5:5.2f}GiB"
                f"({38.6:.2f}%){c['reset']}")))
    lines.append(titan(t, "Training completed"))
    return "\n".join(lines) + "\n"


def titan_step(stamp: datetime, step: int, loss: float) -> str:
    c = COLORS
    return titan(stamp, f"{c['red']}step: {step:2}  {c['green']}loss: {loss:7.4f}  "
                        f"{c['orange']}grad_norm: {0.9 + 1 / step:7.4f}  "
                        f"{c['yellow']}memory: {41.30:5.2f}GiB({52.25:.2f}%)  "
                        f"{c['blue']}tps: {round(3321.7 + step):,}  "
                        f"{c['cyan']}tflops: {152.61 + step % 3:,.2f}  "
                        f"{c['magenta']}mfu: {15.43 + step % 2:.2f}%{c['reset']}")


def torchtitan_resume() -> str:
    """Two launches of the current torchtitan appended to one file: the batch on its own
    ``Trainer is initialized with ...`` line; launch 1 logs steps 1, 10, ..., 50 and dies in
    step 57; launch 2 loads the step-40 checkpoint and logs 50, ..., 80 (its step 50 a little
    off the first one's: data order after resume)."""
    t = START
    lines: list[str] = []
    for launch, (first, last) in enumerate(((1, 57), (41, 80))):
        lines += [titan(t, "Starting job: Llama 3 debug training"),
                  titan(t, "Trainer is initialized with local batch size 2, global batch size "
                           "16, gradient accumulation steps 2, sequence length 4096, total "
                           "steps 80 (warmup 10).")]
        if launch:
            lines.append(titan(t, "Loading the checkpoint at step 40."))
            t += timedelta(seconds=2.31)
            lines.append(titan(t, "Finished loading the checkpoint in 2.31 seconds."))
        lines.append(titan(t, f"Training starts at step {first}."))
        for step in range(first, last + 1):
            t += timedelta(seconds=2.5)
            if step == 1 or step % 10 == 0:
                lines.append(titan_step(t, step, loss_at(step, 11.0, 2.5) + 0.01 * launch))
        if not launch:
            error = "CUDA error: an illegal memory access was encountered"
            lines += [titan(t, f"Training failed; {error}"), "Traceback (most recent call last):",
                      '  File "torchtitan/train.py", line 640, in train', f"RuntimeError: {error}"]
        t += timedelta(minutes=5)
    lines.append(titan(t, "Training completed"))
    return "\n".join(lines) + "\n"


# --- generic key=value, and a format only --pattern reads ---------------------------------

def generic_kv() -> str:
    """``key=value`` lines of a hand-written loop, with eval lines that carry no step."""
    lines = ["starting run kv-demo (seed 0)"]
    for step in range(20, 201, 20):
        lines.append(f"step={step} loss={loss_at(step):.4f} lr={3e-4 * min(1, step / 40):.2e} "
                     f"tokens={step * 32 * 512} grad_norm={0.9 + 1 / step:.3f}")
        if step % 100 == 0:
            lines.append(f"eval: val_loss={loss_at(step) + 0.1:.4f} val_ppl="
                         f"{math.exp(loss_at(step) + 0.1):.2f}")
    return "\n".join(lines) + "\n"


def generic_colon() -> str:
    """``key: value`` lines separated by `` | ``."""
    lines = []
    for step in range(1, 51):
        lines.append(f"Step: {step} | loss: {loss_at(step):.3f} | lr: {1e-3:.1e} | "
                     f"throughput: {1234.5 + step:,.1f} samples/s")
    return "\n".join(lines) + "\n"


def custom_pattern() -> str:
    """A format that needs ``--pattern``: step and values without keys' ``=`` or ``:``."""
    lines = []
    for step in range(5, 101, 5):
        lines.append(f"2024-03-01 09:{step // 60:02d}:{step % 60:02d} ep 1 it {step} "
                     f"train_loss {loss_at(step):.4f} acc {0.5 + step / 250:.3f}")
    return "\n".join(lines) + "\n"


# --- the seed-format trainer: a real PyTorch loop with a tqdm bar over micro-steps ---------

SEED_TRAINER = '''
import math, sys, time
import torch
from tqdm import tqdm

torch.manual_seed(0)
max_steps, accum, micro_batch, seq, log_every = int(sys.argv[1]), int(sys.argv[2]), 4, 32, 5
vocab, width, peak = 64, 32, 0.2e12  # peak: FLOP/s this CPU could do, for the mfu column
model = torch.nn.Sequential(torch.nn.Embedding(vocab, width), torch.nn.Linear(width, vocab))
params = sum(p.numel() for p in model.parameters())
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
data = torch.randint(0, vocab, (max_steps * accum * micro_batch * 2, seq + 1))
batches_per_epoch = data.shape[0] // micro_batch
bar = tqdm(total=max_steps * accum, desc="train")
step, start = 0, time.perf_counter()
for micro in range(max_steps * accum):
    batch = data[micro * micro_batch:(micro + 1) * micro_batch]
    logits = model(batch[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), batch[:, 1:].reshape(-1))
    (loss / accum).backward()
    bar.update(1)
    if (micro + 1) % accum == 0:
        opt.step(); opt.zero_grad(); step += 1
        if step % log_every == 0:
            took = time.perf_counter() - start; start = time.perf_counter()
            flops = 6 * params * micro_batch * accum * seq * log_every / took
            epoch = (micro + 1) / batches_per_epoch
            print(f"[step {step} epoch {epoch:.4f}] loss={loss.item():.2f} "
                  f"tflops={flops / 1e12:.4f} mfu={100 * flops / peak:.1f}", flush=True)
bar.close()
'''


def seed_trainer(python: str) -> str:
    """stdout and stderr of SEED_TRAINER (40 optimizer steps × accum 4 = 160 micro-steps)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([python, "-c", SEED_TRAINER, "40", "4"], env=env, check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return done.stdout.decode()


# --- transformers 4.x-style dicts, reformatted from a real 5.24 log ------------------------

def hf4x(source: Path) -> str:
    """The real 5.24 log with each printed dict replaced by the 4.x form of the same entry of
    trainer_state.json: numbers, ``loss`` rounded to 4 decimals and ``epoch`` to 2 (≤ 4.36)."""
    history = json.loads((source / "trainer_state.json").read_text())["log_history"]
    with (source / "train.log").open(encoding="utf-8", newline="") as handle:
        text = handle.read()
    dicts = re.findall(r"\{'[^{}]*\}", text)
    assert len(dicts) == len(history), (len(dicts), len(history))
    pieces = re.split(r"(\{'[^{}]*\})", text)
    out, index = [], 0
    for piece in pieces:
        if piece.startswith("{'"):
            printed = ast.literal_eval(piece)
            entry = history[index]
            index += 1
            new = {k: _4x(k, entry[k]) for k in printed}
            piece = repr(new)
        out.append(piece)
    return "".join(out)


def _4x(key: str, value: float) -> float:
    if key in ("loss", "eval_loss", "train_loss"):
        return round(value, 4)
    if key == "epoch":
        return round(value, 2)
    return value


def write(name: str, text: str) -> None:
    path = OUT / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")
    print(f"wrote {path.relative_to(ROOT)} ({len(text.splitlines())} lines)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="a Python with torch and tqdm")
    args = parser.parse_args()
    write("megatron_ramp/train.log", megatron_ramp())
    restart = megatron_restart()
    write("megatron_restart/train.log", restart)
    with (OUT / "megatron_restart" / "train.log").open("ab") as handle:
        handle.write(b"\x00\x00\xff\xfe garbage \x80\x81\n")
    write("nanogpt/train.log", nanogpt())
    write("torchtitan/train.log", torchtitan())
    write("torchtitan_resume/train.log", torchtitan_resume())
    write("kv/train.log", generic_kv())
    write("colon/train.log", generic_colon())
    write("pattern/train.log", custom_pattern())
    write("hf4x_attn/train.log", hf4x(ROOT / "sample_logs" / "attn"))
    write("seed_trainer/train.log", seed_trainer(args.python))
    print(textwrap.dedent("""
        done; tests/data/text/README.md says how each file was made"""))


if __name__ == "__main__":
    main()
