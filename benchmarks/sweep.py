"""Reading a sweep: N runs of 5 metrics × 2,000 steps, as HF Trainer output dirs and as
TensorBoard runs (``benchmarks/sweep_data.py`` writes them once).

    python benchmarks/sweep.py [--runs 400] [--rounds 3] [--data DIR] [--skip-tbparse]
                               [--formats hf tensorboard]

Contenders, each in a fresh process of its own, alternated over ``--rounds`` rounds (the
order turns every round, so a busy machine hurts all of them alike):

- ``runcompare cold``: ``runcompare.load_many(folder, workers=None)`` (every point of every
  run on every axis, worker processes, one per core) with an empty cache: what the first
  ``runcompare sweep/`` pays for reading;
- ``runcompare warm``: the same with the cache the cold read wrote;
- ``json.load + pandas`` (HF): a plain loop, ``pandas.DataFrame(json.load(f)["log_history"])``
  per run, and nothing else;
- ``tbparse`` (TensorBoard): ``tbparse.SummaryReader(run).scalars`` per run (``pip install
  tbparse``; not a runcompare dependency);
- ``bound: parse + frame`` (HF): not a contender but a bound, in one process: runcompare's
  native parser and the 12-column frame of every point, and nothing else (see
  ``READERS``). Against the plain loop, runcompare cold cannot do better than the cores
  times this ratio.

Before each timing the OS page cache is filled with the logs, the cache and the
libraries (``benchmarks/oscache.py``). For each it prints the median (min–max) of the read, timed inside the process after its
imports, and of the whole process (interpreter start and imports too: what a command pays),
and the ratios of the medians against runcompare. Goals (issue 18): 400 runs cold under 4 s
on 2 cores for both formats, ≥ 4× faster than the plain loop on trainer_state.json and ≥ 25×
faster than tbparse on TensorBoard, warm under 1.5 s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oscache import fill
from sweep_data import make

from runcompare.parallel import cores

TIMER = """
import json, sys, time
from pathlib import Path
{imports}
def main():
    folder = Path(sys.argv[1])
    start = time.perf_counter()
    points = {read}
    print(json.dumps({{"seconds": time.perf_counter() - start, "points": points}}))
if __name__ == "__main__":
    main()
"""

READERS = {
    "runcompare cold": ("import runcompare\nimport runcompare.load  # what load_many imports",
                        ("sum(r.scalars.height for r in runcompare.load_many([folder], "
                        "workers=None))")),
    "json.load + pandas": (
        "import pandas",
        ("sum(len(pandas.DataFrame(json.load(open(p / 'trainer_state.json'))['log_history']))"
        " for p in sorted(folder.iterdir()) if p.is_dir())")),
    "tbparse": ("from tbparse import SummaryReader",
                ("sum(len(SummaryReader(str(p)).scalars) for p in sorted(folder.iterdir()) "
                "if p.is_dir())")),
}
READERS["runcompare warm"] = READERS["runcompare cold"]
#: A bound, not a contender: the least that any reader giving every point on its 12 columns
#: does, with runcompare's own native parser and nothing else (no detection, facts, batch,
#: cache or worker processes): read, parse, order by metric, make the frame. What runcompare
#: cold can at best be against the plain loop on this machine is 2 cores × this ratio, less
#: the ~0.45 s a worker process takes to start.
READERS["bound: parse + frame"] = ("""
import numpy as np, polars as pl
from runcompare.sources.codecs import _jsoncols
def bound(folder):
    points = 0
    for p in sorted(folder.iterdir()):
        if not p.is_dir():
            continue
        found = _jsoncols.columns((p / "trainer_state.json").read_bytes(), b"log_history",
                                  b"step", ())
        key, value, step = (np.frombuffer(found[i], t) for i, t in
                            ((3, np.int32), (4, np.float64), (5, np.int64)))
        order = np.argsort(key.astype(np.uint16), kind="stable")
        value, step = value[order], step[order]
        columns = [pl.Series("run", [p.name]).new_from_index(0, key.size),
                   pl.Series("metric", found[2]).gather(key[order]), pl.Series("value", value)]
        columns += [pl.Series(f"step{i}", step * i) for i in range(1, 5)]
        columns += [pl.Series(f"x{i}", value * i) for i in range(1, 6)]
        points += pl.DataFrame(columns).height
    return points
""", "bound(folder)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path,
                        default=Path(tempfile.gettempdir()) / "runcompare-bench-sweep")
    parser.add_argument("--skip-tbparse", action="store_true")
    parser.add_argument("--formats", nargs="+", choices=("hf", "tensorboard"),
                        default=["hf", "tensorboard"])
    args = parser.parse_args()
    for fmt, peer in (("hf", "json.load + pandas"), ("tensorboard", "tbparse")):
        if fmt not in args.formats:
            continue
        folder = make(args.data, args.runs, fmt).pop().parent
        contenders = ["runcompare cold", "runcompare warm"]
        if fmt == "hf":
            contenders.append("bound: parse + frame")
        if not (peer == "tbparse" and (args.skip_tbparse or not _has("tbparse"))):
            contenders.append(peer)
        results = _rounds(folder, contenders, args.rounds)
        _report(f"{args.runs} {fmt} runs of 5 metrics × 2,000 steps", results, peer)


def _has(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"],
                          check=False, capture_output=True).returncode == 0


def _rounds(folder: Path, contenders: list[str], rounds: int) -> dict[str, list[dict]]:
    results: dict[str, list[dict]] = {name: [] for name in contenders}
    for i in range(rounds):
        cache = Path(tempfile.mkdtemp(prefix="runcompare-bench-cache-"))
        order = contenders[i % len(contenders):] + contenders[:i % len(contenders)]
        if order.index("runcompare warm") < order.index("runcompare cold"):
            _time("runcompare cold", folder, cache)  # the warm one needs a cache to read
        for name in order:
            if name == "runcompare cold":
                shutil.rmtree(cache / "runcompare", ignore_errors=True)
            results[name].append(_time(name, folder, cache))
        shutil.rmtree(cache, ignore_errors=True)
    return results


def _time(name: str, folder: Path, cache: Path) -> dict:
    fill(folder, cache)  # logs and libraries in memory (oscache's docstring says why)
    imports, read = READERS[name]
    env = {"XDG_CACHE_HOME": str(cache), "PATH": "/usr/bin:/bin"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", TIMER.format(imports=imports, read=read),
                           str(folder)], check=False, capture_output=True, text=True,
                          env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name} failed: {done.stderr.strip().splitlines()[-1]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {**result, "process": wall}


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


def _report(title: str, results: dict[str, list[dict]], peer: str) -> None:
    print(f"\n{title}, {len(next(iter(results.values())))} alternating rounds")
    print(f"  {'':20} {'read, median (min–max)':>28} {'whole process':>28}  rows read")
    for name, rows in results.items():
        print(f"  {name:20} {_spread([r['seconds'] for r in rows]):>28} "
              f"{_spread([r['process'] for r in rows]):>28}  {rows[0]['points']:,}")
    cold = statistics.median(r["seconds"] for r in results["runcompare cold"])
    cold_process = statistics.median(r["process"] for r in results["runcompare cold"])
    if peer in results:
        other = statistics.median(r["seconds"] for r in results[peer])
        other_process = statistics.median(r["process"] for r in results[peer])
        goal = 4 if peer.startswith("json") else 25
        print(f"  runcompare cold is {other / cold:.2f}× faster than {peer} on the read "
              f"({other_process / cold_process:.2f}× on the whole process); goal ≥ {goal}×")
        if "bound: parse + frame" in results:
            bound = statistics.median(r["seconds"] for r in results["bound: parse + frame"])
            print(f"  the bound (one process) is {other / bound:.2f}× faster than {peer}; on "
                  f"{cores()} cores at most {cores() * other / bound:.2f}×, less the worker's "
                  "start")
    warm = statistics.median(r["seconds"] for r in results["runcompare warm"])
    print(f"  cold {cold:.2f} s (goal < 4 s), warm {warm:.2f} s (goal < 1.5 s)")


if __name__ == "__main__":
    main()
