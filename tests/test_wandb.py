"""The W&B source against real run folders written by wandb (scripts/make_wandb_logs.py and
scripts/make_sample_logs.py). Damaged files are truncations or corruptions of those real files,
made here in tmp_path."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import polars as pl
import pytest

import runcompare as rc
from runcompare.errors import InputError
from runcompare.model import RAW_SCHEMA
from runcompare.sources import REGISTRY
from runcompare.sources.codecs.leveldb import BLOCK, read_records
from runcompare.sources.formats.wandb import run_folder as wandb
from runcompare.sources.formats.wandb._leg import Leg, decode_leg, wandb_file

DATA = Path(__file__).parent / "data"
PROJECT = DATA / "wandb" / "project"
LEGACY = DATA / "wandb" / "legacy"
SAMPLES = Path(__file__).parent.parent / "sample_logs"
#: What the HF Trainer puts in the W&B summary instead of the history (single values).
SUMMARY_ONLY = {"train/train_runtime", "train/train_samples_per_second",
                "train/train_steps_per_second", "train/train_loss", "train/total_flos"}


def folder(name: str) -> Path:
    """The first run folder of the run with display name ``name`` in the project."""
    for run in wandb.expand(PROJECT):
        if decode_leg(run).run.get("display_name") == name:
            return run
    raise LookupError(name)


def points(raw_or_run: rc.model.RawLog | rc.model.Run, metric: str) -> pl.DataFrame:
    frame = raw_or_run.scalars.filter(pl.col("metric") == metric)
    return frame.sort("step", maintain_order=True)


def codes(findings: list[rc.model.Finding]) -> list[str]:
    return [f.code for f in findings]


def test_plain_loop_is_on_log_calls_with_a_warning() -> None:
    raw = REGISTRY["wandb"].read_at(folder("plain"))
    assert raw.source == "wandb" and raw.name == "plain" and raw.step_unit == "log_call"
    warning = next(f for f in raw.findings if f.code == "step-is-log-call")
    assert warning.level == "warning" and "--set step_metric=" in warning.message
    assert "wandb.log() calls" in warning.message
    # 30 optimizer steps, eval logged in its own call every 10 steps: _step reaches 32
    loss, evals = points(raw, "train/loss"), points(raw, "eval/loss")
    assert loss.height == 30 and loss["step"].to_list()[:11] == [*range(10), 11]
    assert evals["step"].to_list() == [10, 21, 32]
    assert loss["value"][0] == pytest.approx(4 * 0.95)
    assert math.isnan(loss.filter(pl.col("step") == 17)["value"].item())  # step 17 → _step 17
    assert raw.scalars["wall_time"].null_count() == 0
    assert raw.scalars["wall_time"].min() > 1.7e9
    assert not raw.scalars["metric"].str.starts_with("_").any()


def test_step_metric_override() -> None:
    plain = folder("plain")
    raw = REGISTRY["wandb"].read_at(plain, hints={"step_metric": "_step"})
    assert raw.step_unit == "log_call" and "step-is-log-call" not in codes(raw.findings)
    with pytest.raises(InputError, match="step_metric 'nope' is not in the history"):
        REGISTRY["wandb"].read_at(plain, hints={"step_metric": "nope"})
    custom = REGISTRY["wandb"].read_at(folder("custom"), hints={"step_metric": "trainer/micro_step"})
    assert points(custom, "train/loss")["step"].to_list() == list(range(4, 84, 4))


def test_declared_step_metric_is_the_optimizer_step() -> None:
    raw = REGISTRY["wandb"].read_at(folder("custom"))
    assert raw.step_unit == "optimizer" and raw.name == "custom"
    assert "step-is-log-call" not in codes(raw.findings)
    assert "trainer/step" not in raw.scalars["metric"].to_list()
    assert points(raw, "train/loss")["step"].to_list() == list(range(1, 21))
    # eval logged without the step key: W&B filled in the last step
    evals = points(raw, "eval/loss")
    assert evals["step"].to_list() == [5, 10, 15, 20]
    assert evals["value"].to_list() == pytest.approx([5.0, 4.5, 4.0, 3.5])
    assert points(raw, "grad/norm")["value"][3] == pytest.approx(0.25)  # nested dict
    assert raw.facts["global_step"].value == 20


def test_nested_config_gives_batch_facts() -> None:
    facts = REGISTRY["wandb"].read_at(folder("custom")).facts
    assert facts["per_device_batch"].value == 4
    assert facts["per_device_batch"].source == "wandb config: optim.micro_batch_size"
    assert facts["grad_accum"].value == 4 and facts["seq_len"].value == 128
    assert facts["world_size"].value == 1 and facts["world_size"].kind == "config"
    run = rc.load(folder("custom"), source="wandb", cache=False)
    assert run.batch.global_batch.value == 16 and run.batch.tokens_per_step.value == 2048


def test_resumed_run_keeps_every_leg_and_load_keeps_the_last() -> None:
    legs = wandb.run_folders(folder("resumed"))
    assert len(legs) == 2 and {p.name.rsplit("-", 1)[1] for p in legs} == {"resumed0"}
    raw = REGISTRY["wandb"].read_at(legs[0])
    assert raw.scalars.group_by("leg").len().sort("leg")["len"].to_list() == [30, 20]
    assert REGISTRY["wandb"].read_at(legs[1]).points == 50  # either folder names the whole run
    run = rc.load(legs[0], source="wandb", cache=False)
    loss = points(run, "train/loss")
    assert loss["step"].to_list() == list(range(1, 41))
    assert loss.filter(pl.col("step") == 25)["value"].item() == pytest.approx(3 - 0.25 + 1)
    assert loss.filter(pl.col("step") == 20)["value"].item() == pytest.approx(3 - 0.20)
    assert "duplicates-dropped" in codes(run.findings)
    assert run.scalars["elapsed"].max() < run.scalars["wall_time"].max() - run.scalars[
        "wall_time"].min()  # the pause between the legs is not counted


def test_expand_gives_one_root_per_run_id() -> None:
    roots = wandb.expand(PROJECT)
    assert len(roots) == 3 and wandb.expand(PROJECT / "wandb") == roots
    assert not any(r.name == "latest-run" for r in roots)
    assert wandb.expand(roots[0]) == [roots[0]]
    runs = rc.load_many([PROJECT], source="wandb", cache=False)
    assert sorted(r.scalars.height for r in runs) == [40, 63, 64]
    # the latest-run link names the same run as its folder
    assert [p.resolve() for p in wandb.run_folders(PROJECT / "wandb" / "latest-run")] == \
        [p.resolve() for p in wandb.run_folders(folder("resumed"))]


def test_sniff_and_files() -> None:
    run = folder("plain")
    file = wandb_file(run)
    assert file is not None and file.suffix == ".wandb"
    assert wandb.sniff(PROJECT) and wandb.sniff(run) and wandb.sniff(file)
    assert not wandb.sniff(DATA / "hf_resumed" / "checkpoint-20") if (
        DATA / "hf_resumed" / "checkpoint-20").exists() else True
    assert len([f for f in wandb.files(folder("resumed")) if f.suffix == ".wandb"]) == 2


def test_output_lines_are_kept() -> None:
    assert "plain: done" in wandb.output_lines(folder("plain"))


def test_legacy_writer_side_files_and_json_dicts() -> None:
    raw = REGISTRY["wandb"].read_at(LEGACY)
    assert raw.step_unit == "log_call" and raw.name == "plain"
    assert points(raw, "opt/grad_norm")["value"][4] == pytest.approx(1 / 5)
    leg = decode_leg(wandb.run_folders(LEGACY)[0])
    assert leg.config_yaml["batch_size"] == 16 and leg.config_yaml["seq_len"] == 64
    assert leg.metadata["cpu_count"] >= 1


def test_a_summary_number_beyond_a_float_is_no_fact(tmp_path: Path) -> None:
    """The real legacy run with its wandb-summary.json edited by hand: a rate of 401 digits
    (JSON allows it) is no fact and no traceback; a plain one beside it is a fact."""
    target = tmp_path / "legacy"
    shutil.copytree(LEGACY, target)
    summary = wandb.run_folders(target)[0] / "files" / "wandb-summary.json"
    edited = {**json.loads(summary.read_text()), "train_samples_per_second": 10 ** 400,
              "train_steps_per_second": 2.5}
    summary.write_text(json.dumps(edited))
    facts = REGISTRY["wandb"].read_at(target).facts
    assert "train_samples_per_second" not in facts
    assert facts["train_steps_per_second"].value == 2.5


def test_side_files_alone_give_config_facts(tmp_path: Path) -> None:
    """A synced run folder without its .wandb file (a copy of the real one)."""
    source = wandb.run_folders(LEGACY)[0]
    target = tmp_path / "wandb" / source.name
    shutil.copytree(source, target)
    wandb_file(target).unlink()  # type: ignore[union-attr]
    leg = decode_leg(target)
    facts = wandb._facts([leg], pl.DataFrame(schema=RAW_SCHEMA), "_step")
    assert facts["seq_len"].value == 64
    assert facts["seq_len"].source == "wandb config.yaml: seq_len"


def test_gpu_count_is_only_a_world_size_hint() -> None:
    leg = Leg(folder=Path("x"), file=None, environment={"gpu_count": 8})
    fact = wandb._gpu_hint([leg])["world_size"]
    assert fact.value == 8 and fact.kind == "hint" and "hint" in fact.source
    assert wandb._gpu_hint([Leg(folder=Path("x"), file=None, environment={"gpu_count": 0})]) \
        == {}


HF_RUNS = [SAMPLES / "attn", SAMPLES / "mamba", *(DATA / n for n in (
    "hf_ddp", "hf_resumed", "hf_global32", "hf_tokens"))]


@pytest.mark.parametrize("path", HF_RUNS, ids=lambda p: p.name)
def test_hf_trainer_runs_read_from_wandb_alone_match_trainer_state(path: Path) -> None:
    if not (path / "wandb").is_dir() or not (path / "trainer_state.json").is_file():
        pytest.skip(f"{path} not generated")
    w = rc.load(path, source="wandb", cache=False)
    hf = rc.load(path, source="hf-trainer", cache=False)
    assert w.step_unit == "optimizer" and w.format == "wandb"
    cols = ["metric", "step", "value"]
    expected = hf.scalars.filter(~pl.col("metric").is_in(SUMMARY_ONLY)).select(cols).sort(cols)
    assert w.scalars.select(cols).sort(cols).equals(expected)
    for field in ("per_device_batch", "global_batch", "seq_len", "tokens_per_step"):
        assert getattr(w.batch, field).value == getattr(hf.batch, field).value, field
    # W&B's config adds what trainer_state.json lacks
    assert w.batch.grad_accum.value is not None
    assert w.batch.per_device_step * w.batch.data_parallel == w.batch.global_batch.value
    assert w.optimizer_steps == hf.optimizer_steps


def test_ddp_run_world_size_from_wandb() -> None:
    path = DATA / "hf_ddp"
    if not (path / "wandb").is_dir():
        pytest.skip("hf_ddp not generated")
    batch = rc.load(path, source="wandb", cache=False).batch
    assert (batch.per_device_batch.value, batch.grad_accum.value, batch.world_size.value,
            batch.global_batch.value) == (4, 2, 2, 16)


# --- damage: copies of a real file, cut or corrupted here -------------------------------------

def real_file(tmp_path: Path) -> tuple[Path, bytes]:
    run = folder("plain")
    target = tmp_path / "wandb" / run.name
    shutil.copytree(run, target)
    file = wandb_file(target)
    assert file is not None
    return file, file.read_bytes()


def damage(raw: rc.model.RawLog) -> rc.model.Finding:
    return next(f for f in raw.findings if f.code == "damaged-input")


def test_torn_last_chunk_keeps_complete_records(tmp_path: Path) -> None:
    file, data = real_file(tmp_path)
    records = read_records(data)
    cut = records.offsets[-1] + 9  # inside the last record
    file.write_bytes(data[:cut])
    raw = REGISTRY["wandb"].read_at(file.parent)
    finding = damage(raw)
    assert finding.level == "warning" and f"byte {records.offsets[-1]}" in finding.message
    assert "torn last chunk" in finding.message
    assert raw.points == 63  # the last record is the exit record, after the history


def test_zero_filled_tail(tmp_path: Path) -> None:
    file, data = real_file(tmp_path)
    file.write_bytes(data + bytes(BLOCK))
    raw = REGISTRY["wandb"].read_at(file.parent)
    assert f"byte {len(data)} (zero-filled tail" in damage(raw).message
    assert raw.points == 63


def test_bad_crc_drops_only_that_record(tmp_path: Path) -> None:
    file, data = real_file(tmp_path)
    records = read_records(data)
    history = [i for i, p in enumerate(records.payloads) if b"train/loss" in p and b"_step" in p]
    victim = records.offsets[history[5]]
    corrupt = bytearray(data)
    corrupt[victim + 20] ^= 0xFF
    file.write_bytes(bytes(corrupt))
    raw = REGISTRY["wandb"].read_at(file.parent)
    assert f"byte {victim} (CRC mismatch" in damage(raw).message
    assert raw.points == 63 - 2  # that log call's train/loss and train/lr


@pytest.mark.parametrize("content,message", [(b"", "is empty"),
                                             (b"not a wandb file at all", "no .wandb header")])
def test_unreadable_file_is_an_input_error(tmp_path: Path, content: bytes, message: str) -> None:
    file, _ = real_file(tmp_path)
    file.write_bytes(content)
    with pytest.raises(InputError, match=message):
        REGISTRY["wandb"].read_at(file.parent)


def test_no_wandb_run_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no W&B run found"):
        REGISTRY["wandb"].read_at(tmp_path)


def test_hf_end_of_training_values_come_from_the_summary_records() -> None:
    leg = decode_leg(wandb.run_folders(SAMPLES / "mamba" / "wandb")[0])
    final = json.loads((SAMPLES / "mamba" / "trainer_state.json").read_text())["log_history"][-1]
    assert leg.summary == {key: final[key] for key in (
        "train_samples_per_second", "train_steps_per_second", "total_flos")}
    # only the HF Trainer writes them; a run without its TrainingArguments is not searched
    assert decode_leg(folder("plain")).summary == {}
