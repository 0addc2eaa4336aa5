"""Hyperparameters kept (issue 18, item 5): every configuration key a source holds is a fact
with its source; `inspect` lists them; compare shows what differs, in the terminal, the JSON
and the report. All on real logs (tests/data/README.md says how each was made)."""

from __future__ import annotations

import json
import re

import pytest

import runcompare as rc
from runcompare.analysis import compare
from runcompare.report.html import render_report

from .conftest import DATA

SEEDS = DATA / "hf_seeds"
LR3, LR1 = SEEDS / "lr3e-3_seed1", SEEDS / "lr1e-3_seed2"
OPTIM = DATA / "hf_wd0.1_adafactor"  # lr3e-3_seed1 but for weight decay and optimizer
ARGS = "tensorboard args/text_summary"


def test_inspect_json_lists_a_real_hf_runs_learning_rate_weight_decay_and_optimizer(cli):
    shown = cli.json("inspect", LR1)["hparams"]
    assert shown["learning_rate"] == {"value": 0.001, "source": f"{ARGS}: learning_rate"}
    assert shown["weight_decay"] == {"value": 0.01, "source": f"{ARGS}: weight_decay"}
    assert shown["optim"] == {"value": "adamw_torch_fused", "source": f"{ARGS}: optim"}
    assert shown["seed"]["value"] == 2 and shown["max_steps"]["value"] == 40
    assert set(shown) == _training_arguments(LR1)  # every key that is set, none dropped


def _training_arguments(run) -> set[str]:
    """The keys of the TrainingArguments JSON the Trainer wrote, as TensorBoard's own reader
    gets it: those whose value is not null, a dict's as ``outer.inner``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(next((run / "runs").glob("*/*tfevents*"))),
                              size_guidance={"tensors": 0})
    events.Reload()
    text = events.Tensors("args/text_summary")[-1].tensor_proto.string_val[0]
    args = json.loads(text)
    keys = {k for k, v in args.items() if v is not None and not isinstance(v, dict)}
    return keys | {f"{k}.{inner}" for k, v in args.items() if isinstance(v, dict)
                   for inner, x in v.items() if x is not None}


def test_inspect_prints_the_hyperparameters_with_where_they_came_from(cli):
    out = cli("inspect", LR1).stdout
    assert f"Hyperparameters ({len(_training_arguments(LR1))})" in out
    row = next(line for line in out.splitlines() if "│ learning_rate " in line)
    assert "0.001" in row and ARGS in row


def test_compare_json_and_terminal_show_the_learning_rate_and_seed_that_differ(cli):
    data = cli.json(LR3, LR1, "--no-report")
    keys = {d["key"]: d for d in data["differs"]["keys"]}
    assert set(keys) == {"learning_rate", "seed"}
    assert keys["learning_rate"]["values"] == {"lr3e-3_seed1": 0.003, "lr1e-3_seed2": 0.001}
    assert keys["seed"]["values"] == {"lr3e-3_seed1": 1, "lr1e-3_seed2": 2}
    assert keys["learning_rate"]["sources"]["lr1e-3_seed2"] == f"{ARGS}: learning_rate"
    assert data["differs"]["identity"] == ["output_dir", "run_name"]
    out = cli(LR3, LR1, "--no-report").stdout
    assert "What differs (2 hyperparameters)" in out
    assert re.search(r"│ learning_rate +│ 0\.003 +│ 0\.001 +│", out)
    assert re.search(r"│ seed +│ 1 +│ 2 +│", out)


def test_runs_that_differ_in_weight_decay_and_optimizer_show_both(cli):
    """hf_wd0.1_adafactor is lr3e-3_seed1 trained again with weight_decay=0.1 and
    optim="adafactor" (tests/data/README.md)."""
    data = cli.json(LR3, OPTIM, "--no-report")
    keys = {d["key"]: d["values"] for d in data["differs"]["keys"]}
    assert keys == {"optim": {"lr3e-3_seed1": "adamw_torch_fused",
                              "hf_wd0.1_adafactor": "adafactor"},
                    "weight_decay": {"lr3e-3_seed1": 0.01, "hf_wd0.1_adafactor": 0.1}}
    out = cli(LR3, OPTIM, "--no-report").stdout
    assert re.search(r"│ optim +│ adamw_torch_fused +│ adafactor +│", out)
    assert re.search(r"│ weight_decay +│ 0\.01 +│ 0\.1 +│", out)


def test_an_older_transformers_run_differs_in_its_optimizer():
    """hf_v4_accum4 (transformers 4.45, default optimizer adamw_torch) against hf_tokens
    (5.24, adamw_torch_fused); keys only one version writes are listed, not tabled."""
    found = compare(rc.load_many([DATA / "hf_tokens", DATA / "hf_v4_accum4"])).differs
    keys = {d.key: {run: f.value for run, f in d.facts.items()} for d in found.keys}
    assert keys["optim"] == {"hf_tokens": "adamw_torch_fused", "hf_v4_accum4": "adamw_torch"}
    assert keys["gradient_accumulation_steps"] == {"hf_tokens": 8, "hf_v4_accum4": 4}
    assert "learning_rate" not in keys and "weight_decay" not in keys  # both 3e-3 and 0.01
    assert "adafactor" in found.partial  # 4.45 writes it, 5.24 does not: not a difference


def test_the_report_shows_what_differs_with_each_values_source():
    page = render_report(compare(rc.load_many([LR3, LR1])))
    section = page[page.index("<h2>What differs</h2>"):]
    row = re.search(r"<tr><th>learning_rate</th>(.*?)</tr>", section).group(1)
    assert re.findall(r'data-src="([^"]+)">([^<]+)</button>', row) == [
        (f"{ARGS}: learning_rate", "0.003"), (f"{ARGS}: learning_rate", "0.001")]


def test_the_sweep_leaderboard_carries_the_differing_hyperparameters():
    """Nine real runs (the six seeds and three batch-sweep runs, which hold no
    TrainingArguments): the learning rate and seed are columns, the batch keys are not."""
    runs = rc.load_many([*sorted(SEEDS.glob("lr*")), DATA / "hf_tokens", DATA / "hf_global32",
                         DATA / "hf_v4_accum4"], settings=["seq_len=64"])
    page = render_report(compare(runs))
    board = page[page.index("<h2>Leaderboard</h2>"):page.index("<h2>Curves</h2>")]
    head = re.search(r"<table class=board id=\"rc-board\"><tr>(.*?)</tr>", board).group(1)
    columns = re.findall(r"<th>([^<]+)</th>", head)
    assert "learning_rate" in columns and "seed" in columns and "optim" in columns
    assert "per_device_train_batch_size" not in columns  # the hierarchy shows it


@pytest.mark.parametrize(("path", "source", "key", "value", "where"), [
    (DATA / "lightning" / "lightning_logs" / "version_0", None, "lr", 0.003, "hparams.yaml: lr"),
    (DATA / "hf_ddp", "wandb", "optim", "adamw_torch_fused", "wandb config: optim"),
])
def test_every_source_keeps_its_config_keys(path, source, key, value, where):
    run = rc.load(path, source=source)
    assert run.hparams[key].value == value and run.hparams[key].source == where


def test_mlflow_params_are_text_but_compare_as_numbers():
    runs = rc.load_many([DATA / "mlflow" / "file_store"])
    assert {r.name: r.hparams["learning_rate"].value for r in runs} == {
        "accum2": "0.003", "accum1": "0.003"}  # MLflow stores every param as text
    found = compare(runs).differs
    assert [d.key for d in found.keys] == ["gradient_accumulation_steps"]


def test_a_config_file_that_disagrees_with_the_logs_is_a_finding(tmp_path):
    config = tmp_path / "train.yaml"
    config.write_text("learning_rate: 0.01\nwarmup_steps: 5\n")
    run = rc.load_many([LR1], config=config)[0]
    assert run.hparams["learning_rate"].value == 0.01  # the stated config, as for facts
    clash = [f for f in run.findings if f.code == "hparam-conflict"]
    assert len(clash) == 1 and "learning_rate 0.01 (train.yaml: learning_rate) but 0.001" \
        in clash[0].message
    assert "warmup_steps" not in clash[0].message  # 5 and 5 agree


def test_hyperparameters_survive_the_cache():
    first = rc.load(LR1)
    again = rc.load(LR1)  # from the cache entry the first read wrote
    assert again.hparams == first.hparams and set(again.hparams) == _training_arguments(LR1)


def test_a_sweeps_report_draws_the_differing_hyperparameters_against_the_metric():
    """Nine real runs: a parallel-coordinates axis per differing key every run holds, text
    values as ticks, the verdict's metric at the budget last and as the colour."""
    runs = rc.load_many([SEEDS, DATA / "hf_tokens", DATA / "hf_v4_accum4", OPTIM],
                        settings=["seq_len=64"])
    comparison = compare(runs)
    page = render_report(comparison)
    block = re.search(r'<script type="application/json" id="rc-data">(.*?)</script>', page,
                      re.DOTALL).group(1)
    lines = json.loads(block)["parcoords"]
    assert 'id="rc-parcoords"' in page
    order = lines["runs"]
    assert order == list(comparison.verdict.run_values)  # ranked, best first
    axes = {d["label"]: d for d in lines["dimensions"]}
    assert axes["learning_rate"]["values"] == [
        {"lr1e-3": 0.001}.get(name[:6], 0.003) for name in order]
    optim = axes["optim"]
    assert optim["ticktext"] == ["adafactor", "adamw_torch", "adamw_torch_fused"]
    assert [optim["ticktext"][v] for v in optim["values"]] == [
        runs[[r.name for r in runs].index(name)].hparams["optim"].value for name in order]
    assert axes["weight_decay"]["values"] == [0.1 if name == "hf_wd0.1_adafactor" else 0.01
                                              for name in order]
    metric = lines["dimensions"][-1]
    assert metric["label"] == "eval/loss at the budget"
    assert metric["values"] == lines["color"] == [comparison.verdict.run_values[n] for n in order]
