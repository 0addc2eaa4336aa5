"""Reading a sweep: N runs of 5 metrics × 2,000 steps, as HF Trainer output dirs and as
TensorBoard runs (``benchmarks/sweep_data.py`` writes them once).

    python benchmarks/sweep.py [--runs 400 [1000 ...]] [--rounds 3] [--data DIR]
                               [--skip-tbparse] [--formats hf tensorboard]

Contenders:

- ``runcompare cold``: ``runcompare.load_many(folder, workers=None)`` (every point of every
  run on every axis, worker processes, one per core) with an empty cache: what the first
  ``runcompare sweep/`` pays for reading;
- ``runcompare warm``: the same with the cache the cold read wrote;
- ``json.load + pandas`` (HF): a plain loop that builds the same long table: per run,
  ``json.load`` of trainer_state.json, ``pandas.DataFrame(log_history)`` melted to one row
  per logged point (run, step, epoch, metric, value; the epoch a column, as runcompare keeps
  it an axis, and no row for a key an entry does not hold), so both sides give the same
  4,000,000 rows for 400 runs, and both keep every run's table until the end;
- ``tbparse`` (TensorBoard): ``tbparse.SummaryReader(run).scalars`` per run (its long table;
  ``pip install tbparse``; not a runcompare dependency);
- ``bound: parse + frame`` (HF): not a contender but a bound, in one process: runcompare's
  native parser and the 12-column frame of every point, and nothing else (see ``READERS``).
  Against the plain loop, runcompare cold cannot do better than the cores times this ratio.

Each contender is timed two ways, over ``--rounds`` alternating rounds (the order turns every
round, so a busy machine hurts all of them alike), and each line gives the median (min–max):

- **one process**: every contender in one Python process that has imported all of them,
  after one untimed round of each (imports done, lazily loaded modules in, runcompare's
  worker fork server started: runcompare reads twice before it, as its first read in a
  fresh process forks its worker from that process instead): the read alone, side by side;
- **whole process**: each contender in a fresh process of its own: the read timed inside it
  after its imports, and the whole process (interpreter start and imports too: what a
  command pays), with its parts: the imports, and the rest (the interpreter's start, and
  its exit, which tears down every module imported and hands back the memory left).

The ratios of the medians against runcompare cold are printed for both, and the
ratio within each round (the two timed side by side), median (min–max). Given several
``--runs``, the last lines compare the time per run (one process) across the sizes, for every
contender: a read that scales linearly has the same time per run at 1,000 runs as at 400; as
every contender keeps every run's table, the growth the plain loop and the bound show (more
memory touched) is the machine's, and runcompare's is set against theirs. Before each
timing the OS page cache is filled with the logs, the cache and the libraries
(``benchmarks/oscache.py``). Goals (issues 18 and 32): 400 runs cold under 4 s on 2 cores
for both formats, ≥ 4× faster than the plain loop on trainer_state.json and ≥ 25× faster than
tbparse on TensorBoard, warm under 1.5 s, 1,000 runs linear in the runs.
"""

from __future__ import annotations

import argparse
import json
import os
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
imported = time.perf_counter()
from pathlib import Path
{imports}
imported = time.perf_counter() - imported
def main():
    folder = Path(sys.argv[1])
    start = time.perf_counter()
    points = {read}
    print(json.dumps({{"seconds": time.perf_counter() - start, "points": points,
                      "imports": imported}}))
if __name__ == "__main__":
    main()
"""

#: name -> (imports, the definitions the read needs, the read: an expression of ``folder``
#: giving the number of rows made).
READERS = {
    "runcompare cold": ("import runcompare\nimport runcompare.load  # what load_many imports",
                        "",
                        ("sum(r.scalars.height for r in runcompare.load_many([folder], "
                         "workers=None))")),
    "json.load + pandas": ("import pandas", """
def plain(folder):
    tables = []  # kept, as runcompare keeps its runs
    for p in sorted(folder.iterdir()):
        if not p.is_dir():
            continue
        with open(p / "trainer_state.json") as f:
            history = json.load(f)["log_history"]
        wide = pandas.DataFrame(history)
        long = wide.melt(id_vars=[c for c in ("step", "epoch") if c in wide],
                         var_name="metric", value_name="value").dropna(subset=["value"])
        long.insert(0, "run", p.name)
        tables.append(long)
    return sum(len(table) for table in tables)
""", "plain(folder)"),
    "tbparse": ("from tbparse import SummaryReader", "",
                ("sum(len(SummaryReader(str(p)).scalars) for p in sorted(folder.iterdir()) "
                 "if p.is_dir())")),
}
READERS["runcompare warm"] = READERS["runcompare cold"]
#: A bound, not a contender: the least that any reader giving every point on its 12 columns
#: does, with runcompare's own native parser and nothing else (no detection, facts, batch,
#: cache or worker processes): read, parse, order by metric, make the frame. What runcompare
#: cold can at best be against the plain loop on this machine is 2 cores × this ratio, less
#: what its worker's start costs.
READERS["bound: parse + frame"] = ("""
import numpy as np, polars as pl
from runcompare.sources.codecs import _jsoncols""", """
def bound(folder):
    frames = []
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
        frames.append(pl.DataFrame(columns))
    return sum(frame.height for frame in frames)
""", "bound(folder)")

#: The one-process timer: every contender's imports and definitions, then alternating rounds.
ONE_PROCESS = """
import json, os, shutil, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, {here!r})
from oscache import fill
{imports}
{definitions}
READS = {{{reads}}}
def main():
    folder, names, rounds = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
    cache = Path(tempfile.mkdtemp(prefix="runcompare-bench-cache-"))
    os.environ["XDG_CACHE_HOME"] = str(cache)
    results = {{name: [] for name in names}}
    if "runcompare cold" in names:  # untimed: the first read forks its worker from this
        READS["runcompare cold"](folder)  # fresh process; later ones (polars' threads
        # running) come from the fork server, which the first timed round would start
    for i in range(rounds + 1):  # the first round is not timed
        order = names[i % len(names):] + names[:i % len(names)]
        if "runcompare warm" in order and order.index("runcompare warm") < order.index(
                "runcompare cold"):
            READS["runcompare cold"](folder)  # the warm one needs a cache to read
        for name in order:
            if name == "runcompare cold":
                shutil.rmtree(cache / "runcompare", ignore_errors=True)
            fill(folder, cache)
            start = time.perf_counter()
            points = READS[name](folder)
            seconds = time.perf_counter() - start
            if i:
                results[name].append({{"seconds": seconds, "points": points}})
    shutil.rmtree(cache, ignore_errors=True)
    print(json.dumps(results))
if __name__ == "__main__":
    main()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[400])
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
        per_run: dict[str, dict[int, float]] = {}
        for runs in args.runs:
            folder = make(args.data, runs, fmt).pop().parent
            contenders = ["runcompare cold", "runcompare warm"]
            if fmt == "hf":
                contenders.append("bound: parse + frame")
            if not (peer == "tbparse" and (args.skip_tbparse or not _has("tbparse"))):
                contenders.append(peer)
            together = _one_process(folder, contenders, args.rounds)
            apart = _rounds(folder, contenders, args.rounds)
            _report(f"{runs} {fmt} runs of 5 metrics × 2,000 steps", together, apart, peer)
            for name, rows in together.items():
                per_run.setdefault(name, {})[runs] = _median(rows, "seconds") / runs
        _scaling(fmt, per_run)


def _has(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"],
                          check=False, capture_output=True).returncode == 0


def _one_process(folder: Path, contenders: list[str], rounds: int) -> dict[str, list[dict]]:
    """Every contender timed in one process, alternating (see the module docstring)."""
    readers = {name: READERS[name] for name in contenders}
    imports = "\n".join(dict.fromkeys(imports for imports, _, _ in readers.values()))
    definitions = "\n".join(dict.fromkeys(defs for _, defs, _ in readers.values()))
    reads = ", ".join(f"{name!r}: lambda folder: {read}"
                      for name, (_, _, read) in readers.items())
    code = ONE_PROCESS.format(here=str(Path(__file__).resolve().parent), imports=imports,
                              definitions=definitions, reads=reads)
    with tempfile.TemporaryDirectory(prefix="runcompare-bench-") as home:
        done = subprocess.run([sys.executable, "-c", code, str(folder), json.dumps(contenders),
                               str(rounds)], check=False, capture_output=True, text=True,
                              env=_env(Path(home)))
    if done.returncode != 0:
        raise SystemExit(f"one process failed: {done.stderr.strip()[-2000:]}")
    results: dict[str, list[dict]] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def _rounds(folder: Path, contenders: list[str], rounds: int) -> dict[str, list[dict]]:
    """Each contender in a fresh process of its own, alternating."""
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


def _env(cache: Path) -> dict[str, str]:
    """The contenders' environment: the cache folder, and PYTHONPATH when set (to time
    another checkout of runcompare) and POLARS_MAX_THREADS, nothing else."""
    passed = {key: os.environ[key] for key in ("PYTHONPATH", "POLARS_MAX_THREADS")
              if key in os.environ}
    return {"XDG_CACHE_HOME": str(cache), "PATH": "/usr/bin:/bin", **passed}


def _time(name: str, folder: Path, cache: Path) -> dict:
    fill(folder, cache)  # logs and libraries in memory (oscache's docstring says why)
    imports, definitions, read = READERS[name]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", TIMER.format(
        imports=imports + "\n" + definitions, read=read), str(folder)],
        check=False, capture_output=True, text=True, env=_env(cache))
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name} failed: {done.stderr.strip().splitlines()[-1]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {**result, "process": wall}


def _paired(peer: list[dict], ours: list[dict], key: str) -> str:
    """The ratio of ``peer``'s time to ours in each round, median (min–max): the machine's
    speed drifts between rounds (a third, from one hour to the next) but hardly within one,
    where both were timed side by side."""
    ratios = [p[key] / o[key] for p, o in zip(peer, ours, strict=True)]
    return f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


def _report(title: str, together: dict[str, list[dict]], apart: dict[str, list[dict]],
            peer: str) -> None:
    print(f"\n{title}, {len(next(iter(apart.values())))} alternating rounds, median (min–max)")
    print(f"  {'':20} {'one process':>24} {'own process: read':>24} {'whole process':>24}"
          "  rows read")
    for name, rows in apart.items():
        print(f"  {name:20} {_spread([r['seconds'] for r in together[name]]):>24} "
              f"{_spread([r['seconds'] for r in rows]):>24} "
              f"{_spread([r['process'] for r in rows]):>24}  {rows[0]['points']:,}")
    cold = "runcompare cold"
    if peer in apart:
        goal = 4 if peer.startswith("json") else 25
        one = _median(together[peer], "seconds") / _median(together[cold], "seconds")
        read = _median(apart[peer], "seconds") / _median(apart[cold], "seconds")
        whole = _median(apart[peer], "process") / _median(apart[cold], "process")
        print(f"  runcompare cold is {one:.2f}× faster than {peer} in one process, {read:.2f}× "
              f"on the read in its own process, {whole:.2f}× as whole processes; goal ≥ {goal}×")
        print("  the same, round by round (each round's two timings against each other; "
              "median (min–max)): " + ", ".join(
                  f"{label} {_paired(rows[peer], rows[cold], key)}" for label, rows, key in (
                      ("one process", together, "seconds"), ("own process", apart, "seconds"),
                      ("whole", apart, "process"))))
        if "bound: parse + frame" in together:
            bound = _median(together[peer], "seconds") / _median(
                together["bound: parse + frame"], "seconds")
            alone = _median(apart[peer], "process") / _median(
                apart["bound: parse + frame"], "process")
            print(f"  the bound (one process) is {bound:.2f}× faster than {peer}; on "
                  f"{cores()} cores at most {cores() * bound:.2f}×, less the worker's start; "
                  f"as whole processes {alone:.2f}× (what one core reaches with nothing but "
                  "the parse and the frame)")
    print("  whole process in parts (medians): " + "; ".join(
        f"{name} {_median(rows, 'imports'):.2f} s imports, "
        f"{statistics.median(r['process'] - r['imports'] - r['seconds'] for r in rows):.2f}"
        " s start and exit" for name, rows in apart.items()))
    print(f"  cold {_median(together[cold], 'seconds'):.2f} s in one process, "
          f"{_median(apart[cold], 'process'):.2f} s as a process (goal < 4 s); warm "
          f"{_median(together['runcompare warm'], 'seconds'):.2f} s and "
          f"{_median(apart['runcompare warm'], 'process'):.2f} s (goal < 1.5 s)")


def _scaling(fmt: str, per_run: dict[str, dict[int, float]]) -> None:
    """Time per run (one process) at each size against the smallest, for runcompare cold and
    for the others beside it: what keeping every run's table costs as it grows (memory, the
    caches) shows in them all, so runcompare scales linearly when it grows as they do."""
    cold = per_run["runcompare cold"]
    if len(cold) < 2:
        return
    smallest = min(cold)
    print(f"\n{fmt}: time per run, one process (linear: the same at every size)")
    for name, times in per_run.items():
        growth = ", ".join(f"{runs:,} runs {seconds * 1e3:.2f} ms "
                           f"({seconds / times[smallest]:.2f}×)"
                           for runs, seconds in sorted(times.items()))
        print(f"  {name:20} {growth}")


if __name__ == "__main__":
    main()
