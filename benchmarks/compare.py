"""Time compare(): 20 runs × 100,000 points each smoothed and summarised, then aligned.

    python benchmarks/compare.py [--runs 20] [--points 100000]

Goal (issue 6): under 2 s on the 2-core reference machine. The runs are synthetic loss curves
built straight into runcompare's data model (reading is benchmarked elsewhere).
"""

from __future__ import annotations

import time

from synthetic import runs_from_arguments

import runcompare as rc


def main() -> None:
    args, runs = runs_from_arguments(__doc__.splitlines()[0])
    start = time.perf_counter()
    result = rc.compare(runs, x="tokens", smooth="5%")
    compared = time.perf_counter() - start
    rows = result.aligned.height  # aligned when first asked for: the report asks, not --json
    seconds = time.perf_counter() - start
    print(f"{args.runs} runs × {args.points:,} points: smoothed and summarised in "
          f"{compared:.2f} s (what the terminal and --json pay); with the curves aligned "
          f"({rows:,} rows, for the report) {seconds:.2f} s (goal < 2 s)")


if __name__ == "__main__":
    main()
