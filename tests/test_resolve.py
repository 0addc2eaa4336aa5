"""Facts merged by priority, the batch hierarchy derived from them, --set and runcompare.toml."""

from __future__ import annotations

import pytest

from runcompare.errors import InputError, UsageError
from runcompare.model import Fact
from runcompare.resolve import (
    infer_global_batch,
    merge_facts,
    parse_settings,
    read_sidecar,
    resolve_batch,
)

RATES = {"train_samples_per_second": Fact(335.213, "summary"),
         "train_steps_per_second": Fact(20.951, "summary")}


def test_user_beats_config_beats_logged_beats_inferred():
    merged, findings = merge_facts(
        {"seq_len": Fact(2048, "--set", "user")},
        {"seq_len": Fact(1024, "wandb config: seq_len", "config"),
         "grad_accum": Fact(4, "args", "config")},
        {"grad_accum": Fact(2, "log", "logged"), "per_device_batch": Fact(8, "state", "logged")},
    )
    assert merged["seq_len"] == Fact(2048, "--set", "user")
    assert merged["grad_accum"].source == "args"
    assert merged["per_device_batch"].value == 8
    assert [f.code for f in findings] == ["fact-conflict", "fact-conflict"]
    assert "seq_len is 2048 (--set) but 1024 (wandb config: seq_len)" in findings[0].message


def test_ddp_world_size_revealed_by_rates_when_accumulation_is_known():
    # 335.213 ÷ 20.951 = 16.0 = 4 per device × 2 accum × 2 processes (FORMATS.md §1)
    facts = {**RATES, "per_device_batch": Fact(4, "state"),
             "grad_accum": Fact(2, "args", "config")}
    batch, findings = resolve_batch(facts)
    assert batch.global_batch.value == 16 and batch.global_batch.kind == "inferred"
    assert batch.world_size.value == 2
    assert batch.world_size.source.startswith("derived: global_batch ÷")
    assert findings == []


def test_ratio_off_a_multiple_of_the_micro_batch_is_rejected():
    facts = {"train_samples_per_second": Fact(300.0, "s"),
             "train_steps_per_second": Fact(20.0, "s"), "per_device_batch": Fact(4, "s")}
    assert infer_global_batch(facts) is None


def test_epoch_based_ratio_near_but_not_at_a_multiple_is_rejected():
    # 1000 samples in 63 steps (epoch training): 15.87 per step, not a batch size
    facts = {"train_samples_per_second": Fact(100.0, "s"),
             "train_steps_per_second": Fact(6.3, "s"), "per_device_batch": Fact(8, "s")}
    assert infer_global_batch(facts) is None


def test_config_product_wins_over_inferred_global_batch_and_mismatch_is_reported():
    facts = {**RATES, "per_device_batch": Fact(4, "state"),
             "grad_accum": Fact(4, "args", "config"), "world_size": Fact(2, "set", "user")}
    batch, findings = resolve_batch(facts, run="r")
    assert batch.global_batch.value == 32
    assert [f.code for f in findings] == ["accum-overshoot"]  # 32 configured > 16 run


def test_tokens_per_step_needs_a_sequence_length():
    base = {"per_device_batch": Fact(8, "a"), "grad_accum": Fact(2, "a"),
            "world_size": Fact(256, "a")}
    assert resolve_batch(base)[0].tokens_per_step.value is None
    batch, _ = resolve_batch({**base, "seq_len": Fact(1024, "toml", "config")})
    assert batch.global_batch.value == 4096 and batch.tokens_per_step.value == 4_194_304


def test_tensor_parallel_reduces_data_parallel():
    facts = {"per_device_batch": Fact(2, "a"), "grad_accum": Fact(4, "a"),
             "world_size": Fact(16, "a"), "tensor_parallel": Fact(4, "a")}
    assert resolve_batch(facts)[0].global_batch.value == 2 * 4 * 4


def test_parse_settings_per_run_and_for_all():
    out = parse_settings(["seq_len=64", "attn:grad_accum=8", "mamba:name=ssm"])
    assert out[None]["seq_len"] == Fact(64, "--set", "user")
    assert out["attn"]["grad_accum"].value == 8
    assert out["mamba"]["name"].value == "ssm"


@pytest.mark.parametrize("item, message", [
    ("seq_len", "expected KEY=VALUE or RUN:KEY=VALUE"),
    ("batchsize=8", "unknown key 'batchsize'; known keys: per_device_batch"),
    ("grad_accum=two", "grad_accum='two' is not a whole number ≥ 1"),
    ("grad_accum=0", "is not a whole number ≥ 1"),
])
def test_bad_settings_are_usage_errors(item, message):
    with pytest.raises(UsageError, match=message):
        parse_settings([item])


def test_sidecar_top_level_and_per_run_tables(tmp_path):
    (tmp_path / "runcompare.toml").write_text(
        "seq_len = 2048\n[runs.attn]\ngrad_accum = 8\n", encoding="utf-8")
    sidecar = read_sidecar(tmp_path)
    assert sidecar[None]["seq_len"] == Fact(2048, "runcompare.toml: seq_len", "config")
    assert sidecar["attn"]["grad_accum"].value == 8


def test_broken_sidecar_names_the_file(tmp_path):
    (tmp_path / "runcompare.toml").write_text("seq_len = = 3\n", encoding="utf-8")
    with pytest.raises(InputError, match="runcompare.toml: not valid TOML"):
        read_sidecar(tmp_path)


def test_a_world_size_hint_never_overrides_the_global_batch_the_rates_give():
    # one process on a machine with 8 GPUs: W&B metadata says 8, the run used 1
    facts = {**RATES, "per_device_batch": Fact(4, "state"), "grad_accum": Fact(4, "args", "config"),
             "world_size": Fact(8, "wandb-metadata.json: gpu_count (a hint)", "hint")}
    batch, findings = resolve_batch(facts)
    assert batch.global_batch.value == 16 and batch.world_size.value == 1
    assert [f.code for f in findings] == ["hint-conflict"]  # the inference and the hint differ
    assert "world size 1" in findings[0].message and "hint of 8" in findings[0].message
    alone = {k: v for k, v in facts.items() if not k.startswith("train_")}
    batch, findings = resolve_batch(alone)  # no better fact: the hint, shown as one
    assert batch.global_batch.value == 4 * 4 * 8 and batch.global_batch.kind == "hint"
    assert [f.code for f in findings] == ["batch-from-hint"]
    assert "--set world_size=N" in findings[0].message


def test_a_value_printed_to_fewer_digits_is_no_conflict():
    # trainer_state.json keeps train_runtime 471.274; the Trainer's stdout prints 471.3
    stated = {"train_runtime": Fact(471.274, "trainer_state.json: train_runtime", "logged"),
              "seq_len": Fact(16, "args: max_seq_length", "config")}
    printed = {"train_runtime": Fact(471.3, "train.log: train_runtime", "logged"),
               "seq_len": Fact(17, "runcompare.toml: seq_len", "config")}
    merged, findings = merge_facts(stated, printed, run="r")
    assert merged["train_runtime"].value == 471.274
    assert [f.code for f in findings] == ["fact-conflict"]  # 16 against 17 only
    assert "seq_len is 16" in findings[0].message
