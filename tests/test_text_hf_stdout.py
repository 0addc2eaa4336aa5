"""The hf-stdout source on the real Trainer stdout (train.log) of the checked-in HF runs."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

import runcompare as rc
from runcompare.errors import InputError, MissingInfoError
from runcompare.legs import resolve_legs
from runcompare.sources import REGISTRY
from runcompare.sources.formats import _hf_stdout_dicts
from runcompare.sources.naming import canonical
from runcompare.sources.textlog import lines as _lines

from .conftest import DATA, SAMPLES

TEXT = DATA / "text"
RUNS = [SAMPLES / "attn", SAMPLES / "mamba", DATA / "hf_ddp", DATA / "hf_tokens",
        DATA / "hf_global32", DATA / "hf_resumed", DATA / "hf_resumed_noskip"]


def _state_points(run: Path) -> list[tuple[str, int, float]]:
    """(metric, step, value) of every log_history value, sorted (epoch repeats per entry)."""
    history = json.loads((run / "trainer_state.json").read_text())["log_history"]
    return sorted((canonical(k), e["step"], float(v)) for e in history
                  for k, v in e.items() if k != "step")


def _stdout_points(raw) -> list[tuple[str, int, float]]:
    kept, _ = resolve_legs(raw.scalars, starts=raw.leg_starts)
    return sorted(kept.select("metric", "step", "value").iter_rows())


def _keys(points: list[tuple[str, int, float]]) -> list[tuple[str, int]]:
    return [(m, s) for m, s, _ in points]


def _four_digits(printed: float, exact: float) -> bool:
    """``printed`` is ``exact`` written with 4 significant digits (transformers 5.x)."""
    if exact == 0 or not math.isfinite(exact):
        return printed == exact
    return abs(printed - exact) <= 0.5 * 10 ** (math.floor(math.log10(abs(exact))) - 3) * 1.0001


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_stdout_alone_gives_the_points_of_trainer_state_json(run):
    raw = REGISTRY["hf-stdout"].read_at(run)
    assert raw.source == "hf-stdout" and raw.step_unit == "optimizer"
    printed = _stdout_points(raw)
    # the Trainer logs total_flos in trainer_state.json but does not print it
    state = [p for p in _state_points(run) if p[0] != "train/total_flos"]
    assert _keys(printed) == _keys(state)
    wrong = [(p, s) for p, s in zip(printed, state) if not _four_digits(p[2], s[2])]
    assert wrong == []


def test_the_sample_run_loaded_from_stdout_only():
    run = rc.load(SAMPLES / "attn", source="hf-stdout", cache=False)
    assert run.format == "hf-stdout" and run.sources == ["hf-stdout"]
    loss = run.scalars.filter(metric="train/loss")
    assert loss.get_column("step").to_list() == list(range(5, 101, 5))
    assert loss.get_column("value")[0] == 5.531
    assert run.scalars.filter(metric="eval/loss").get_column("step").to_list() == [25, 50, 75, 100]
    batch = run.batch
    assert (batch.per_device_batch.value, batch.grad_accum.value, batch.global_batch.value) == \
        (2, 8, 16)
    assert batch.grad_accum.source == "train.log: Gradient Accumulation steps"
    assert run.facts["max_steps"].value == 100 and run.facts["max_steps"].kind == "logged"
    assert run.aliases["train/loss"] == "loss" and run.aliases["train/epoch"] == "epoch"


def test_ddp_world_size_follows_from_the_info_block():
    run = rc.load(DATA / "hf_ddp", source="hf-stdout", cache=False)
    assert run.batch.global_batch.value == 16
    assert run.batch.world_size.value == 2  # 16 / (4 per device × 2 accumulation)


def test_token_counter_becomes_the_tokens_axis():
    run = rc.load(DATA / "hf_tokens", source="hf-stdout", cache=False)
    last = run.frame(x="tokens").filter(metric="train/loss").sort("step").tail(1)
    assert last.select("step", "tokens").row(0) == (30, 30_720)


def test_resumed_run_has_two_legs_and_the_resume_step():
    raw = REGISTRY["hf-stdout"].read_at(DATA / "hf_resumed")
    assert raw.leg_starts == {1: 21}  # "Resuming training from checkpoint ... global step 20"
    legs = raw.scalars.filter(metric="train/loss").group_by("leg").agg(
        pl.col("step").min().alias("first"), pl.col("step").max().alias("last")).sort("leg")
    assert legs.rows() == [(0, 2, 30), (1, 22, 40)]
    run = rc.load(DATA / "hf_resumed", source="hf-stdout", cache=False)
    assert run.scalars.filter(metric="train/loss").get_column("step").to_list() == \
        list(range(2, 41, 2))
    assert {f.code for f in run.findings} >= {"duplicates-dropped"}


def test_summary_rates_are_facts_only_when_the_global_batch_is_not_printed(tmp_path):
    log = _without(SAMPLES / "attn", tmp_path, r"\[transformers\] .*= .*\n")
    raw = REGISTRY["hf-stdout"].read_at(log)
    assert "global_batch" not in raw.facts
    assert raw.facts["train_samples_per_second"].value == 149.1
    assert raw.facts["train_steps_per_second"].source == \
        "train.log: summary dict at step 100: train_steps_per_second"


def _without(run: Path, tmp_path: Path, pattern: str, replace: str = "") -> Path:
    """A copy of ``run``/train.log with every match of ``pattern`` replaced."""
    text = (run / "train.log").read_bytes().decode()
    out = tmp_path / run.name / "train.log"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(re.sub(pattern, replace, text).encode())
    return out


BAR = r"[^\r\n{]*\d+/\d+ \[[^\]]*\](?:\x1b\[A)?"


def test_without_bar_and_info_block_logging_steps_must_be_given(tmp_path):
    log = _without(SAMPLES / "attn", tmp_path, BAR + r"|\[transformers\][^\n]*\n")
    with pytest.raises(MissingInfoError, match=r"--set logging_steps=N"):
        REGISTRY["hf-stdout"].read_at(log)
    raw = REGISTRY["hf-stdout"].read_at(log, hints={"logging_steps": 5, "eval_steps": 25})
    assert _stdout_points(raw) == _stdout_points(REGISTRY["hf-stdout"].read_at(SAMPLES / "attn"))


def test_without_a_bar_logging_steps_follows_from_epochs_and_steps_per_epoch(tmp_path):
    log = _without(SAMPLES / "attn", tmp_path, BAR)
    raw = REGISTRY["hf-stdout"].read_at(log)
    message = next(f.message for f in raw.findings if f.code == "logging-steps-from-epoch")
    assert "logging_steps 5 inferred from the epoch advance" in message
    assert _stdout_points(raw) == _stdout_points(REGISTRY["hf-stdout"].read_at(SAMPLES / "attn"))


def test_without_eval_steps_an_eval_takes_the_step_of_the_train_log_with_its_epoch(tmp_path):
    log = _without(SAMPLES / "attn", tmp_path, BAR)
    raw = REGISTRY["hf-stdout"].read_at(log, hints={"logging_steps": "5"})  # --set gives strings
    evals = raw.scalars.filter(metric="eval/loss").get_column("step").to_list()
    assert evals == [25, 50, 75, 100]


def test_without_bar_and_info_block_a_resume_of_4x_counts_from_the_resume_step(tmp_path):
    log = _without(DATA / "hf_resumed", tmp_path, BAR)
    text = log.read_text().replace(
        "Resuming training from checkpoint with epoch 0 and global step 20",
        "Continuing training from global step 20")
    log.write_text(text)
    raw = REGISTRY["hf-stdout"].read_at(log, hints={"logging_steps": 2, "eval_steps": 10})
    assert raw.leg_starts == {1: 21}
    assert _stdout_points(raw) == _stdout_points(REGISTRY["hf-stdout"].read_at(DATA / "hf_resumed"))


def test_a_stated_logging_steps_wins_over_the_bar_and_the_disagreement_is_reported():
    """--set comes before what the log shows (README: priority); the bar's steps and the
    logged epoch both say that the stated value does not fit."""
    raw = REGISTRY["hf-stdout"].read_at(SAMPLES / "attn", hints={"logging_steps": 4})
    assert [f.code for f in raw.findings] == ["step-mismatch", "epoch-mismatch"]
    assert "using the logging_steps you stated" in raw.findings[0].message
    steps = raw.scalars.filter(metric="train/loss").get_column("step").to_list()
    assert steps == [4 * k for k in range(1, len(steps) + 1)]
    plain = REGISTRY["hf-stdout"].read_at(SAMPLES / "attn", hints={"logging_steps": 5})
    assert [f.code for f in plain.findings] == []  # the right value: nothing to say


def test_a_bar_over_micro_steps_is_divided_by_the_accumulation(tmp_path):
    log = _without(SAMPLES / "attn", tmp_path, r"(\d+)/100 \[",
                   lambda m: f"{int(m.group(1)) * 8}/800 [")  # type: ignore[arg-type]
    raw = REGISTRY["hf-stdout"].read_at(log)
    assert "bar-counts-micro-steps" in [f.code for f in raw.findings]
    assert _stdout_points(raw) == _stdout_points(REGISTRY["hf-stdout"].read_at(SAMPLES / "attn"))


def test_epoch_that_disagrees_with_the_steps_is_reported(tmp_path):
    log = _without(SAMPLES / "attn", tmp_path, BAR)  # a wrong logging_steps, nothing to check it
    raw = REGISTRY["hf-stdout"].read_at(log, hints={"logging_steps": 10, "eval_steps": 50})
    assert "epoch-mismatch" in [f.code for f in raw.findings]


def test_transformers_4x_numeric_dicts():
    raw = REGISTRY["hf-stdout"].read_at(TEXT / "hf4x_attn")
    points = _stdout_points(raw)
    state = [p for p in _state_points(SAMPLES / "attn") if p[0] != "train/total_flos"]
    assert _keys(points) == _keys(state)
    value = {(m, s): v for m, s, v in points}
    exact = {(m, s): v for m, s, v in state}
    assert value[("train/loss", 5)] == 5.5313 and value[("train/epoch", 5)] == 0.08
    assert value[("train/grad_norm", 5)] == exact[("train/grad_norm", 5)]  # full precision


def test_damaged_log_keeps_every_good_dict_and_reports_the_rest(tmp_path):
    log = _without(SAMPLES / "attn", tmp_path, r"\Z", "")
    with log.open("ab") as handle:
        handle.write(b"\xff\xfe\x00 binary \x80 junk\n" + b"x" * 3_000_000 + b"\n"
                     + b"{'loss': '2.1', 'grad_norm': \n{'loss': 'oops', 'epoch': '1.6'}\n")
    raw = REGISTRY["hf-stdout"].read_at(log)
    assert _stdout_points(raw) == _stdout_points(REGISTRY["hf-stdout"].read_at(SAMPLES / "attn"))
    codes = {f.code: f.message for f in raw.findings}
    assert "not-utf8" in codes
    assert re.search(r"2 lines looked like Trainer log dicts .*line 111: \{'loss': '2.1'.*line 112",
                     codes["unparsed-lines"])


def test_empty_file_and_a_file_without_dicts_are_input_errors(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(InputError, match="empty file"):
        REGISTRY["hf-stdout"].read_at(empty)
    plain = tmp_path / "plain.log"
    plain.write_text("hello\nworld\n")
    assert not REGISTRY["hf-stdout"].finds(plain)
    with pytest.raises(InputError, match="no Trainer log dict"):
        REGISTRY["hf-stdout"].read_at(plain)


def test_sniff_claims_train_log_but_not_wandb_copies(tmp_path):
    assert REGISTRY["hf-stdout"].files_at(SAMPLES / "attn") == [SAMPLES / "attn" / "train.log"]
    wandb = next((SAMPLES / "attn" / "wandb").glob("offline-run-*"))
    assert not REGISTRY["hf-stdout"].finds(wandb / "files" / "output.log") if (
        wandb / "files" / "output.log").exists() else True
    copy = tmp_path / "wandb" / "run-20260101_000000-abcd1234" / "files" / "output.log"
    copy.parent.mkdir(parents=True)
    shutil.copy(SAMPLES / "attn" / "train.log", copy)
    assert not REGISTRY["hf-stdout"].finds(copy)
    assert not REGISTRY["hf-stdout"].finds(SAMPLES / "attn" / "wandb")


def test_a_log_cut_right_after_a_dict_puts_it_one_logging_interval_on(tmp_path):
    text = (SAMPLES / "attn" / "train.log").read_bytes().decode()
    twelfth = [m.end() for m in re.finditer(r"\{'loss'[^}]*\}", text)][11]
    log = tmp_path / "train.log"
    log.write_bytes(text[:twelfth].encode() + b"\nKilled\n")
    raw = REGISTRY["hf-stdout"].read_at(log)
    assert raw.scalars.filter(metric="train/loss").get_column("step").to_list()[-2:] == [55, 60]
    assert {f.code for f in raw.findings} & {"step-from-interval", "logging-steps-from-epoch"}


def test_without_info_logging_a_restart_shows_as_the_bar_starting_again(tmp_path):
    log = _without(DATA / "hf_resumed", tmp_path, r"\[transformers\][^\n]*\n")
    raw = REGISTRY["hf-stdout"].read_at(log)
    assert raw.scalars.get_column("leg").unique().sort().to_list() == [0, 1]
    assert raw.leg_starts == {}  # the first step leg 1 logged (22) starts it
    assert _stdout_points(raw) == _stdout_points(REGISTRY["hf-stdout"].read_at(DATA / "hf_resumed"))


def test_buffered_stdout_dicts_in_blocks_are_counted_not_read_off_the_bar(tmp_path):
    """``python train.py > log`` without -u: stdout (the dicts) reaches the file in blocks,
    long after the stderr bar redraws that followed each of them."""
    text = (SAMPLES / "attn" / "train.log").read_bytes().decode()
    dicts = re.findall(r"\{'(?:loss|eval_loss)'[^}]*\}", text)
    rest = re.sub(r"\{'(?:loss|eval_loss)'[^}]*\}\n", "", text)
    cut = rest.index("Training completed")
    log = tmp_path / "train.log"
    log.write_bytes((rest[:cut] + "\n".join(dicts) + "\n" + rest[cut:]).encode())
    raw = REGISTRY["hf-stdout"].read_at(log)
    assert "stdout-buffered" in [f.code for f in raw.findings]
    assert _stdout_points(raw) == _stdout_points(REGISTRY["hf-stdout"].read_at(SAMPLES / "attn"))


def test_small_chunks_give_the_same_points(monkeypatch):
    whole = {run: _stdout_points(REGISTRY["hf-stdout"].read_at(run)) for run in RUNS[:1] + RUNS[-2:]}
    monkeypatch.setattr(_lines, "CHUNK_BYTES", 600)
    for run, points in whole.items():
        assert _stdout_points(REGISTRY["hf-stdout"].read_at(run)) == points


def test_beside_trainer_state_the_stdout_adds_facts_without_conflicts():
    run = rc.load(SAMPLES / "attn", cache=False)
    assert "hf-stdout" in run.sources and run.format != "hf-stdout"
    assert not [f for f in run.findings if f.code == "fact-conflict"]
    assert run.facts["steps_per_epoch"].source == "train.log: Num update steps per epoch"


def _regex_only(monkeypatch):
    monkeypatch.setattr(_hf_stdout_dicts, "_layout_dicts", lambda rows: None)


@pytest.mark.parametrize("run", RUNS + [TEXT / "hf4x_attn"], ids=lambda p: p.name)
def test_the_layout_fast_path_reads_what_the_regexes_read(run, monkeypatch):
    fast = REGISTRY["hf-stdout"].read_at(run)
    _regex_only(monkeypatch)
    slow = REGISTRY["hf-stdout"].read_at(run)
    assert sorted(fast.scalars.rows()) == sorted(slow.scalars.rows())
    assert fast.findings == slow.findings and fast.facts == slow.facts


def test_the_fast_path_leaves_odd_dicts_to_the_regexes(tmp_path, monkeypatch):
    lines = (SAMPLES / "attn" / "train.log").read_text().split("\n")
    odd = {"'loss': '": "'loss': 'x", "'grad_norm': '": "'grad_norm': ", "}": "}\r",
           "'epoch': '": "'epoch': '1, '", "{'loss'": "{'eval_loss': '1.5', 'loss'",
           "'learning_rate': '": "'learning_rate': '1,0"}
    damaged = []
    for index, line in enumerate(lines):
        old, new = list(odd.items())[index % 8] if index % 8 < len(odd) else ("", "")
        damaged.append(line.replace(old, new, 1) if old and "{'loss'" in line else line)
    log = tmp_path / "train.log"
    log.write_text("\n".join(damaged))
    fast = _outcome(log)
    _regex_only(monkeypatch)
    assert fast == _outcome(log)
    assert "unparsed-lines" in [f.code for f in fast[1]]


def _outcome(log: Path) -> tuple[object, ...]:
    raw = REGISTRY["hf-stdout"].read_at(log, hints={"logging_steps": 5})
    return sorted(raw.scalars.rows()), raw.findings, raw.facts, raw.leg_starts


def test_an_unreadable_dict_after_non_ascii_text_is_shown_from_its_brace(tmp_path):
    """Malformed input made from the real log: one dict, behind a note in Chinese, lost its
    closing brace. The warning quotes it from its ``{'`` (it was cut at a byte offset
    counted as characters: 8 characters into the dict)."""
    text = (DATA / "text" / "hf4x_attn" / "train.log").read_bytes()
    old = b"{'loss': 2.145, 'grad_norm': 0.9311892986297607, 'learning_rate': " \
          b"0.00018947368421052632, 'epoch': 1.48}"
    assert text.count(old) == 1
    (tmp_path / "train.log").write_bytes(text.replace(old, "训练日志 ".encode() + old[:-1]))
    run = rc.load(tmp_path, cache=False)
    unparsed = [f for f in run.findings if f.code == "unparsed-lines"]
    assert len(unparsed) == 1 and ": {'loss': 2.145, 'grad_norm': " in unparsed[0].message


def _pasted(tmp_path, *, blank_after_each=False, keep_train=None, head=""):
    """sample_logs/attn/train.log as text pasted from a terminal (each tqdm redraw a line, as
    \\r turns into a newline), without its INFO block; optionally with a blank line after every
    line (a paste from a web page) and only the first ``keep_train`` dicts (a paste cut short).
    Hand-made from the real log: the paste is the malformed input under test."""
    text = (SAMPLES / "attn" / "train.log").read_text(encoding="utf-8").replace("\r", "\n")
    lines, dicts = [], 0
    for line in text.split("\n"):
        if line.startswith("[transformers]"):
            continue
        if "{'" in line:  # an eval dict comes after a cursor code
            dicts += 1
            if keep_train is not None and dicts > keep_train:
                continue
        lines.append(line)
    out = head + ("\n\n" if blank_after_each else "\n").join(lines)
    path = tmp_path / "pasted.log"
    path.write_text(out, encoding="utf-8")
    return path


@pytest.mark.parametrize("blank", [False, True], ids=["pasted", "blank-after-each-line"])
def test_a_pasted_log_takes_the_bar_after_the_blank_lines_after_a_dict(tmp_path, blank):
    raw = REGISTRY["hf-stdout"].read_at(_pasted(tmp_path, blank_after_each=blank))
    loss = raw.scalars.filter(metric="train/loss").sort("step")
    # attn logs every 5 of 100 steps; the bars after the dicts say so
    assert loss.get_column("step").to_list() == list(range(5, 101, 5))
    assert _stdout_points(raw) == _stdout_points(REGISTRY["hf-stdout"].read_at(SAMPLES / "attn"))


def test_the_last_bar_past_the_last_dict_sets_the_steps_done_and_max_steps(tmp_path):
    # the first 16 dicts: 14 train logs (every 5 steps) and 2 evaluations, to step 70
    raw = REGISTRY["hf-stdout"].read_at(_pasted(tmp_path, keep_train=16))
    assert raw.scalars.get_column("step").max() == 70
    assert raw.facts["global_step"].value == 100
    assert "last count of the training bar (100/100)" in raw.facts["global_step"].source
    assert raw.facts["max_steps"].value == 100


def test_printed_training_arguments_give_the_steps_when_no_bar_does(tmp_path):
    text = (SAMPLES / "attn" / "train.log").read_text(encoding="utf-8")
    dicts = re.findall(r"\{'[^{}]*\}", text)
    # the dicts alone (a paste that lost every bar) after the run's own logging_steps and
    # eval_steps (5 and 25, tests/data/README.md) printed as TrainingArguments prints them
    head = "TrainingArguments(\n_n_gpu=1,\neval_steps=25,\nlogging_steps=5,\nmax_steps=100,\n)\n"
    (tmp_path / "bare.log").write_text("\n".join(dicts) + "\n")
    with pytest.raises(MissingInfoError, match="--set logging_steps=N"):
        REGISTRY["hf-stdout"].read_at(tmp_path / "bare.log")
    (tmp_path / "bare.log").unlink()
    (tmp_path / "train.log").write_text(head + "\n".join(dicts) + "\n")
    raw = REGISTRY["hf-stdout"].read_at(tmp_path / "train.log")
    assert _stdout_points(raw) == _stdout_points(REGISTRY["hf-stdout"].read_at(SAMPLES / "attn"))
    assert raw.facts["logging_steps"].value == 5
    assert "logging-steps-from-log" in [f.code for f in raw.findings]
