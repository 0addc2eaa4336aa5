"""Make tests/data/wandb_export/: W&B history as users export it, from real offline runs.

Run from the repo root with a Python that has wandb and pandas (the `samples` extra)::

    /work/genvenv/bin/python scripts/make_wandb_exports.py

Both export paths need a W&B server, and there is none here, so the script rebuilds what the
server would hand out from the real offline runs in ``sample_logs/`` and ``tests/data/wandb/``
(history records decoded with wandb's own protobuf classes, one row per record: key → the
JSON value, which is what the run's history rows hold). Then:

``api/``  what users write after the public API (``wandb.Api().run(path).history()``): the
          rows become a DataFrame with ``pandas.DataFrame.from_records``, exactly as
          ``wandb.apis.public.Run.history`` builds it, written with pandas' own writers as the
          W&B docs show: ``to_csv(path)`` (index included), ``to_json(path, orient="records",
          lines=True)`` and ``to_parquet(path)``. Files: ``mamba.{csv,jsonl,parquet}`` (HF
          Trainer run, ``train/global_step`` declared) and ``plain.csv`` (a ``wandb.log`` loop
          with no step metric).
``ui/``   the CSVs the W&B web app's "Export panel data" writes for line plots of the runs
          ``mamba`` and ``attn``: ``by_step/train_loss.csv`` (x-axis ``Step``, W&B's
          ``_step``), ``by_global_step/train_loss.csv`` and ``by_global_step/learning_rate.csv``
          (the panels' custom x-axis ``train/global_step``). Each has the x-axis column, then
          per run ``<run> - <metric>`` and its ``__MIN``/``__MAX`` columns, every header and value
          quoted, an empty cell where a run has no point at that x. The layout follows exports
          published with public projects; the values are the runs' own, unsampled (the
          panel draws every point of runs this short, so min = max = value).
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from make_wandb_logs import records

OUT = REPO / "tests" / "data" / "wandb_export"
RUNS = {"mamba": REPO / "sample_logs" / "mamba" / "wandb",
        "attn": REPO / "sample_logs" / "attn" / "wandb",
        "plain": REPO / "tests" / "data" / "wandb" / "project" / "wandb"}
METRIC = "train/loss"


def run_file(folder: Path, name: str) -> Path:
    """The .wandb file of the run with display name ``name`` under a wandb/ folder."""
    for file in sorted(folder.glob("*run-*/*.wandb")):
        if "latest-run" in file.parts:
            continue
        for record in records(file):
            if record.WhichOneof("record_type") == "run":
                if record.run.display_name == name:
                    return file
                break
    raise SystemExit(f"{folder}: no run named {name!r}")


def history_rows(file: Path) -> list[dict]:
    """One dict per history record: each item's key (nested keys joined with "/") → value."""
    rows = []
    for record in records(file):
        if record.WhichOneof("record_type") != "history":
            continue
        row = {}
        for item in record.history.item:
            key = "/".join(item.nested_key) if item.nested_key else item.key
            row[key] = json.loads(item.value_json)
        rows.append(row)
    return rows


def js_number(value: float) -> str:
    """A number as JavaScript's ``String(x)`` prints it (the web app's CSV)."""
    if float(value).is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(float(value))
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{'+' if int(exponent) > 0 else '-'}{abs(int(exponent))}"
    return text


def ui_csv(path: Path, runs: dict[str, list[dict]], x_axis: str, metric: str) -> None:
    column = "Step" if x_axis == "_step" else x_axis
    per_run = {name: {row[x_axis]: row[metric] for row in rows if metric in row and x_axis in row}
               for name, rows in runs.items()}
    xs = sorted({x for points in per_run.values() for x in points})
    header = [column] + [f"{name} - {metric}{suffix}" for name in runs
                         for suffix in ("", "__MIN", "__MAX")]
    with path.open("w", newline="") as out:
        writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(header)
        for x in xs:
            cells = [js_number(x)]
            for points in per_run.values():
                cells += [js_number(points[x])] * 3 if x in points else ["", "", ""]
            writer.writerow(cells)


def main() -> None:
    for folder in ("api", "ui"):  # README.md stays
        shutil.rmtree(OUT / folder, ignore_errors=True)
        (OUT / folder).mkdir(parents=True)
    rows = {name: history_rows(run_file(folder, name)) for name, folder in RUNS.items()}
    mamba = pd.DataFrame.from_records(rows["mamba"])  # as wandb's Run.history() builds it
    mamba.to_csv(OUT / "api" / "mamba.csv")
    mamba.to_json(OUT / "api" / "mamba.jsonl", orient="records", lines=True)
    mamba.to_parquet(OUT / "api" / "mamba.parquet")
    pd.DataFrame.from_records(rows["plain"]).to_csv(OUT / "api" / "plain.csv")
    panel = {name: rows[name] for name in ("mamba", "attn")}
    for folder, x_axis in (("by_step", "_step"), ("by_global_step", "train/global_step")):
        (OUT / "ui" / folder).mkdir()
        ui_csv(OUT / "ui" / folder / "train_loss.csv", panel, x_axis, "train/loss")
    ui_csv(OUT / "ui" / "by_global_step" / "learning_rate.csv", panel, "train/global_step",
           "train/learning_rate")
    for path in sorted(OUT.rglob("*.*")):
        print(f"{path.relative_to(REPO)}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
