"""Damaged and odd input that used to end in a traceback or to lose what was intact (issue:
damaged, hostile and odd input). Each test damages a copy of a real log in tests/data/."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

import runcompare as rc
from runcompare.sources import REGISTRY

from .conftest import DATA, SAMPLES

STATE = DATA / "hf_tokens" / "trainer_state.json"


def test_a_trainer_state_damaged_in_the_middle_keeps_the_entries_after_the_damage(tmp_path):
    text = STATE.read_text()
    history = json.loads(text)["log_history"]
    third = text.index("{", text.index('"log_history"') + 20)
    for _ in range(2):
        third = text.index("\n    {", third + 1)
    end = text.index("\n    }", third) + 6
    damaged = text[:third + 1] + "\0" * (end - third - 1) + text[end:]  # the third entry zeroed
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(damaged)
    raw = REGISTRY["hf-trainer"].read_at(folder)
    kept = {(m, s) for m, s in raw.scalars.select("metric", "step").rows()}
    lost = history[2]
    survivors = [e for i, e in enumerate(history) if i != 2]
    assert {("train/loss", e["step"]) for e in survivors if "loss" in e} <= kept
    assert ("train/loss", lost["step"]) not in kept or "loss" not in lost
    assert [f.code for f in raw.findings] == ["damaged-input"]
    assert f"kept the {len(survivors)} complete log_history entries" in raw.findings[0].message


def test_a_number_json_refuses_in_a_damaged_state_is_no_traceback(cli, tmp_path):
    text = STATE.read_text().replace('"global_step": 30', '"global_step": 0100')
    (tmp_path / "trainer_state.json").write_text(text)
    got = cli.json("inspect", tmp_path, "--no-cache")
    assert got["format"] == "hf-trainer" and got["points"] > 0
    assert "damaged-input" in [f["code"] for f in got["findings"]]


def test_json_nested_past_any_readers_depth_is_a_finding_not_a_traceback(cli, tmp_path):
    shutil.copytree(DATA / "tensorboard" / "tf2", tmp_path / "run")
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "run" / "history.json").write_text(deep)
    (tmp_path / "run" / "trainer_state.json").write_text('{"log_history": ' + deep + "}")
    got = cli.json("inspect", tmp_path / "run", "--no-cache")
    assert got["format"] == "tensorboard" and got["points"] > 0
    assert "source-unreadable" in [f["code"] for f in got["findings"]]


def test_a_metrics_csv_with_a_bare_carriage_return_in_its_header_is_a_clear_line(cli, tmp_path):
    version = tmp_path / "lightning_logs" / "version_0"
    shutil.copytree(DATA / "lightning" / "lightning_logs" / "version_0", version)
    text = (version / "metrics.csv").read_text()
    (version / "metrics.csv").write_bytes(text.replace(",", ",\r", 1).encode())
    result = cli("inspect", tmp_path, "--no-cache")
    assert result.exit_code == 1 and "no training logs found" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_nanogpt_log_cut_inside_its_first_iter_line(tmp_path):
    text = (DATA / "text" / "nanogpt" / "train.log").read_text()
    cut = text.index("iter 0:") + len("iter 0: lo")
    (tmp_path / "train.log").write_text(text[:cut])
    raw = REGISTRY["nanogpt"].read_at(tmp_path / "train.log")
    assert "global_step" not in raw.facts  # no iter was read
    assert raw.scalars.filter(pl.col("metric") == "train/loss").is_empty()


def test_a_progress_bar_count_past_64_bits_is_no_count(tmp_path):
    text = (SAMPLES / "attn" / "train.log").read_text()
    (tmp_path / "train.log").write_text(text.replace("| 7/100 [", "| 99999999999999999999999/100 [",
                                                     1))
    raw = REGISTRY["hf-stdout"].read_at(tmp_path / "train.log")
    assert raw.points == REGISTRY["hf-stdout"].read_at(SAMPLES / "attn" / "train.log").points
    run = rc.load(tmp_path / "train.log", cache=False)
    assert run.scalars.height > 0


def test_a_panel_run_name_holding_a_quote_keeps_its_points(tmp_path):
    """The real panel export with a run renamed to hold a `"` (written "" in the CSV)."""
    panel = DATA / "wandb_export" / "ui" / "by_global_step" / "train_loss.csv"
    (tmp_path / "train_loss.csv").write_text(panel.read_text().replace('"mamba - ', '"ma""mba - '))
    runs = {run.name: run for run in rc.load_many([tmp_path / "train_loss.csv"], cache=False)}
    plain = {run.name: run for run in rc.load_many([panel], cache=False)}
    assert set(runs) == {'ma"mba', "attn"}
    assert runs['ma"mba'].scalars.height == plain["mamba"].scalars.height > 0


def test_one_unreadable_run_of_a_logdir_is_skipped_with_a_finding(cli, tmp_path):
    shutil.copytree(DATA / "tensorboard" / "tf2", tmp_path / "a")
    shutil.copytree(DATA / "tensorboard" / "torch_simple", tmp_path / "b")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "events.out.tfevents.1.host").write_bytes(bytes(range(256)) * 20)
    runs = rc.load_many([tmp_path], cache=False)
    assert [r.name for r in runs] == ["a", "b"]  # not renamed after the logdir
    assert all("run-skipped" in [f.code for f in r.findings] for r in runs)
    assert "c was not read" in next(f for f in runs[0].findings if f.code == "run-skipped").message
    result = cli("inspect", tmp_path / "c", "--no-cache")  # alone: the clear line
    assert result.exit_code == 1 and "no readable TensorBoard event" in result.stderr


def _chunks(data: bytes) -> list[int]:
    """Offsets of the chunks of a sound .wandb file, walked by their headers."""
    from runcompare.sources.codecs.leveldb import BLOCK, HEADER

    at, found = len(HEADER), []
    while at + 7 <= len(data):
        left = BLOCK - at % BLOCK
        if left < 7:
            at += left
            continue
        length = int.from_bytes(data[at + 4:at + 6], "little")
        found.append(at)
        at += 7 + length
    return found


def test_a_wandb_chunk_header_damaged_mid_file_loses_only_its_chunk():
    """A flipped bit in a chunk's length, and a zeroed chunk header, in a copy of a real
    .wandb: the reader resyncs at the next sound chunk of the block."""
    from runcompare.sources.codecs.leveldb import read_records

    run = DATA / "wandb" / "project" / "wandb" / "offline-run-20261129_101033-gb77sxtq"
    data = (run / "run-gb77sxtq.wandb").read_bytes()
    whole = read_records(data).payloads
    chunks = _chunks(data)
    at = chunks[len(chunks) // 2]
    flipped = bytearray(data)
    flipped[at + 5] ^= 0x80  # the length's high byte: now past its block and the file
    zeroed = bytearray(data)
    zeroed[at:at + 7] = bytes(7)
    for damaged in (flipped, zeroed):
        records = read_records(bytes(damaged))
        assert records.payloads[-1] == whole[-1]  # read on to the end
        assert len(records.payloads) >= len(whole) - 2 and records.damage


def test_a_line_too_long_for_any_log_is_left_out_and_the_rest_read(tmp_path):
    """Hand-made (a malformed input): the sample's key=value lines with one line of 400,000
    pairs (5 MiB) among them, as a dumped array would print; it costs a second, not minutes."""
    lines = [f"step={i} loss={3 - i / 10:.2f} lr=3.0e-04" for i in range(1, 11)]
    lines.insert(5, "step=99 " + " ".join(f"k{i}={i}.5" for i in range(400_000)))
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    raw = REGISTRY["text"].read_at(log)
    assert raw.scalars.filter(metric="train/loss").get_column("step").to_list() == list(range(1, 11))
    assert raw.scalars.get_column("metric").n_unique() == 2
    message = {f.code: f.message for f in raw.findings}["overlong-lines"]
    assert "1 line longer than 4 MiB was not read (first: line 6, " in message


def test_a_batch_size_no_batch_can_be_is_not_a_fact(tmp_path):
    """train_batch_size edited to 1e-320, 2.5, Infinity, true: none is a micro-batch (1e-320
    made the global-batch inference divide into infinity and crash); the run reads and
    compares with the micro-batch unknown, as it would be without the field."""
    state = json.loads(STATE.read_text())
    for value in (1e-320, 2.5, float("inf"), True, -2):
        (tmp_path / "trainer_state.json").write_text(json.dumps({**state,
                                                                 "train_batch_size": value}))
        run = rc.load(tmp_path, cache=False)
        assert run.batch.per_device_batch.value is None, value
        assert rc.compare([run]).verdict.metric is not None
    (tmp_path / "trainer_state.json").write_text(json.dumps({**state, "train_batch_size": 2.0}))
    assert rc.load(tmp_path, cache=False).batch.per_device_batch.value == 2  # a whole float


def test_a_token_count_past_64_bits_is_no_count_not_a_negative_one(tmp_path):
    """num_input_tokens_seen edited to 1e308 at one step: cast to 64 bits it was -2⁶³ tokens,
    an invented number. It is no count: that step's tokens are unknown (no schedule gives
    them here), every other step keeps its tokens."""
    state = json.loads(STATE.read_text())
    step = next(e["step"] for e in state["log_history"] if "num_input_tokens_seen" in e)
    for entry in state["log_history"]:
        if entry["step"] == step and "num_input_tokens_seen" in entry:
            entry["num_input_tokens_seen"] = 1e308
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    clean, run = rc.load(STATE.parent, cache=False), rc.load(tmp_path, cache=False)

    def tokens(r):
        loss = r.points_of("train/loss")
        return dict(zip(loss.get_column("step").to_list(), loss.get_column("tokens").to_list()))

    assert tokens(clean)[step] == 5120 and tokens(run)[step] is None
    assert {s: t for s, t in tokens(run).items() if s != step} == {
        s: t for s, t in tokens(clean).items() if s != step}
    assert rc.compare([run], x="tokens").verdict.metric is not None


@pytest.mark.parametrize(("log", "old", "new"), [
    ("nanogpt/train.log", b"iter 10: loss", b"iter 99999999999999999999999: loss"),
    ("torchtitan/train.log", b"step: 10  ", b"step: 99999999999999999999999  "),
    ("megatron_restart/train.log", b"validation loss at iteration 150 |",
     b"validation loss at iteration 99999999999999999999999 |"),
])
def test_a_step_past_64_bits_is_one_bad_line_not_an_unreadable_log(tmp_path, log, old, new):
    """One step edited to 10^23 (a 64-bit integer holds 9.2 × 10^18): that line is named in
    the unparsed-lines warning and every other line is read (the whole log was refused with
    a polars conversion error, or a crash)."""
    source = DATA / "text" / log
    text = source.read_bytes()
    assert text.count(old) == 1
    (tmp_path / "train.log").write_bytes(text.replace(old, new))
    clean, run = rc.load(source.parent, cache=False), rc.load(tmp_path, cache=False)
    unparsed = [f for f in run.findings if f.code == "unparsed-lines"]
    assert len(unparsed) == 1 and new.decode().strip(" |") in unparsed[0].message
    lost = clean.scalars.height - run.scalars.height
    assert 0 < lost <= 12  # that line's numbers only
    assert run.scalars.get_column("step").max() == clean.scalars.get_column("step").max()


def test_a_rate_no_trainer_logs_infers_no_global_batch(tmp_path):
    """train_steps_per_second edited to 1e-320: samples ÷ steps per second is infinite (it
    crashed the global-batch inference), 1e-12 gives 7e12 sequences a step: neither is a
    global batch; the run reads and compares with it unknown."""
    state = json.loads(STATE.read_text())
    summary = next(e for e in reversed(state["log_history"]) if "train_steps_per_second" in e)
    for rate in (1e-320, 1e-12):
        summary["train_steps_per_second"] = rate
        (tmp_path / "trainer_state.json").write_text(json.dumps(state))
        run = rc.load(tmp_path, cache=False)
        assert run.batch.global_batch.value is None, rate
        assert rc.compare([run]).verdict.metric is not None
