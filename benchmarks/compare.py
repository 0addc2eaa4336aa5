"""Time compare(): 20 runs × 100,000 points each aligned, smoothed and summarised.

    python benchmarks/compare.py [--runs 20] [--points 100000]

Goal (issue 6): under 2 s on the 2-core reference machine. The runs are synthetic loss curves
built straight into runcompare's data model (reading is benchmarked elsewhere).
"""

from __future__ import annotations

import argparse
import time

from synthetic import make_run

import runcompare as rc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--points", type=int, default=100_000)
    args = parser.parse_args()
    runs = [make_run(i, args.points) for i in range(args.runs)]
    start = time.perf_counter()
    result = rc.compare(runs, x="tokens", smooth="5%")
    seconds = time.perf_counter() - start
    print(f"{args.runs} runs × {args.points:,} points: aligned {result.aligned.height:,} rows, "
          f"smoothed and summarised in {seconds:.2f} s (goal < 2 s)")


if __name__ == "__main__":
    main()
