"""Benchmark: read a 2,000,000-line Megatron-LM log, a 1 GB HF Trainer stdout and 5,000 two-line logs.

Both files are written once into a cache folder (later runs reuse them) in the exact print
formats of the writers (Megatron-LM's ``training_log``; transformers 5.x's dicts between
tqdm ``\\r`` redraws, byte for byte as in ``sample_logs/attn/train.log``), then each is read
``--repeat`` times by its source and the best time is reported, with the peak resident memory
of a fresh process (``--memory``), to show that it depends on the points kept, not on the
file size::

    /work/devvenv/bin/python benchmarks/text_ingest.py
    /work/devvenv/bin/python benchmarks/text_ingest.py --lines 200000 --gigabytes 0.1

"Lines" are newline-separated lines; an HF stdout file also holds tqdm redraws separated by
``\\r``, counted as "records" (what a terminal shows one after another). With
``RUNCOMPARE_PURE=1`` the native line scanner is off: the speed of an install without a C
compiler.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEGATRON = (" [2024-03-01 {h:02d}:{m:02d}:{s:02d}] iteration {it:8d}/{total:8d} | consumed samples: "
            "{consumed:12d} | elapsed time per iteration (ms): {ms:.1f} | throughput per GPU "
            "(TFLOP/s/GPU): {tflops:.1f} | learning rate: {lr:.6E} | global batch size: {gb:5d} | "
            "lm loss: {loss:.6E} | loss scale: {scale:.1f} | grad norm: {gn:.3f} | number of "
            "skipped iterations: {skip:3d} | number of nan iterations: {nan:3d} |\n")
BAR = "\r{pct:3d}%|{bar}| {n}/{total} [00:{el:02d}<00:{rem:02d}, {rate:5.2f}it/s]"
BLOCKS = " ▏▎▍▌▋▊▉█"


def write_megatron(path: Path, lines: int) -> None:
    """``lines`` training lines, one per iteration, global batch 512 (no validation lines)."""
    with path.open("w") as out:
        batch = []
        for it in range(1, lines + 1):
            t = it % 86400
            batch.append(MEGATRON.format(
                h=t // 3600 % 24, m=t // 60 % 60, s=t % 60, it=it, total=lines, consumed=it * 512,
                ms=812.3 + it % 7, tflops=180.2, lr=1.5e-4, gb=512, loss=2 + 8 * math.exp(-it / 1e5),
                scale=1.0, gn=0.8 + 1 / it, skip=0, nan=0))
            if len(batch) == 10_000:
                out.write("".join(batch))
                batch.clear()
        out.write("".join(batch))


def _bar(n: int, total: int) -> str:
    frac = n / total
    full, part = divmod(int(frac * 100), 10)
    bar = "█" * full + (BLOCKS[part * 8 // 10] if full < 10 else "")
    return BAR.format(pct=int(frac * 100), bar=bar.ljust(10), n=n, total=total, el=n % 60,
                      rem=(total - n) % 60, rate=10 + n % 5)


def write_hf(path: Path, size: int, logging_steps: int = 10) -> int:
    """A transformers 5.x stdout: a tqdm redraw per step, a dict every ``logging_steps``."""
    header = Path(__file__).resolve().parent.parent / "sample_logs" / "attn" / "train.log"
    head = header.read_text().split("  0%|")[0]
    per_step = len(_bar(5, 10**7).encode()) + 110 // logging_steps + 10
    total = size // per_step // logging_steps * logging_steps
    with path.open("w", newline="") as out:
        out.write(head.replace("Total optimization steps = 100",
                               f"Total optimization steps = {total}"))
        chunk = []
        for step in range(1, total + 1):
            chunk.append(_bar(step, total))
            if step % logging_steps == 0:
                chunk.append("\r" + " " * 47 + "\r" + str({
                    "loss": f"{2 + 3 * math.exp(-step / 1e5):.4g}", "grad_norm": "0.5391",
                    "learning_rate": f"{3e-3 * (1 - step / total):.4g}",
                    "epoch": f"{step / 6400:.4g}"}) + "\n")
            if len(chunk) >= 20_000:
                out.write("".join(chunk))
                chunk.clear()
        out.write("".join(chunk) + "\n")
    return total


def make(folder: Path, lines: int, gigabytes: float) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    megatron = folder / f"megatron-{lines}.log"
    hf = folder / f"hf-{gigabytes:g}GB.log"
    for path, write in ((megatron, lambda p: write_megatron(p, lines)),
                        (hf, lambda p: write_hf(p, int(gigabytes * 1e9)))):
        if not path.exists():
            started = time.perf_counter()
            partial = path.with_suffix(".partial")
            write(partial)
            partial.rename(path)
            print(f"wrote {path} ({path.stat().st_size / 1e6:,.0f} MB) in "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
    return megatron, hf


def measure(source: str, path: Path, repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` read time and CPU time in this process."""
    from runcompare.sources import REGISTRY

    module = REGISTRY[source]
    best = (math.inf, 0.0)
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        raw = module.read_at(path)
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    data = path.read_bytes()
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    records = lines + data.count(b"\r")
    return {"seconds": best[0], "cpu_seconds": best[1], "lines": lines, "records": records,
            "bytes": len(data), "points": raw.points}


def peak_memory(source: str, path: Path) -> float:
    """Growth of the peak RSS (VmHWM, MB) of a fresh Python while it reads ``path`` once
    (ru_maxrss would carry this process's peak over into the child)."""
    code = ("import re; from pathlib import Path; from runcompare.sources import REGISTRY\n"
            "hwm = lambda: int(re.search(r'VmHWM:\\s+(\\d+)', "
            "open('/proc/self/status').read()).group(1)) / 1024\n"
            f"base = hwm(); raw = REGISTRY[{source!r}].read_at(Path({str(path)!r}))\n"
            "print(base, hwm())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    base, peak = out.stdout.split()
    return float(peak) - float(base)


def small_logs(folder: Path, count: int, repeat: int) -> dict[str, float]:
    """A folder of ``count`` two-line ``key=value`` logs (the issue's case: many tiny logs of one
    run), read whole by ``runcompare inspect DIR --json --no-cache`` in a fresh process (what
    the CLI pays, start-up included) and by ``load`` in this one; best of ``repeat`` each."""
    import runcompare as rc

    folder.mkdir(parents=True, exist_ok=True)
    if len(list(folder.glob("*.log"))) != count:
        for i in range(count):
            (folder / f"w{i:05d}.log").write_text(f"step=1 loss={2 + i / 1e5:.5f}\n"
                                                 f"step=2 loss={1.9 + i / 1e5:.5f}\n")
    cli = [sys.executable, "-m", "runcompare", "inspect", str(folder), "--json", "--no-cache"]
    fresh, inside = math.inf, math.inf
    for _ in range(repeat):  # alternated, so both see the same machine
        wall = time.perf_counter()
        subprocess.run(cli, capture_output=True, check=True)
        fresh = min(fresh, time.perf_counter() - wall)
        wall = time.perf_counter()
        rc.load(folder, cache=False)
        inside = min(inside, time.perf_counter() - wall)
    return {"logs": count, "fresh_process_seconds": fresh, "in_process_seconds": inside}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2_000_000, help="Megatron lines")
    parser.add_argument("--gigabytes", type=float, default=1.0, help="size of the HF stdout")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir())
                        / "runcompare-bench-text")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--only", choices=("megatron", "hf-stdout"), help="one file only")
    parser.add_argument("--small", type=int, default=5_000,
                        help="two-line logs in one folder (0: skip)")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    if args.small:
        small = small_logs(args.dir / f"small-{args.small}", args.small, args.repeat)
        results["small-logs"] = small
        print(f"{args.small:,} two-line logs in one folder: best "
              f"{small['fresh_process_seconds']:.2f} s in a fresh process (runcompare inspect "
              f"--json --no-cache), {small['in_process_seconds']:.2f} s in this one "
              f"(rc.load); goal < 3 s", flush=True)
    megatron, hf = make(args.dir, args.lines, args.gigabytes)
    for source, path in (("megatron", megatron), ("hf-stdout", hf)):
        if args.only and source != args.only:
            continue
        result = measure(source, path, args.repeat)
        if args.memory:
            result["peak_rss_mb"] = peak_memory(source, path)
        results[source] = result
        rss = f", peak RSS +{result['peak_rss_mb']:,.0f} MB" if args.memory else ""
        print(f"{source}: {path.name}: {result['bytes'] / 1e6:,.0f} MB, {result['lines']:,} "
              f"lines ({result['records']:,} records), {result['points']:,} points: best "
              f"{result['seconds']:.2f} s of {args.repeat} ({result['cpu_seconds']:.2f} s CPU) "
              f"-> {result['lines'] / result['seconds']:,.0f} lines/s, "
              f"{result['records'] / result['seconds']:,.0f} records/s{rss}", flush=True)
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
