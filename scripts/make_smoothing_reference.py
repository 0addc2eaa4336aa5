"""Record TensorBoard's own smoothed numbers, for tests/test_smooth.py.

Takes the scalar chart's ``resmoothDataset`` method out of the frontend bundle that the
installed ``tensorboard`` package ships (webfiles.zip → index.js), runs it with Node.js on a
few series, and writes inputs and outputs to tests/data/smoothing/tensorboard_ema.json.

    python scripts/make_smoothing_reference.py     # needs tensorboard and node on PATH
"""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import zipfile
from pathlib import Path

import tensorboard

OUT = Path(__file__).resolve().parents[1] / "tests/data/smoothing/tensorboard_ema.json"


def tensorboard_method() -> str:
    bundle = Path(tensorboard.__file__).parent / "webfiles.zip"
    source = zipfile.ZipFile(bundle).read("index.js").decode("utf-8")
    match = re.search(r"resmoothDataset\((\w)\)\{(.*?)\}getDataset\(", source, re.DOTALL)
    if match is None:
        raise SystemExit(f"{bundle}: resmoothDataset not found in index.js")
    return f"function resmoothDataset({match.group(1)}){{{match.group(2)}}}"


def series() -> dict[str, list[float]]:
    rng = random.Random(0)
    walk, level = [], 5.0
    for _ in range(200):
        level += rng.gauss(-0.01, 0.1)
        walk.append(level)
    gappy = list(walk[:60])
    gappy[10], gappy[11], gappy[30] = math.nan, math.inf, -math.inf
    return {"random_walk": walk, "with_non_finite": gappy, "constant": [2.5] * 20,
            "single": [7.0], "two": [1.0, 3.0]}


DRIVER = """
%s
const NONFINITE = {"nan": NaN, "inf": Infinity, "-inf": -Infinity};
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = {};
for (const [name, ys] of Object.entries(input.series)) {
  out[name] = {};
  for (const w of input.weights) {
    const points = ys.map(y => ({y: typeof y === "string" ? NONFINITE[y] : y}));
    const chart = {smoothingWeight: w, yValueAccessor: d => d.y};
    resmoothDataset.call(chart, {data: () => points});
    out[name][w] = points.map(p => Number.isFinite(p.smoothed) ? p.smoothed : String(p.smoothed));
  }
}
process.stdout.write(JSON.stringify(out));
"""


def main() -> None:
    data = series()
    weights = [0.0, 0.6, 0.9, 0.99]
    # non-finite values travel as the strings "nan", "inf", "-inf" (JSON has no NaN)
    encoded = {k: [v if math.isfinite(v) else str(v) for v in vs] for k, vs in data.items()}
    script = DRIVER % tensorboard_method()
    result = subprocess.run(["node", "-e", script], check=True, capture_output=True, text=True,
                            input=json.dumps({"series": encoded, "weights": weights}))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"tensorboard": tensorboard.__version__, "weights": weights,
                               "inputs": encoded, "smoothed": json.loads(result.stdout)},
                              indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
