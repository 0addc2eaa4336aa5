"""Axolotl YAML configs as a source of facts (tests/data/axolotl/: hand-written configs in
Axolotl's documented keys; see the comment at the top of each)."""

from __future__ import annotations

import shutil

import polars as pl
import pytest

import runcompare as rc
from runcompare.errors import InputError
from runcompare.load import expand
from runcompare.model import RAW_SCHEMA
from runcompare.sources import REGISTRY
from runcompare.sources.config import config_facts, nested_facts
from runcompare.sources.formats import axolotl

from .conftest import DATA, SAMPLES

CONFIGS = DATA / "axolotl"
PLAIN, PACKED = CONFIGS / "axolotl.yml", CONFIGS / "packed_batch_size.yaml"


def test_config_facts_name_the_file_and_key():
    facts = config_facts(PLAIN)
    assert facts["per_device_batch"].value == 2
    assert facts["per_device_batch"].source == "axolotl.yml: micro_batch_size"
    assert facts["grad_accum"].value == 8
    assert facts["grad_accum"].source == "axolotl.yml: gradient_accumulation_steps"
    assert facts["seq_len"].value == 64 and facts["seq_len"].source == "axolotl.yml: sequence_len"
    assert facts["max_steps"].value == 100 and facts["learning_rate"].value == 0.003
    assert facts["num_train_epochs"].value == 2.0
    assert facts["num_train_epochs"].source == "axolotl.yml: num_epochs"
    assert facts["logging_steps"].value == 5 and facts["eval_steps"].value == 25
    assert {f.kind for f in facts.values()} == {"config"}


def test_batch_size_is_never_the_micro_batch_and_gives_the_accumulation():
    facts, findings = axolotl.read_config(PACKED)
    assert facts["per_device_batch"].value == 2  # micro_batch_size, not batch_size 16
    assert facts["grad_accum"].value == 8
    assert facts["grad_accum"].source == "packed_batch_size.yaml: batch_size ÷ micro_batch_size"
    assert facts["learning_rate"].value == 2e-4  # YAML 1.1 reads `2e-4` as a string
    assert [f.code for f in findings] == ["sample-packing"]


def test_a_run_folder_with_an_axolotl_config_is_a_facts_only_source():
    assert REGISTRY["axolotl"] is axolotl.FORMAT and axolotl.FORMAT.facts_only
    assert REGISTRY["axolotl"].finds(CONFIGS) and REGISTRY["axolotl"].finds(PLAIN)
    assert axolotl.files(CONFIGS) == [PLAIN, PACKED]
    raw = REGISTRY["axolotl"].read_at(PLAIN)
    assert raw.source == "axolotl" and raw.points == 0
    assert raw.scalars.schema == pl.Schema(RAW_SCHEMA)
    assert raw.facts == config_facts(PLAIN) and raw.files == [PLAIN]
    assert [root for root, _, _ in expand(CONFIGS, source="axolotl")] == [CONFIGS]  # one run


def test_two_configs_in_one_folder_are_reported():
    raw = REGISTRY["axolotl"].read_at(CONFIGS)
    assert raw.facts["grad_accum"].source.startswith("axolotl.yml")
    assert any(f.code == "several-configs" and "--config" in f.message for f in raw.findings)


def test_other_yaml_files_are_not_taken_for_axolotl_configs(tmp_path):
    # hand-made: Lightning's hparams.yaml and a YAML without Axolotl's keys
    (tmp_path / "hparams.yaml").write_text("micro_batch_size: 4\nsequence_len: 128\n")
    (tmp_path / "other.yml").write_text("micro_batch_size: 4\nlayers: 2\n")
    (tmp_path / "notes.yaml").write_text("- a\n- b\n")
    assert not REGISTRY["axolotl"].finds(tmp_path)


def test_an_hf_run_with_its_axolotl_config_beside_it(tmp_path):
    # a copy of the real sample run's trainer_state.json with the hand-written config beside it
    shutil.copyfile(SAMPLES / "attn" / "trainer_state.json", tmp_path / "trainer_state.json")
    shutil.copyfile(PLAIN, tmp_path / "axolotl.yml")
    run = rc.load(tmp_path, cache=False)
    assert run.format == "hf-trainer" and run.sources == ["hf-trainer", "axolotl"]
    assert run.batch.grad_accum.source == "axolotl.yml: gradient_accumulation_steps"
    assert run.batch.per_device_batch.source == "axolotl.yml: micro_batch_size"
    assert run.batch.seq_len.value == 64 and run.batch.global_batch.value == 16
    assert run.micro_steps == 800  # 100 optimizer steps × 8


def test_bad_configs_are_input_errors_naming_the_file(tmp_path):
    # hand-made damaged configs
    broken = tmp_path / "broken.yml"
    broken.write_text("micro_batch_size: 2\nsequence_len: [64\n")
    with pytest.raises(InputError, match=r"broken\.yml: not valid YAML at line \d"):
        config_facts(broken)
    listed = tmp_path / "list.yml"
    listed.write_text("- micro_batch_size\n")
    with pytest.raises(InputError, match="not a YAML mapping"):
        config_facts(listed)
    with pytest.raises(InputError, match="no such config file"):
        config_facts(tmp_path / "missing.yml")
    assert not REGISTRY["axolotl"].finds(tmp_path)


def test_nested_facts_match_keys_by_their_last_part():
    facts = nested_facts({"model/batch_size": "8", "data": {"seq_len": 512},
                                  "trainer.accumulate_grad_batches": 4, "lr": "1e-3"},
                                 where="params")
    assert {k: (f.value, f.source) for k, f in facts.items()} == {
        "per_device_batch": (8, "params: model/batch_size"),
        "grad_accum": (4, "params: trainer.accumulate_grad_batches"),
        "seq_len": (512, "params: data.seq_len"), "learning_rate": (0.001, "params: lr")}
