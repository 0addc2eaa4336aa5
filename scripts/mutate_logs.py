"""Read mutated copies of the real logs in tests/data and sample_logs, with the native
readers and without them: the two must give the same points, facts and findings, and
nothing but a RuncompareError may be raised (no traceback, no invented number).

Each round copies one real run, changes one to three of its files (a cut, flipped or
inserted bytes, a structural character changed, a line duplicated, swapped or cut short, a
digit run replaced by a number no log should hold) and reads it with
``runcompare.load_many`` twice, then compares the runs. A case that differs or raises is
kept under ``--keep`` with what differed. Deterministic for a seed::

    python scripts/mutate_logs.py [--start 0] [--rounds 2000] [--keep /tmp/mutated]

The bugs it found are the changelog's "found by reading mutated and edited copies"; each
has a test on an edited copy of the real log.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import sys
import tempfile
import traceback
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
#: A number in place of a digit: what no log should hold, and what a damaged one may.
ODD = [b"1e400", b"-1", b"NaN", b"99999999999999999999999", b"-0", b"Infinity", b"0", b"1.5",
       b'"x"', b"null", b"-9223372036854775809"]


def roots() -> list[Path]:
    """The real runs the rounds copy."""
    found = [ROOT / "sample_logs" / "mamba", ROOT / "sample_logs" / "attn"]
    for name in ("hf_global32", "hf_resumed", "hf_ddp", "hf_tokens", "hf_v4_accum4",
                 "lightning", "mlflow", "jsonl", "wandb", "wandb_export", "axolotl",
                 "smoothing"):
        found.append(DATA / name)
    found.append(DATA / "batch_sweep" / "b16")
    for folder in ("tensorboard", "text"):
        found += sorted(p for p in (DATA / folder).iterdir() if p.is_dir())
    return [p for p in found if p.exists()]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """``data`` changed one way."""
    if not data:
        return b"x"
    n, kind = len(data), rng.randrange(11)
    at = rng.randrange(n)
    if kind == 0:  # cut
        return data[:at]
    if kind in (1, 7):  # bytes set or bits flipped
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            k = rng.randrange(n)
            out[k] = rng.randrange(256) if kind == 1 else out[k] ^ 1 << rng.randrange(8)
        return bytes(out)
    if kind in (2, 6):  # random bytes or NULs inserted
        extra = os.urandom(rng.randint(1, 64)) if kind == 2 else b"\0" * rng.randint(1, 100)
        return data[:at] + extra + data[at:]
    if kind in (3, 4):  # a stretch doubled or dropped
        end = min(n, at + rng.randint(1, 4096))
        return data[:end] + data[at:end] + data[end:] if kind == 3 else data[:at] + data[end:]
    if kind == 5:  # a digit replaced by an odd number
        digits = [k for k in (rng.randrange(n) for _ in range(50)) if chr(data[k]).isdigit()]
        if digits:
            return data[:digits[0]] + rng.choice(ODD) + data[digits[0] + 1:]
        return data[:at]
    if kind == 8:  # a structural character changed
        out = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            out[rng.randrange(n)] = rng.choice(b"|:=,\t\n{}[]\" -.eE")
        return bytes(out)
    lines = data.split(b"\n")
    a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
    if kind == 9:  # lines swapped or duplicated
        if rng.random() < 0.5:
            lines[a], lines[b] = lines[b], lines[a]
        else:
            lines.insert(a, lines[b])
    else:  # a line cut short
        lines[a] = lines[a][:rng.randrange(len(lines[a]) + 1)]
    return b"\n".join(lines)


#: Whether each native reader was built, by module (taken at the first switch).
_BUILT: dict[Any, bool] = {}


def native(on: bool) -> None:
    """Every native reader on (as built) or off, as ``RUNCOMPARE_PURE=1`` turns them."""
    from runcompare.sources.codecs import protowire, tfrecord
    from runcompare.sources.formats import _hf_trainer_json
    from runcompare.sources.textlog import layout

    for module in (layout, protowire, tfrecord, _hf_trainer_json):
        built = _BUILT.setdefault(module, module.NATIVE)
        module.NATIVE = on and built


def reading(path: Path) -> tuple[Any, ...]:
    """What a user gets from ``path``: each run's points, facts and findings, or the error
    (the not-utf8 count differs by design: the scanner does not check skipped bytes)."""
    import runcompare as rc
    from runcompare.errors import RuncompareError

    try:
        runs = rc.load_many([path], cache=False)
    except RuncompareError as exc:
        return ("error", type(exc).__name__, str(exc))
    return ("ok", [(r.name, r.format, r.scalars.to_dicts(),
                    sorted((k, repr(f.value), f.source) for k, f in r.facts.items()),
                    [(f.level, f.code, f.message) for f in r.findings if f.code != "not-utf8"])
                   for r in runs])


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def one(seed: int, runs: list[Path], keep: Path) -> str | None:
    """A round: what went wrong, or None."""
    rng = random.Random(seed)
    root = rng.choice(runs)
    work = Path(tempfile.mkdtemp())
    copy = work / root.name
    shutil.copytree(root, copy)
    files = [f for f in copy.rglob("*") if f.is_file() and f.name != "README.md"]
    for _ in range(rng.choice([1, 1, 2, 3])):
        file = rng.choice(files)
        file.write_bytes(mutate(file.read_bytes(), rng))
    problem = None
    try:
        native(True)
        with_native = reading(copy)
        native(False)
        without = reading(copy)
        if not same(with_native, without):
            problem = f"the native and pure readers differ on a copy of {root}"
    except Exception:  # noqa: BLE001 - the point: anything but a RuncompareError
        problem = f"{root}: {traceback.format_exc(limit=8)}"
    finally:
        native(True)
    if problem:
        shutil.copytree(work, keep / str(seed), dirs_exist_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    return problem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", type=int, default=0, help="the first round's seed")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "mutated")
    args = parser.parse_args()
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()  # no cache: every round reads
    warnings.simplefilter("ignore")
    sys.path.insert(0, str(ROOT / "src"))
    runs, found = roots(), 0
    for seed in range(args.start, args.start + args.rounds):
        problem = one(seed, runs, args.keep)
        if problem:
            found += 1
            print(f"seed {seed}: {problem}", flush=True)
    print(f"{args.rounds} rounds, {found} kept under {args.keep}")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
