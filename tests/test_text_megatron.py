"""The megatron source on logs written to Megatron-LM's print format (tests/data/text/README.md)."""

from __future__ import annotations

import math

import polars as pl
import pytest

import runcompare as rc
from runcompare.errors import InputError
from runcompare.legs import resolve_legs
from runcompare.sources import REGISTRY
from runcompare.sources.textlog import lines as _lines

from .conftest import DATA

RAMP = DATA / "text" / "megatron_ramp"
RESTART = DATA / "text" / "megatron_restart"


def test_train_line_fields_become_canonical_metrics():
    raw = REGISTRY["megatron"].read_at(RAMP)
    assert raw.source == "megatron" and raw.step_unit == "optimizer"
    first = dict(raw.scalars.filter(step=10).select("metric", "value").iter_rows())
    assert first["train/loss"] == pytest.approx(9.189654) and raw.aliases["train/loss"] == "lm loss"
    assert first["train/consumed_samples"] == 320 and first["train/global_batch_size"] == 32
    assert first["train/learning_rate"] == 3e-5 and first["train/iteration_time_ms"] == 815.3
    assert first["train/tflops_per_gpu"] == 180.2 and first["train/grad_norm"] == 0.9
    assert first["train/skipped_iterations"] == 0 and first["train/nan_iterations"] == 0
    loss = raw.scalars.filter(metric="train/loss")
    assert loss.get_column("step").to_list() == list(range(10, 201, 10))
    assert loss.get_column("wall_time")[0] == 1709283608.0  # 2024-03-01 09:00:08 read as UTC


def test_validation_and_test_lines():
    raw = REGISTRY["megatron"].read_at(RAMP)
    evals = raw.scalars.filter(metric="eval/loss")
    assert evals.get_column("step").to_list() == [50, 100, 150, 200]
    assert evals.get_column("value")[0] == pytest.approx(5.741461)
    assert raw.scalars.filter(metric="eval/ppl").get_column("value")[0] == pytest.approx(311.5192)
    assert raw.scalars.filter(metric="test/loss").select("step", "value").rows() == \
        [(200, pytest.approx(2.364496))]


def test_batch_ramp_gives_the_exact_samples_axis_from_consumed_samples():
    run = rc.load(RAMP, source="megatron", cache=False)
    loss = run.frame(x="samples").filter(metric="train/loss").sort("step")
    # 31 steps of 32, 8 of 64 ... (--rampup-batch-size 32 32 3000): not step × 128
    assert dict(loss.select("step", "samples").iter_rows())[40] == 1536
    assert loss.get_column("samples")[-1] == 21_184
    assert run.axis_sources["samples"] == "logged counter consumed samples"
    assert "batch-ramp" in [f.code for f in run.findings]


def test_arguments_block_gives_config_facts():
    facts = REGISTRY["megatron"].read_at(RAMP).facts
    assert facts["per_device_batch"].value == 4 and facts["per_device_batch"].kind == "config"
    assert facts["per_device_batch"].source == "train.log: arguments: micro_batch_size"
    assert (facts["seq_len"].value, facts["tensor_parallel"].value, facts["world_size"].value) == \
        (1024, 2, 16)
    assert facts["global_batch"].value == 128 and facts["max_steps"].value == 200
    assert facts["logging_steps"].value == 10 and facts["global_step"].value == 200
    run = rc.load(RAMP, source="megatron", cache=False)
    assert run.batch.grad_accum.value == 4  # 128 ÷ (4 micro × 16 ÷ 2 tensor-parallel)


def test_global_batch_from_the_lines_when_there_is_no_arguments_block(tmp_path):
    text = RAMP.joinpath("train.log").read_text()
    lines = [line for line in text.splitlines() if " iteration " in line and "|" in line]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    raw = REGISTRY["megatron"].read_at(tmp_path)
    assert raw.facts["global_batch"].value == 128
    assert raw.facts["global_batch"].source == "train.log: global batch size (iteration 200)"
    ramp = next(f for f in raw.findings if f.code == "batch-ramp")
    assert "from 32 to 128 in 3 change(s) (first at iteration 40)" in ramp.message
    train = raw.scalars.filter(pl.col("metric").str.starts_with("train/"))
    assert train.get_column("wall_time").null_count() == 0


def test_restart_appended_to_the_same_file_is_a_second_leg():
    raw = REGISTRY["megatron"].read_at(RESTART)
    assert raw.leg_starts == {1: 101}  # "successfully loaded checkpoint ... at iteration 100"
    legs = raw.scalars.filter(metric="train/loss").group_by("leg").agg(
        pl.col("step").min().alias("first"), pl.col("step").max().alias("last")).sort("leg")
    assert legs.rows() == [(0, 10, 130), (1, 110, 200)]  # 131 was cut before its loss
    kept, _ = resolve_legs(raw.scalars, starts=raw.leg_starts)
    steps = kept.filter(metric="train/loss").sort("step").get_column("step").to_list()
    assert steps == list(range(10, 201, 10))
    assert raw.scalars.get_column("wall_time").null_count() == raw.points  # no timestamps
    assert raw.scalars.filter(metric="train/nan_iterations", step=150).get_column("value")[0] == 1
    assert raw.scalars.filter(metric="test/loss").get_column("step").to_list() == [200]


def test_truncated_line_and_garbage_are_reported_not_fatal():
    findings = {f.code: f.message for f in REGISTRY["megatron"].read_at(RESTART).findings}
    assert "1 line looked like Megatron-LM log lines" in findings["unparsed-lines"]
    assert "line 31:  iteration      131/" in findings["unparsed-lines"]
    assert "1 of 69 lines hold bytes that are not UTF-8 (first at line 69)" in findings["not-utf8"]


def test_small_chunks_give_the_same_result(monkeypatch):
    whole = REGISTRY["megatron"].read_at(RESTART)
    monkeypatch.setattr(_lines, "CHUNK_BYTES", 700)
    chunked = REGISTRY["megatron"].read_at(RESTART)
    assert chunked.scalars.equals(whole.scalars)
    assert chunked.leg_starts == whole.leg_starts and chunked.facts == whole.facts


def test_megabyte_lines_and_an_empty_file(tmp_path):
    text = RAMP.joinpath("train.log").read_text()
    (tmp_path / "train.log").write_text("x" * 2_000_000 + "\n" + text + "|" * 1_000_000 + "\n")
    assert REGISTRY["megatron"].read_at(tmp_path).points == REGISTRY["megatron"].read_at(RAMP).points
    empty = tmp_path / "empty" / "train.log"
    empty.parent.mkdir()
    empty.write_text("")
    assert not REGISTRY["megatron"].finds(empty.parent)
    with pytest.raises(InputError, match="empty file"):
        REGISTRY["megatron"].read_at(empty)


def test_nan_loss_is_kept_and_a_word_for_a_number_is_reported(tmp_path):
    text = RAMP.joinpath("train.log").read_text()
    text = text.replace("lm loss: 9.189654E+00", "lm loss: NAN", 1)
    text = text.replace("grad norm: 0.850", "grad norm: oops", 1)
    (tmp_path / "train.log").write_text(text)
    raw = REGISTRY["megatron"].read_at(tmp_path)
    loss = raw.scalars.filter(metric="train/loss", step=10).get_column("value")[0]
    assert math.isnan(loss)  # as logged
    assert raw.scalars.filter(metric="train/grad_norm", step=20).is_empty()
    unparsed = next(f.message for f in raw.findings if f.code == "unparsed-lines")
    assert "1 line looked like" in unparsed and "iteration       20/" in unparsed


def test_a_unit_separator_on_the_first_line_of_a_chunk_is_cut_not_fatal(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"\x1fgarbage\n" + (RESTART / "train.log").read_bytes())
    assert REGISTRY["megatron"].read_at(log).scalars.height == REGISTRY["megatron"].read_at(RESTART).scalars.height


@pytest.mark.parametrize("chunk", [None, 2048])
def test_chunks_whose_other_lines_are_blank_read_as_the_log(tmp_path, monkeypatch, chunk):
    """The real log with blank and all-space lines between its train lines (as a job's
    launcher leaves them): where the scanner takes every train line of a chunk, what is left
    for the parsers is blank only; the points are the log's."""
    if chunk:
        monkeypatch.setattr(_lines, "CHUNK_BYTES", chunk)
    real = DATA / "text" / "megatron_ramp"
    spaced = []
    for index, line in enumerate((real / "train.log").read_text().splitlines()):
        spaced += [line, "", "   "] if index % 2 else [line]
    (tmp_path / "train.log").write_text("\n".join(spaced) + "\n")
    got = REGISTRY["megatron"].read_at(tmp_path).scalars.sort(pl.all())
    assert got.equals(REGISTRY["megatron"].read_at(real).scalars.sort(pl.all()))


def test_a_validation_pair_whose_name_is_damaged_is_skipped_and_said(tmp_path):
    """Malformed input, made here from the real log: NUL bytes between ``lm loss`` and
    ``value:`` of one validation line. Its loss has no name left: no point (never one with
    no metric), the line is named in the unparsed-lines warning, its PPL and every other
    evaluation are kept."""
    text = (RESTART / "train.log").read_bytes()
    line = next(t for t in text.split(b"\n") if b"validation loss at iteration 150" in t)
    damaged = line.replace(b"lm loss value:", b"lm loss \x00\x00\x00value:")
    (tmp_path / "train.log").write_bytes(text.replace(line, damaged))
    clean, run = rc.load(RESTART, cache=False), rc.load(tmp_path, cache=False)
    assert run.scalars.get_column("metric").null_count() == 0
    evals = {m: set(run.points_of(m).get_column("step").to_list()) for m in ("eval/loss",
                                                                           "eval/ppl")}
    before = {m: set(clean.points_of(m).get_column("step").to_list()) for m in evals}
    assert evals["eval/loss"] == before["eval/loss"] - {150}
    assert evals["eval/ppl"] == before["eval/ppl"] and 150 in evals["eval/ppl"]
    unparsed = [f for f in run.findings if f.code == "unparsed-lines"]
    assert len(unparsed) == 1 and "validation loss at iteration 150" in unparsed[0].message
    assert rc.compare([clean, run]).verdict.metric == "eval/loss"


def test_iterations_skipped_on_fp16_overflow_are_counted_and_said():
    # a real Megatron (NeMo MCore) fp16 run whose 5 iterations all overflowed while the loss
    # scale came down from 2^32 (tests/data/text/README.md): no update, no lm loss printed
    raw = REGISTRY["megatron"].read_at(DATA / "text" / "megatron_skipped")
    assert raw.facts["skipped_iterations"].value == 5
    (said,) = [f for f in raw.findings if f.code == "skipped-iterations"]
    assert "5 of the 5 iterations logged (1-5) were skipped" in said.message
    assert "0 updates were applied" in said.message
    samples = raw.scalars.filter(metric="train/consumed_samples").sort("step")
    assert samples.select("step", "value").rows()[-1] == (5, 160.0)  # consumed all the same


def test_a_run_without_skipped_iterations_says_nothing_of_them():
    for run in (RAMP, RESTART):
        raw = REGISTRY["megatron"].read_at(run)
        assert "skipped_iterations" not in raw.facts
        assert "skipped-iterations" not in [f.code for f in raw.findings]


def test_the_hierarchy_counts_the_updates_applied_after_skipped_iterations(cli):
    run = rc.load(DATA / "text" / "megatron_skipped")
    result = cli("inspect", DATA / "text" / "megatron_skipped")
    row = next(line for line in result.stdout.splitlines() if "updates applied" in line)
    assert row.split("│")[2].strip() == "0"  # 5 iterations, all 5 skipped
    assert "optimizer steps − 5 skipped" in row
    plain = cli("inspect", DATA / "text" / "megatron_restart")
    assert "updates applied" not in plain.stdout  # no run skipped: no such row
    assert run.optimizer_steps == 5
