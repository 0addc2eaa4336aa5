"""Start-up time of each command against ``python -c pass``, in the same run.

    python benchmarks/startup.py [--rounds 9]

Each round launches ``python -c pass`` and then every command once (a fresh process each,
the order the same every round, so the baseline alternates with the commands); each line
prints the median wall time over the rounds (min–max), the median minus the baseline's, and
the same for CPU time (user + system of the child: steadier on a shared machine).
The commands: ``--help``, ``--version``, ``batch`` (the calculator), ``formats``,
``import runcompare`` and ``inspect`` of a small run (the bundled sample ``attn``, its
cache warm: reading, not importing, should dominate). Goal: ``--help`` and ``batch``
within 0.15 s of ``python -c pass``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "runcompare"]
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import runcompare": [sys.executable, "-c", "import runcompare"],
    "runcompare --help": [*CLI, "--help"],
    "runcompare --version": [*CLI, "--version"],
    "runcompare batch ...": [*CLI, "batch", "--per-device", "8", "--world-size", "256",
                             "--global-batch", "4096", "--seq-len", "1024"],
    "runcompare formats": [*CLI, "formats"],
    "runcompare inspect sample_logs/attn": [*CLI, "inspect", str(ROOT / "sample_logs" / "attn")],
}
GOALS = {"runcompare --help": 0.15, "runcompare batch ...": 0.15}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "XDG_CACHE_HOME": cache}
        subprocess.run(COMMANDS["runcompare inspect sample_logs/attn"], env=env, check=True,
                       capture_output=True)  # warm the cache: inspect then measures reading
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        cpu: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(options.rounds):
            for name, command in COMMANDS.items():
                wall, used = _clock(command, env)
                times[name].append(wall)
                cpu[name].append(used)
    base = statistics.median(times["python -c pass"])
    base_cpu = statistics.median(cpu["python -c pass"])
    print(f"median of {options.rounds} rounds (min–max); + is the median over python -c pass\n")
    print("| command | wall s | + wall | CPU s | + CPU | goal (wall) |")
    print("|---|---:|---:|---:|---:|---|")
    for name, values in times.items():
        extra = statistics.median(values) - base
        goal = GOALS.get(name)
        verdict = "" if goal is None else f"≤ +{goal} s {'ok' if extra <= goal else 'MISSED'}"
        used = statistics.median(cpu[name])
        print(f"| {name} | {statistics.median(values):.3f} ({min(values):.3f}–"
              f"{max(values):.3f}) | {extra:+.3f} | {used:.3f} | {used - base_cpu:+.3f} | "
              f"{verdict} |")


def _clock(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


if __name__ == "__main__":
    main()
