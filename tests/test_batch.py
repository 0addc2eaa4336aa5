"""The batch calculator against the golden numbers of the batch hierarchy (docs/architecture.md)."""

from __future__ import annotations

import pytest

from runcompare import plan_batch
from runcompare.errors import InputError, MissingInfoError


def test_golden_hierarchy_from_target_global_batch():
    plan = plan_batch(per_device_batch=8, world_size=256, global_batch=4096, seq_len=1024,
                      max_steps=23_842)
    assert plan.grad_accum == 2
    assert plan.global_batch == 4096 == 8 * 2 * 256
    assert plan.tokens_per_step == 4_194_304
    assert plan.micro_steps == 47_684
    assert plan.total_samples == 23_842 * 4096
    assert plan.total_tokens == 100_000_595_968
    assert plan.findings == []


def test_micro_steps_at_accumulation_8():
    plan = plan_batch(per_device_batch=2, grad_accum=8, world_size=256, max_steps=23_842)
    assert plan.micro_steps == 190_736
    assert plan.global_batch == 4096


def test_overshoot_clamps_accumulation_to_one_and_suggests_micro_batch_4():
    plan = plan_batch(per_device_batch=8, world_size=1024, global_batch=4096, seq_len=1024)
    assert (plan.grad_accum, plan.global_batch) == (1, 8192)
    (finding,) = plan.findings
    assert finding.code == "accum-overshoot" and finding.level == "warning"
    assert "use micro-batch 4 with accumulation 1" in finding.message


def test_target_that_does_not_divide_warns_and_says_what_it_gives():
    plan = plan_batch(per_device_batch=8, world_size=256, global_batch=5000)
    assert (plan.grad_accum, plan.global_batch) == (2, 4096)
    (finding,) = plan.findings
    assert finding.code == "target-not-divisible"
    assert "not a multiple of data parallel 256" in finding.message


def test_nodes_devices_and_dual_die_cards_make_the_world_size():
    plan = plan_batch(per_device_batch=4, grad_accum=4, nodes=2, devices_per_node=4,
                      dies_per_device=2)
    assert plan.world_size == 16 and plan.global_batch == 4 * 4 * 16


def test_model_parallelism_divides_the_world_into_replicas():
    plan = plan_batch(per_device_batch=1, grad_accum=16, world_size=64, tensor_parallel=4,
                      pipeline_parallel=2)
    assert plan.data_parallel == 8 and plan.global_batch == 128


def test_missing_accumulation_and_target_is_an_error_naming_the_flags():
    with pytest.raises(MissingInfoError, match="--grad-accum N, or a target --global-batch"):
        plan_batch(per_device_batch=8, world_size=8)


def test_world_not_divisible_by_model_parallel_is_an_error():
    with pytest.raises(InputError, match="not divisible by tensor × pipeline × context"):
        plan_batch(per_device_batch=8, grad_accum=1, world_size=6, tensor_parallel=4)


def test_cli_prints_golden_numbers_as_json(cli):
    out = cli.json("batch", "--per-device", "8", "--world-size", "256", "--global-batch",
                   "4096", "--seq-len", "1024", "--max-steps", "23842")
    assert out == {"per_device_batch": 8, "grad_accum": 2, "world_size": 256,
                   "data_parallel": 256, "global_batch": 4096, "seq_len": 1024,
                   "tokens_per_step": 4_194_304, "max_steps": 23_842, "micro_steps": 47_684,
                   "total_samples": 97_656_832, "total_tokens": 100_000_595_968,
                   "findings": []}


def test_cli_takes_the_python_keywords_name_too(cli):
    """``--per-device-batch`` (``plan_batch(per_device_batch=)``, the ``--set`` key and the
    JSON's name) is ``--per-device`` (issue 33), and the command is the library call."""
    args = ["--world-size", "256", "--global-batch", "4096", "--seq-len", "1024"]
    short = cli.json("batch", "--per-device", "8", *args)
    long = cli.json("batch", "--per-device-batch", "8", *args)
    assert short == long == plan_batch(per_device_batch=8, world_size=256, global_batch=4096,
                                       seq_len=1024).to_json()
    assert (long["per_device_batch"], long["grad_accum"], long["tokens_per_step"]) == (
        8, 2, 4_194_304)


def test_cli_table_shows_the_four_levels_and_the_overshoot(cli):
    result = cli("batch", "--per-device", "8", "--world-size", "1024", "--global-batch", "4096",
                 "--seq-len", "1024")
    assert result.exit_code == 0
    for text in ("micro-batch", "per-device batch", "global batch", "tokens per step", "8,192",
                 "8,388,608", "accum-overshoot"):
        assert text in result.stdout


def test_cli_without_world_size_exits_1_with_the_fix(cli):
    result = cli("batch", "--per-device", "8", "--grad-accum", "2")
    assert result.exit_code == 1
    assert "pass --world-size N, or --nodes N with --devices-per-node N" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
