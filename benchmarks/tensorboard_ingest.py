"""Reading 1,000,000 TensorBoard scalars: runcompare (cold and cached) vs tbparse and
EventAccumulator.

    python benchmarks/tensorboard_ingest.py [--peer-python PY] [--data DIR] [--repeat 3]

Writes (once; kept in ``--data``) one event file of 10 tags × 100,000 steps with
``torch.utils.tensorboard.SummaryWriter``, then times each reader in a fresh process of its
own, the clock started after imports. runcompare's reader (``read_cached`` of the
TensorBoard source: every point with its leg, the facts and findings, as ``load`` gets
them) with an empty cache (cold: frame, check CRCs, decode, write the cache) and again with
that cache (cached); the same for all of ``runcompare.load(path, source="tensorboard")``
(which also resolves legs and puts every point on every axis); then
``tbparse.SummaryReader(path).scalars`` and ``EventAccumulator(path,
size_guidance={"scalars": 0})`` reloaded with every tag's scalars listed. The goals compare
the readers. Peers run with
``--peer-python`` (a Python with torch, tbparse and tensorboard); runcompare with this one.
Prints each time, points read, peak memory (max RSS of the process) and the ratios against
the goals (cold ≥ 20× tbparse and ≥ 12× EventAccumulator, cached ≥ 200× tbparse, < 400 MB).

Also the whole process, as a user meets it, start-up included: ``runcompare inspect DIR
--json --no-cache`` against ``python -c "from tbparse import SummaryReader;
SummaryReader(DIR).scalars"``, each timed from launch to exit (goal ≥ 25×). Every contender
runs once a round, in an order that turns every round (``--repeat`` rounds), so a busy
machine hurts all of them alike, each after the OS page cache is filled with the log and the
libraries (``benchmarks/oscache.py``); each figure is the median (min–max). Without torch
the event file is written by tensorboard's own ``EventFileWriter`` (the writer torch's
``SummaryWriter`` wraps), the same records.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oscache import fill  # noqa: E402

TAGS, STEPS = 10, 100_000
DEFAULT_PEER = "/work/genvenv/bin/python"

WRITE = """
import math, sys, time
try:
    from torch.utils.tensorboard import SummaryWriter
except ImportError:  # the writer SummaryWriter wraps, with the same Summary protos
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    class SummaryWriter:
        def __init__(self, logdir, max_queue, flush_secs):
            self.writer = EventFileWriter(logdir, max_queue, flush_secs)

        def add_scalar(self, tag, value, step):
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            self.writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))

        def close(self):
            self.writer.close()

writer = SummaryWriter(sys.argv[1], max_queue=100_000, flush_secs=3600)
tags = [f"train/metric_{i}" for i in range(int(sys.argv[2]))]
for step in range(int(sys.argv[3])):
    for i, tag in enumerate(tags):
        writer.add_scalar(tag, math.sin(step * 0.001 + i), step)
writer.close()
"""

#: Whole processes, start-up included: runcompare's command line and tbparse's shortest script.
WHOLE_TBPARSE = "import sys; from tbparse import SummaryReader; len(SummaryReader(sys.argv[1]).scalars)"

#: Each reader: imports, then the timed read that returns the number of points.
READERS = {
    "runcompare read": (
        ("from pathlib import Path\nfrom runcompare.cache import read_cached\n"
         "from runcompare.sources import REGISTRY"),
        "read_cached(REGISTRY['tensorboard'], Path(path)).points"),
    "runcompare.load": ("import runcompare",
                        "runcompare.load(path, source='tensorboard').scalars.height"),
    "tbparse": ("from tbparse import SummaryReader", "len(SummaryReader(path).scalars)"),
    "EventAccumulator": (
        "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator",
        ("(lambda ea: (ea.Reload(), sum(len(ea.Scalars(t)) for t in ea.Tags()['scalars']))[1])"
         "(EventAccumulator(path, size_guidance={'scalars': 0}))")),
}

TIMER = """
import json, resource, sys, time
path = sys.argv[1]
{imports}
start = time.perf_counter()
points = {read}
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"seconds": seconds, "points": points, "peak_mb": peak}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-python", default=DEFAULT_PEER if Path(DEFAULT_PEER).exists()
                        else sys.executable)
    parser.add_argument("--data", type=Path,
                        default=Path(tempfile.gettempdir()) / f"runcompare-bench-tb-{STEPS}x{TAGS}")
    parser.add_argument("--repeat", type=int, default=3, help="alternating rounds")
    options = parser.parse_args()
    path = _data(options.data, options.peer_python)
    contenders = ["runcompare read", "runcompare.load", "tbparse", "EventAccumulator",
                  "whole runcompare", "whole tbparse"]
    results: dict[str, list[dict]] = {}
    for i in range(options.repeat):  # the order turns every round: a busy machine hurts all
        for name in contenders[i % len(contenders):] + contenders[:i % len(contenders)]:
            for label, row in _contender(name, path, options.peer_python).items():
                results.setdefault(label, []).append(row)
    rows = {name: _median(runs) for name, runs in results.items()
            if not name.startswith("whole")}
    _report(rows, options.repeat)
    _whole(results)


def _contender(name: str, path: Path, peer: str) -> dict[str, dict]:
    """One contender's run(s): a runcompare reader cold and then cached (in one fresh cache),
    a peer once, or a whole process timed from launch to exit."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    fill(path)  # the log and the libraries in memory (oscache's docstring says why)
    if name == "whole runcompare":
        command = [sys.executable, "-m", "runcompare", "inspect", str(path), "--json",
                   "--no-cache"]
        return {name: {"seconds": _clock(command, env), "points": 0, "peak_mb": 0}}
    if name == "whole tbparse":
        return {name: {"seconds": _clock([peer, "-c", WHOLE_TBPARSE, str(path)], env),
                       "points": 0, "peak_mb": 0}}
    if name.startswith("runcompare"):
        with tempfile.TemporaryDirectory() as cache:
            return {f"{name} (cold)": _time(name, path, sys.executable, cache),
                    f"{name} (cached)": _time(name, path, sys.executable, cache)}
    return {name: _time(name, path, peer, None)}


def _whole(results: dict[str, list[dict]]) -> None:
    """Launch to exit: ``runcompare inspect DIR --json --no-cache`` against tbparse's
    shortest script, each once a round."""
    ours = [r["seconds"] for r in results["whole runcompare"]]
    theirs = [r["seconds"] for r in results["whole tbparse"]]
    ratio = statistics.median(theirs) / statistics.median(ours)
    print(f"\nwhole process, start-up included: runcompare inspect --json --no-cache "
          f"{_spread(ours)}, tbparse {_spread(theirs)}: {ratio:.1f}× (goal ≥ 25×) "
          f"{'ok' if ratio >= 25 else 'MISSED'}")


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


def _clock(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def _data(folder: Path, python: str) -> Path:
    done = folder / "complete"
    if not done.exists():
        print(f"writing {TAGS * STEPS:,} scalars to {folder} (once; about a minute)...",
              flush=True)
        subprocess.run([python, "-c", WRITE, str(folder), str(TAGS), str(STEPS)], check=True)
        done.write_text("ok")
    return folder


def _time(reader: str, path: Path, python: str, cache: str | None) -> dict:
    imports, read = READERS[reader]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    if cache is not None:
        env["XDG_CACHE_HOME"] = cache
    script = TIMER.format(imports=imports, read=read)
    out = subprocess.run([python, "-c", script, str(path)], check=True, capture_output=True,
                         text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median(results: list[dict]) -> dict:
    times = [r["seconds"] for r in results]
    return {"seconds": statistics.median(times), "min": min(times), "max": max(times),
            "points": results[0]["points"], "peak_mb": max(r["peak_mb"] for r in results)}


def _report(rows: dict[str, dict], repeat: int) -> None:
    tbparse = rows["tbparse"]["seconds"]
    print(f"\n{TAGS} tags × {STEPS:,} steps = {TAGS * STEPS:,} scalars (median (min–max) of "
          f"{repeat} alternating rounds; peak RSS is the whole process)\n")
    print("| reader | seconds | points | peak RSS (MB) | tbparse ÷ this |")
    print("|---|---:|---:|---:|---:|")
    for name, row in rows.items():
        print(f"| {name} | {row['seconds']:.3f} ({row['min']:.3f}–{row['max']:.3f}) | "
              f"{row['points']:,} | {row['peak_mb']:.0f} | {tbparse / row['seconds']:.1f}× |")
    cold, cached = rows["runcompare read (cold)"], rows["runcompare read (cached)"]
    accumulator = rows["EventAccumulator"]["seconds"]
    goals = [
        ("cold vs tbparse", tbparse / cold["seconds"], 20),
        ("cold vs EventAccumulator", accumulator / cold["seconds"], 12),
        ("cached vs tbparse", tbparse / cached["seconds"], 200),
    ]
    print()
    for label, ratio, goal in goals:
        print(f"{label}: {ratio:.1f}× (goal ≥ {goal}×) {'ok' if ratio >= goal else 'MISSED'}")
    peak = max(cold["peak_mb"], cached["peak_mb"])
    print(f"runcompare read peak memory: {peak:.0f} MB (goal < 400 MB) "
          f"{'ok' if peak < 400 else 'MISSED'}")


if __name__ == "__main__":
    main()
