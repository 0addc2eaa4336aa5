"""The terminal at sweep scale (issue 18, item 6): past four runs the hierarchy (and the
end-of-run totals, the diagnostics, and what differs) print runs as rows, findings are grouped by code with
counts, and no line is wider than the terminal. On the generated 200-run sweep
(tests/sweep.py: real trainer_state.json layout) and on real HF runs."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

import runcompare as rc
from runcompare.analysis import compare
from runcompare.report.terminal import print_comparison

from .conftest import DATA


def _printed(comparison, width: int, every: bool = False) -> str:
    console = Console(width=width, record=True, highlight=False, markup=False)
    print_comparison(comparison, console, every=every)
    return console.export_text()


def test_a_sweeps_tables_hold_its_best_ten_runs_and_say_so(sweep):
    text = _printed(sweep, 100)
    assert len(text.splitlines()) < 200  # 1,351 lines with every run
    assert ("The tables show the best 10 of 200 runs at the budget; -v, the report and --json "
            "have every run.") in " ".join(text.split())
    table = text[text.index("Batch hierarchy (10 runs)"):text.index("per-device batch =")]
    rows = re.findall(r"│ (lr_\d{3}) +│", table)
    assert rows == list(sweep.verdict.run_values)[:10]
    # the verdict in full still speaks of all 200
    assert "the best of 200 on eval/loss is lr_001" in " ".join(text.split())


@pytest.mark.parametrize("width", [60, 80, 100, 160])
def test_no_line_of_a_200_run_sweep_is_wider_than_the_terminal(sweep, width):
    text = _printed(sweep, width)
    assert max(len(line) for line in text.splitlines()) <= width


def test_past_four_runs_the_hierarchy_has_a_row_per_run(sweep):
    text = _printed(sweep, 100, every=True)
    table = text[text.index("Batch hierarchy (200 runs)"):]
    header = table.splitlines()[2]
    assert re.findall(r"\w[\w /.-]*\w|\w", header.replace("┃", "|"))[:5] == [
        "run", "micro", "accum", "world", "global"]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"│ (lr_\d{3}) +│ +(\d+) │", table)}
    assert len(rows) == 200
    assert rows["lr_000"] == "4" and rows["lr_001"] == "2"  # tests/sweep.py: 4 even, 2 odd


def test_a_sweeps_findings_are_one_line_per_code_with_counts(sweep):
    text = _printed(sweep, 100)
    mismatched = {f.run for f in sweep.finding_list if f.code == "batch-mismatch"}
    assert len(mismatched) == 200
    assert text.count("[batch-mismatch]") == 1
    finding = re.search(r"warning \[batch-mismatch\] .*?(?=\n(?:info|warning|error) \[|\Z)",
                        text, re.DOTALL).group(0)
    finding = " ".join(finding.split())  # the console wraps it at 100 columns
    assert "× 200 (200 runs)" in finding
    assert finding.endswith("runs: lr_000, lr_001, lr_002, lr_003, lr_004, lr_005 and 194 more")


def test_four_runs_keep_levels_down_and_findings_one_by_one():
    runs = rc.load_many([DATA / "hf_seeds" / f"lr3e-3_seed{i}" for i in (1, 2, 3)]
                        + [DATA / "hf_tokens"], settings=["seq_len=64"])
    text = _printed(compare(runs), 100)
    assert "│ micro-batch " in text and "Batch hierarchy (" not in text
    assert "× " not in "".join(line for line in text.splitlines() if line.startswith("warning"))


def test_what_differs_in_a_sweep_has_runs_down_and_the_keys_that_fit():
    """Nine real HF runs: the learning rate, optimizer and weight decay differ among them;
    at 100 columns the table shows what fits, the settings before the batch keys, and says
    how many keys are left for the report and --json."""
    runs = rc.load_many([DATA / "hf_seeds", DATA / "hf_tokens", DATA / "hf_v4_accum4",
                         DATA / "hf_wd0.1_adafactor"], settings=["seq_len=64"])
    comparison = compare(runs)
    text = _printed(comparison, 100)
    table = text[text.index("What differs"):text.index("eval/loss on")]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"│ (\S+) +│.*│\n", table)}
    assert set(rows) >= {r.name for r in runs}
    assert "0.001" in rows["lr1e-3_seed1"] and "0.003" in rows["lr3e-3_seed1"]
    shown = table.splitlines()[1].count("┳")  # the columns past "run"
    hidden = len(comparison.differs.keys) - shown
    assert hidden > 0 and f"{hidden} more keys than fit at this width" in table
    wide = _printed(comparison, 400)
    assert "more keys than fit" not in wide and re.search(r"┃ optim +┃", wide)


def test_a_sweeps_diagnostics_have_a_row_per_run_and_a_column_per_metric(sweep):
    """Past four runs a row per run (not per run and metric: 200 rows, not 1,000), each
    diagnostic that fits a column of its value at the common budget."""
    from runcompare.display import fmt

    text = _printed(sweep, 160, every=True)
    table = text[text.index("Schedules and diagnostics"):]
    table = table[:table.index("└")]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^│ (lr_\d{3}) +│(.*)│$", table, re.M)}
    assert len(rows) == 200
    summary = sweep.summary.filter(kind="diagnostic")
    metrics = summary.get_column("metric").unique(maintain_order=True).to_list()
    assert len(metrics) >= 4 and "train/grad_norm" in metrics
    for run in ("lr_000", "lr_001", "lr_199"):
        cells = [c.strip() for c in rows[run].split("│")]
        shown = summary.filter(run=run)
        expected = [fmt(shown.filter(metric=m).get_column("at_common_budget")[0])
                    for m in metrics]
        assert cells == expected[:len(cells)] and len(cells) >= 4
    assert "each at the common budget" in text


def _inspected(runs, width: int) -> str:
    from runcompare.analysis.differs import differences
    from runcompare.report.terminal import print_runs

    console = Console(width=width, record=True, highlight=False, markup=False)
    print_runs(runs, differences(runs), console)
    return console.export_text()


@pytest.mark.parametrize("width", [60, 100])
def test_inspect_of_a_sweep_is_an_overview_a_row_per_run(sweep, width):
    """``inspect sweep/`` past four runs: a row per run (what was read, its warnings), the
    hierarchy with runs as rows, findings grouped; not 200 runs in full (a hierarchy and a
    hyperparameter table each)."""
    runs = sweep.runs
    text = _inspected(runs, width)
    assert max(len(line) for line in text.splitlines()) <= width
    overview = text[text.index("200 runs"):text.index("Batch hierarchy (200 runs)")]
    rows = {m.group(1): m.group(2).split("│") for m in
            re.finditer(r"^│ (lr_\d{3}) +│(.*)│$", overview, re.M)}
    assert list(rows) == [run.name for run in runs]
    from runcompare.display import fmt

    for run in (runs[0], runs[1], runs[-1]):
        cells = [c.strip() for c in rows[run.name]]
        expected = [run.format, run.step_unit, fmt(run.scalars.height), fmt(len(run.metrics)),
                    fmt(sum(f.level != "info" for f in run.findings)), ", ".join(run.sources)]
        assert cells == expected[:len(cells)] and len(cells) >= (5 if width >= 100 else 1)
    assert text.count("[batch-mismatch]") == 1 and "× 200 (200 runs)" in " ".join(text.split())
    assert "Hyperparameters (" not in text and len(text.splitlines()) < 3 * len(runs)


def test_inspect_of_a_sweep_shows_what_differs_and_v_shows_every_run_in_full(cli):
    folders = [DATA / "hf_seeds", DATA / "hf_tokens", DATA / "hf_v4_accum4",
               DATA / "hf_wd0.1_adafactor"]
    runs = rc.load_many(folders)
    text = _inspected(runs, 100)
    table = text[text.index("What differs"):]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"│ (\S+) +│.*│\n", table)}
    assert "0.001" in rows["lr1e-3_seed1"] and "0.003" in rows["lr3e-3_seed1"]
    few = cli("inspect", DATA / "hf_seeds")
    assert few.exit_code == 0 and "6 runs" in few.stdout and "Hyperparameters (" not in few.stdout
    full = cli("inspect", DATA / "hf_seeds", "-v")
    assert full.stdout.count("Hyperparameters (") == 6 and "6 runs" not in full.stdout
    four = cli("inspect", DATA / "hf_seeds" / "lr1e-3_seed1")
    assert four.stdout.count("Hyperparameters (") == 1
