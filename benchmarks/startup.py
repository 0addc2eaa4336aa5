"""Start-up time of each command against ``python -c pass``, in the same run.

    python benchmarks/startup.py [--rounds 9]

Each round launches ``python -c pass`` and then every command once (a fresh process each,
the order the same every round, so the baseline alternates with the commands); each line
prints the median wall time over the rounds (min–max) and the median minus the baseline's.
The commands: ``--help``, ``--version``, ``batch`` (the calculator), ``formats``,
``import runcompare`` and ``inspect`` of a small run (the bundled sample ``attn``, its
cache warm: reading, not importing, should dominate). Goal: ``--help`` and ``batch``
within 0.15 s of ``python -c pass``.
"""

from __future__ import annotations

import argparse
import os
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
        for _ in range(options.rounds):
            for name, command in COMMANDS.items():
                times[name].append(_clock(command, env))
    base = statistics.median(times["python -c pass"])
    print(f"median of {options.rounds} rounds (min–max); + is the median over python -c pass\n")
    print("| command | seconds | + over python -c pass | goal |")
    print("|---|---:|---:|---|")
    for name, values in times.items():
        extra = statistics.median(values) - base
        goal = GOALS.get(name)
        verdict = "" if goal is None else f"≤ +{goal} s {'ok' if extra <= goal else 'MISSED'}"
        print(f"| {name} | {statistics.median(values):.3f} ({min(values):.3f}–"
              f"{max(values):.3f}) | {extra:+.3f} | {verdict} |")


def _clock(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
