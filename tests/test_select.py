"""Choosing what to compare (issue 18, item 4): --runs REGEX, --metric globs, --top N, on
the real seed runs of tests/data/hf_seeds (six runs of 40 steps, two learning rates)."""

from __future__ import annotations

import json

import pytest

import runcompare as rc
from runcompare.analysis import compare
from runcompare.analysis.compare import choose

from .conftest import DATA

SEEDS = DATA / "hf_seeds"


def _names(data) -> list[str]:
    return [run["name"] for run in data["runs"]]


def _final_eval_loss(run) -> float:
    history = json.loads((run / "trainer_state.json").read_text())["log_history"]
    return [entry["eval_loss"] for entry in history if "eval_loss" in entry][-1]


def test_runs_regex_keeps_the_runs_it_finds_and_is_repeatable(cli):
    assert _names(cli.json(SEEDS, "--runs", "1e-3", "--no-report")) == [
        "lr1e-3_seed1", "lr1e-3_seed2", "lr1e-3_seed3"]
    assert _names(cli.json(SEEDS, "--runs", "seed1$", "--runs", "^lr3e-3_seed2",
                           "--no-report")) == ["lr1e-3_seed1", "lr3e-3_seed1", "lr3e-3_seed2"]


@pytest.mark.parametrize(("pattern", "message"), [
    ("zzz", "error: --runs 'zzz' matches no run name; the runs are lr1e-3_seed1, "),
    ("(", "error: --runs '(' is not a regular expression (missing ), unterminated subpattern"),
])
def test_a_runs_pattern_that_finds_nothing_or_is_no_regex_is_a_usage_error(cli, pattern,
                                                                            message):
    result = cli(SEEDS, "--runs", pattern, "--no-report")
    assert result.exit_code == 2 and result.stderr.startswith(message)
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_metric_glob_compares_the_metrics_it_matches_led_by_the_loss(cli):
    data = cli.json(SEEDS, "--metric", "train/*", "--no-report")
    raced = sorted({row["metric"] for row in data["summary"]})
    assert raced == ["train/grad_norm", "train/learning_rate", "train/loss"]
    assert data["verdict"]["metric"] == "train/loss"  # not train/grad_norm, first by name
    kinds = {row["metric"]: row["kind"] for row in compare(
        rc.load_many([SEEDS]), metrics=["train/*"]).summary.iter_rows(named=True)}
    assert kinds["train/learning_rate"] == "diagnostic"  # a glob names no metric a race


def test_a_glob_beside_a_name_and_a_glob_that_matches_nothing(cli):
    data = cli.json(SEEDS, "--metric", "eval/loss", "--metric", "train/?oss", "--no-report")
    assert data["verdict"]["metric"] == "eval/loss"
    assert sorted({row["metric"] for row in data["summary"]}) == ["eval/loss", "train/loss"]
    result = cli(SEEDS, "--metric", "test/*", "--no-report")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: --metric 'test/*' matches no metric; available: "
                                    "eval/loss, eval/runtime")


def test_top_keeps_the_best_runs_at_the_common_budget(cli):
    """Every run ends at 40 steps × 1,024 tokens, so the common budget is the end and the best
    runs are those with the lowest last eval loss in their trainer_state.json."""
    paths = sorted(SEEDS.glob("lr*"))
    best = sorted(paths, key=_final_eval_loss)[:2]
    data = cli.json(SEEDS, "--top", "2", "--no-report")
    assert sorted(_names(data)) == sorted(p.name for p in best)
    assert data["verdict"]["budget"] == 40 * 1024
    note = next(f for f in data["findings"] if f["code"] == "top-runs")
    assert note["level"] == "info" and "the best 2 of 6 runs by eval/loss at tokens 40,960" \
        in note["message"] and "4 left out" in note["message"]


def test_top_adds_the_runs_named_with_runs(cli):
    worst = max(sorted(SEEDS.glob("lr*")), key=_final_eval_loss).name
    data = cli.json(SEEDS, "--top", "1", "--runs", f"^{worst}$", "--no-report")
    assert len(data["runs"]) == 2 and worst in _names(data)
    note = next(f for f in data["findings"] if f["code"] == "top-runs")
    assert f"plus {worst} named by --runs; 4 left out" in note["message"]


def test_top_of_all_runs_or_more_is_the_plain_comparison():
    runs = rc.load_many([SEEDS])
    chosen = choose(runs, top=10)
    assert [r.name for r in chosen.runs] == [r.name for r in runs]
    assert not [f for f in chosen.finding_list if f.code == "top-runs"]


@pytest.mark.parametrize("options", [{}, {"x": "step", "metrics": ["eval/*"]},
                                     {"x": "tokens", "smooth": "5%", "target": 3.0}])
def test_top_ranks_by_the_verdict_the_comparison_gives(options):
    """``--top`` ranks by the verdict alone (``rank``), without aligning every run's curves:
    the same verdict, to the last number, as the whole comparison's."""
    from runcompare.analysis.compare import rank

    runs = rc.load_many([SEEDS])
    alone, whole = rank(runs, **options), rc.compare(runs, **options).verdict
    assert alone.to_dict() == whole.to_dict() and alone.run_values == whole.run_values
    assert len(alone.run_values) == 6


def test_top_zero_is_a_usage_error(cli):
    result = cli(SEEDS, "--top", "0", "--no-report")
    assert result.exit_code == 2 and result.stderr == "error: --top 0: give a number of runs ≥ 1\n"


def test_a_logged_name_holding_glob_characters_is_that_metric(cli, tmp_path):
    """A real trainer_state.json whose eval key is renamed to hold [ and * (hand-edited)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(SEEDS / "lr1e-3_seed1", run, ignore=shutil.ignore_patterns("runs"))
    state = json.loads((run / "trainer_state.json").read_text())
    for entry in state["log_history"]:
        if "eval_loss" in entry:
            entry["eval_loss[*]"] = entry.pop("eval_loss")
    (run / "trainer_state.json").write_text(json.dumps(state))
    shutil.rmtree(run / "checkpoint-40")
    data = cli.json(run, "--metric", "eval/loss[*]", "--no-report",
                    "--source", "hf-trainer")
    assert data["verdict"]["metric"] == "eval/loss[*]"
