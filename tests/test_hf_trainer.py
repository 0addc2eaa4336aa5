"""The HF Trainer source on real Trainer output dirs (made by scripts/make_sample_logs.py)."""

from __future__ import annotations

import json
import math
import shutil

import polars as pl
import pytest

import runcompare as rc
from runcompare.errors import InputError
from runcompare.sources import REGISTRY

from .conftest import DATA, SAMPLES


def _history(path):
    return json.loads((path / "trainer_state.json").read_text())["log_history"]


def test_every_log_history_value_is_a_point_under_its_tensorboard_name():
    raw = REGISTRY["hf-trainer"].read_at(SAMPLES / "attn")
    history = _history(SAMPLES / "attn")
    expected = sum(1 for e in history for k in e if k != "step")
    assert raw.points == expected
    losses = raw.scalars.filter(metric="train/loss").sort("step")
    assert losses.get_column("step").to_list() == list(range(5, 101, 5))
    assert losses.get_column("value").to_list() == [e["loss"] for e in history if "loss" in e]
    evals = raw.scalars.filter(metric="eval/loss").get_column("step").to_list()
    assert evals == [25, 50, 75, 100]
    assert raw.aliases["eval/loss"] == "eval_loss" and raw.step_unit == "optimizer"


def test_facts_say_where_they_come_from():
    facts = REGISTRY["hf-trainer"].read_at(SAMPLES / "mamba").facts
    assert facts["per_device_batch"].value == 8
    assert facts["per_device_batch"].source == "trainer_state.json: train_batch_size"
    assert facts["max_steps"].value == 100 and facts["logging_steps"].value == 5
    assert facts["eval_steps"].value == 25 and facts["global_step"].value == 100
    assert facts["train_samples_per_second"].source.startswith("trainer_state.json: log_history")


def test_a_rate_beyond_a_float_is_no_fact(tmp_path):
    """An edited state (hand-made from the real sample: the last rate entry's samples/s a
    401-digit integer) reads; the rate no float holds is not a fact, the other one is."""
    state = json.loads((SAMPLES / "mamba" / "trainer_state.json").read_text())
    last = next(e for e in reversed(state["log_history"]) if "train_samples_per_second" in e)
    last["train_samples_per_second"] = 10 ** 400
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    facts = REGISTRY["hf-trainer"].read_at(tmp_path).facts
    assert "train_samples_per_second" not in facts
    assert facts["train_steps_per_second"].value == last["train_steps_per_second"]


def test_global_batch_is_inferred_from_the_final_rates_for_both_samples():
    for name, micro in (("mamba", 8), ("attn", 2)):
        run = rc.load(SAMPLES / name, source="hf-trainer")
        assert run.batch.per_device_batch.value == micro
        assert run.batch.global_batch.value == 16
        assert run.batch.global_batch.source.startswith(
            "inferred: train_samples_per_second ÷ train_steps_per_second")


def test_seq_len_from_the_sidecar_gives_1024_tokens_per_step():
    run = rc.load(SAMPLES / "attn", source="hf-trainer")
    assert run.batch.seq_len.value == 64 and run.batch.seq_len.source == "runcompare.toml: seq_len"
    assert run.batch.tokens_per_step.value == 1024
    last = run.frame(x="tokens").filter(metric="train/loss").sort("step").tail(1)
    assert last.get_column("tokens").item() == 100 * 1024
    assert last.get_column("samples").item() == 100 * 16


def test_resumed_run_reads_the_final_state_not_the_checkpoint():
    run = rc.load(DATA / "hf_resumed", source="hf-trainer")
    assert run.optimizer_steps == 40
    assert run.scalars.get_column("step").max() == 40
    first_leg = rc.load(DATA / "hf_resumed" / "checkpoint-20", source="hf-trainer")
    assert first_leg.name == "hf_resumed" and first_leg.optimizer_steps == 20


def test_resumed_global_batch_from_rates_survives_the_resume():
    # samples/s × runtime ÷ global_step would be wrong after a resume; the ratio is not
    run = rc.load(DATA / "hf_resumed", source="hf-trainer")
    assert run.batch.global_batch.value == 16


def test_ddp_run_reveals_world_size_2_once_accumulation_is_known():
    run = rc.load(DATA / "hf_ddp", source="hf-trainer", grad_accum=2)
    assert run.batch.per_device_batch.value == 4
    assert run.batch.global_batch.value == 16
    assert run.batch.world_size.value == 2
    assert run.batch.world_size.source == "derived: global_batch ÷ (per_device_batch × grad_accum)"


def test_global_batch_32_run():
    run = rc.load(DATA / "hf_global32", source="hf-trainer", grad_accum=8)
    assert (run.batch.per_device_batch.value, run.batch.global_batch.value) == (4, 32)
    assert run.batch.world_size.value == 1 and run.micro_steps == 8 * run.optimizer_steps


def test_token_counter_is_the_tokens_axis():
    run = rc.load(DATA / "hf_tokens", source="hf-trainer")
    history = _history(DATA / "hf_tokens")
    counted = {e["step"]: e["num_input_tokens_seen"] for e in history
               if "num_input_tokens_seen" in e}
    frame = run.frame(x="tokens").filter(metric="train/loss")
    assert dict(zip(frame["step"], frame["tokens"])) == {s: counted[s] for s in frame["step"]}
    assert run.total("tokens") == max(counted.values()) == run.optimizer_steps * 16 * 64
    assert run.axis_sources["tokens"] == "logged counter num_input_tokens_seen"
    assert "train/num_input_tokens_seen" not in run.metrics


def test_truncated_state_keeps_every_complete_entry_and_warns(tmp_path):
    # malformed input made by hand: a real trainer_state.json cut in the middle of an entry
    source = (SAMPLES / "attn" / "trainer_state.json").read_text()
    cut = source.index('"eval_loss"', source.index('"eval_loss"') + 1)
    (tmp_path / "trainer_state.json").write_text(source[:cut])
    raw = REGISTRY["hf-trainer"].read_at(tmp_path)
    (finding,) = raw.findings
    assert finding.code == "damaged-input" and finding.level == "warning"
    assert str(tmp_path / "trainer_state.json") in finding.message and "line" in finding.message
    steps = raw.scalars.filter(metric="train/loss").get_column("step").to_list()
    assert steps == [s for s in range(5, 101, 5) if s <= 50]
    assert raw.scalars.filter(metric="eval/loss").get_column("step").to_list() == [25]


def test_non_json_state_is_an_error_with_file_and_position(tmp_path):
    # malformed input made by hand
    (tmp_path / "trainer_state.json").write_text("not json at all")
    with pytest.raises(InputError, match=r"trainer_state.json: not valid JSON at line 1 column 1"):
        rc.load(tmp_path)


def test_bare_nan_and_infinity_are_kept(tmp_path):
    # a real file with two losses replaced by the bare tokens json.dumps writes for them
    state = json.loads((SAMPLES / "attn" / "trainer_state.json").read_text())
    state["log_history"][0]["loss"] = float("nan")
    state["log_history"][1]["loss"] = float("inf")
    (tmp_path / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    assert "NaN" in (tmp_path / "trainer_state.json").read_text()
    values = rc.load(tmp_path).scalars.filter(metric="train/loss").sort("step")["value"]
    assert math.isnan(values[0]) and values[1] == math.inf


def test_training_args_pickle_is_never_opened(monkeypatch):
    import pickle

    def refuse(*args, **kwargs):
        raise AssertionError("a pickle was loaded")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    assert (SAMPLES / "attn" / "training_args.bin").exists()
    rc.load(SAMPLES / "attn", cache=False)  # every source reads its files now


def test_input_files_are_not_modified(tmp_path):
    copy = tmp_path / "attn"
    shutil.copytree(SAMPLES / "attn", copy)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in copy.rglob("*") if p.is_file()}
    rc.load(copy, seq_len=64).frame(x="tokens")
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in copy.rglob("*") if p.is_file()}
    assert before == after


def test_frame_columns_are_the_design_columns():
    frame = rc.load(SAMPLES / "attn").frame(x="samples")
    assert frame.columns == ["run", "metric", "value", "step", "micro_step", "samples", "tokens",
                             "epoch", "wall_time", "elapsed", "flops", "device_hours", "x"]
    assert frame.schema["step"] == pl.Int64 and frame.schema["epoch"] == pl.Float64
    assert frame.filter(metric="train/loss", step=100)["epoch"].item() == pytest.approx(
        next(e for e in _history(SAMPLES / "attn") if e.get("step") == 100)["epoch"])


def test_an_entry_whose_step_no_int64_holds_or_is_a_bool_is_no_point(tmp_path):
    # hand-written (edited) state: such a step raised a polars TypeError traceback
    state = json.loads((SAMPLES / "attn" / "trainer_state.json").read_text())
    state["log_history"] = [{"loss": 2.0, "step": 1}, {"loss": 1.0, "step": 2 ** 63},
                            {"loss": 0.5, "step": True}, {"loss": 0.25, "step": 3}]
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    raw = REGISTRY["hf-trainer"].read_at(tmp_path)
    assert raw.scalars.select("metric", "step", "value").rows() == [
        ("train/loss", 1, 2.0), ("train/loss", 3, 0.25)]


def test_output_dirs_nested_at_any_depth_under_a_folder_of_runs(cli, tmp_path):
    # issue #29: runs/<name>/results/checkpoint-N/trainer_state.json, a layout of real runs
    for name, run in (("ddp", "hf_ddp"), ("global32", "hf_global32")):
        shutil.copytree(DATA / run / "checkpoint-30",
                        tmp_path / "sweep" / name / "results" / "checkpoint-30")
    got = cli.json("inspect", tmp_path / "sweep", "--no-cache")
    assert sorted((r["name"], r["steps"]["optimizer"]) for r in got) == [
        ("ddp/results", 30), ("global32/results", 30)]
    batch = {r["name"]: r["batch"]["per_device_batch"]["value"] for r in got}
    assert batch == {"ddp/results": 4, "global32/results": 4}


def test_one_output_dir_deep_in_a_folder_is_that_run(cli, tmp_path):
    shutil.copytree(DATA / "hf_ddp" / "checkpoint-30",
                    tmp_path / "job" / "outputs" / "results" / "checkpoint-30")
    got = cli.json("inspect", tmp_path / "job", "--no-cache")
    assert got["format"] == "hf-trainer" and got["steps"]["optimizer"] == 30


def test_the_search_for_output_dirs_is_bounded(tmp_path):
    from runcompare.sources.codecs.files import roots_under

    deep = tmp_path.joinpath(*[f"d{i}" for i in range(8)])
    shutil.copytree(DATA / "hf_ddp" / "checkpoint-30", deep / "checkpoint-30")
    assert roots_under(tmp_path, lambda f: (f / "checkpoint-30").is_dir()) == []
    assert roots_under(tmp_path, lambda f: (f / "checkpoint-30").is_dir(), depth=8) == [deep]
    for i in range(30):
        (tmp_path / f"wide{i:02d}").mkdir()
    last = tmp_path / "wide29"
    assert roots_under(tmp_path, lambda f: f == last) == [last]
    assert roots_under(tmp_path, lambda f: f == last, limit=10) == []  # looked at 10 folders
