"""nanogpt, torchtitan and text (seed format, key=value, --pattern), and which source claims
which file (tests/data/text/README.md says how each log was made)."""

from __future__ import annotations

import polars as pl
import pytest

import runcompare as rc
from runcompare.errors import InputError, UsageError
from runcompare.legs import resolve_legs
from runcompare.sources import REGISTRY

from .conftest import DATA, SAMPLES

TEXT = DATA / "text"
TEXT_SOURCES = {name: REGISTRY[name] for name in ("hf-stdout", "megatron", "nanogpt",
                                                  "torchtitan", "jsonl", "text")}
PATTERN = (r"(?P<wall_time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ep \d+ it (?P<step>\d+) "
           r"train_loss (?P<loss>\S+) acc (?P<acc>\S+)")


@pytest.mark.parametrize("folder, owner", [
    ("megatron_ramp", "megatron"), ("megatron_restart", "megatron"), ("nanogpt", "nanogpt"),
    ("torchtitan", "torchtitan"), ("torchtitan_resume", "torchtitan"), ("kv", "text"), ("colon", "text"), ("seed_trainer", "text"),
    ("hf4x_attn", "hf-stdout"), ("pattern", None)])
def test_each_log_is_claimed_by_its_own_source_only(folder, owner):
    claimed = [name for name, module in TEXT_SOURCES.items() if module.finds(TEXT / folder)]
    assert claimed == ([owner] if owner else [])


def test_registered_and_never_claiming_wandb_files_or_other_text():
    assert list(TEXT_SOURCES) == [n for n in REGISTRY if n in TEXT_SOURCES]
    wandb = SAMPLES / "attn" / "wandb"
    for module in TEXT_SOURCES.values():
        assert not module.finds(wandb)
        assert not module.files_at(wandb / "debug.log")
        assert not module.files_at(wandb / "debug-internal.log")
        assert not module.finds(DATA / "README.md")


def test_nanogpt_steps_are_updates_done():
    raw = REGISTRY["nanogpt"].read_at(TEXT / "nanogpt")
    loss = raw.scalars.filter(metric="train/loss", leg=0)
    assert loss.get_column("step").to_list()[:3] == [1, 11, 21]  # iter 0, 10, 20
    evals = raw.scalars.filter(metric="eval/loss").select("step", "leg").rows()
    assert evals == [(0, 0), (250, 0), (250, 1), (500, 1)]
    mfu = raw.scalars.filter(metric="train/mfu", leg=0)
    assert mfu.get_column("step")[0] == 51 and mfu.get_column("value")[0] == 11.34  # -100% left out
    assert raw.aliases["eval/loss"] == "val loss"


def test_nanogpt_facts_and_tokens_axis():
    facts = REGISTRY["nanogpt"].read_at(TEXT / "nanogpt").facts
    assert facts["tokens_per_step"].value == 16_384 and facts["tokens_per_step"].kind == "logged"
    assert facts["max_steps"].value == 500  # "Overriding: max_iters = 500" beats the config file
    assert facts["seq_len"].source == "train.log: config block_size"
    assert "grad_accum" not in facts
    run = rc.load(TEXT / "nanogpt", cache=False)
    assert run.format == "nanogpt"
    last = run.frame(x="tokens").filter(metric="train/loss").sort("step").tail(1)
    assert last.select("step", "tokens").row(0) == (501, 501 * 16_384)


def test_nanogpt_resume_leg_overrides_the_crashed_tail():
    raw = REGISTRY["nanogpt"].read_at(TEXT / "nanogpt")
    kept, _ = resolve_legs(raw.scalars, starts=raw.leg_starts)
    loss = kept.filter(metric="train/loss").sort("step")
    assert loss.filter(pl.col("step") > 250).get_column("leg").unique().to_list() == [1]


def test_torchtitan_strips_colours_and_reads_each_field():
    raw = REGISTRY["torchtitan"].read_at(TEXT / "torchtitan")
    at = dict(raw.scalars.filter(step=10).select("metric", "value").iter_rows())
    assert at == {"train/loss": 10.6129, "train/grad_norm": 1.3345,
                  "train/memory_gib": 30.12, "train/memory_pct": 38.1,
                  "train/tps_per_device": 6553.0, "train/tflops_per_device": 302.23,
                  "train/mfu": 32.45}
    assert raw.scalars.filter(metric="train/mfu", step=1).is_empty()  # "mfu: N/A"
    assert raw.scalars.filter(metric="eval/loss").get_column("step").to_list() == [50, 100]
    assert raw.scalars.filter(step=10).get_column("wall_time")[0] == 1709283612.5
    assert not raw.findings


def test_torchtitan_facts_from_the_training_starts_line():
    facts = REGISTRY["torchtitan"].read_at(TEXT / "torchtitan").facts
    assert (facts["per_device_batch"].value, facts["global_batch"].value,
            facts["grad_accum"].value, facts["seq_len"].value, facts["max_steps"].value) == \
        (1, 8, 1, 8192, 100)
    assert facts["seq_len"].source == "train.log line 4: sequence length"


def test_seed_trainer_steps_and_the_micro_step_bar():
    raw = REGISTRY["text"].read_at(TEXT / "seed_trainer")
    assert raw.step_unit == "optimizer"
    loss = raw.scalars.filter(metric="train/loss")
    assert loss.get_column("step").to_list() == list(range(5, 41, 5))
    assert raw.scalars.filter(metric="train/epoch").get_column("value")[-1] == 0.5
    assert set(raw.scalars.get_column("metric")) == {
        "train/loss", "train/epoch", "train/tflops", "train/mfu"}
    assert raw.facts["grad_accum"].value == 4 and raw.facts["grad_accum"].kind == "inferred"
    assert raw.facts["max_steps"].value == 40
    assert [f.code for f in raw.findings] == ["bar-counts-micro-steps"]


def test_generic_key_value_lines_and_step_less_eval_lines():
    raw = REGISTRY["text"].read_at(TEXT / "kv")
    assert raw.scalars.filter(metric="train/learning_rate").get_column("value")[0] == 1.5e-4
    assert raw.aliases["train/learning_rate"] == "lr" and raw.aliases["eval/loss"] == "val_loss"
    assert raw.scalars.filter(metric="eval/loss").get_column("step").to_list() == [100, 200]
    assert [f.code for f in raw.findings] == ["step-carried"]


def test_generic_colon_lines():
    raw = REGISTRY["text"].read_at(TEXT / "colon")
    assert raw.scalars.filter(metric="train/loss").height == 50
    assert raw.scalars.filter(metric="train/throughput", step=1).get_column("value")[0] == 1235.5


def test_pattern_reads_a_format_nothing_else_claims():
    raw = REGISTRY["text"].read_at(TEXT / "pattern", hints={"pattern": PATTERN})
    assert raw.scalars.filter(metric="train/loss").get_column("step").to_list() == \
        list(range(5, 101, 5))
    assert raw.scalars.filter(metric="train/acc", step=100).get_column("value")[0] == 0.9
    assert raw.scalars.filter(step=5).get_column("wall_time")[0] == 1709283605.0


def test_bad_patterns_are_usage_errors():
    with pytest.raises(UsageError, match=r"needs a named group \(\?P<step>"):
        REGISTRY["text"].read_at(TEXT / "pattern", hints={"pattern": r"loss (?P<loss>\S+)"})
    with pytest.raises(UsageError, match="Rust regex syntax"):
        REGISTRY["text"].read_at(TEXT / "pattern", hints={"pattern": r"it (?P<step>\d+)(?=x)"})
    with pytest.raises(InputError, match="matched no line"):
        REGISTRY["text"].read_at(TEXT / "pattern", hints={"pattern": r"nothing (?P<step>\d+)"})


def test_values_without_any_step_are_numbered_by_log_call(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("loss=2.5 acc=0.1\nloss=2.4 acc=0.2\nloss=2.3 acc=0.3\n")
    raw = REGISTRY["text"].read_at(log)
    assert raw.step_unit == "log_call"
    assert raw.scalars.filter(metric="train/loss").get_column("step").to_list() == [1, 2, 3]
    assert "step-is-log-call" in [f.code for f in raw.findings]


def test_binary_garbage_is_not_a_log(tmp_path):
    junk = tmp_path / "junk.log"
    junk.write_bytes(bytes(range(256)) * 4000)
    for module in TEXT_SOURCES.values():
        assert not module.finds(junk)
    with pytest.raises(InputError):
        REGISTRY["text"].read_at(junk)


def test_torchtitan_resume_is_two_legs_from_the_loaded_checkpoint():
    raw = REGISTRY["torchtitan"].read_at(TEXT / "torchtitan_resume")
    # launch 2 says "Training starts at step 41." after loading the step-40 checkpoint
    assert raw.leg_starts == {1: 41}
    loss = raw.scalars.filter(metric="train/loss").sort("step", "leg")
    assert loss.select("step", "leg").rows() == [
        (1, 0), (10, 0), (20, 0), (30, 0), (40, 0), (50, 0), (50, 1), (60, 1), (70, 1), (80, 1)]
    run = rc.load(TEXT / "torchtitan_resume", cache=False)
    kept = run.scalars.filter(metric="train/loss").sort("step")
    assert kept["step"].to_list() == [1, 10, 20, 30, 40, 50, 60, 70, 80]
    first, second = loss.filter(step=50)["value"].to_list()
    assert kept.filter(step=50)["value"].item() == second != first
    # the batch is on its own "Trainer is initialized with ..." line in current versions
    assert (run.batch.per_device_batch.value, run.batch.grad_accum.value,
            run.batch.global_batch.value, run.batch.seq_len.value) == (2, 2, 16, 4096)
    assert run.batch.seq_len.source == "train.log line 15: sequence length"
    assert run.micro_steps == 160


def test_a_folder_of_text_runs_gives_one_run_each_by_its_format(cli):
    got = cli.json("inspect", DATA / "text", "--no-cache")
    formats = {r["name"]: r["format"] for r in got}
    assert formats == {"hf4x_attn": "hf-stdout", "megatron_ramp": "megatron",
                       "megatron_restart": "megatron", "megatron_skipped": "megatron",
                       "nanogpt": "nanogpt",
                       "torchtitan": "torchtitan", "torchtitan_resume": "torchtitan",
                       "colon": "text", "kv": "text", "seed_trainer": "text"}
