"""The classes of other people's logs that were read wrong (issue: the peer corpus), each on
the project's real logs changed the way those logs differ. Where a test writes a log it says
so: hand-made excerpts of a format are marked, the rest are transformations of the real files
in tests/data/ and sample_logs/."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

import runcompare as rc
from runcompare.model import RAW_SCHEMA
from runcompare.resolve import resolve_batch
from runcompare.sources import REGISTRY
from runcompare.sources.formats.wandb import run_folder as wandb
from runcompare.sources.formats.wandb._leg import Leg

from .conftest import DATA, SAMPLES

ATTN_LOG = SAMPLES / "attn" / "train.log"


def _points(raw):
    return sorted(raw.scalars.select("metric", "step", "value").rows())


def _stdout(text, tmp_path, name="train.log"):
    log = tmp_path / name
    log.write_text(text, encoding="utf-8")
    return REGISTRY["hf-stdout"].read_at(log)


# -- 1. HF console logs ----------------------------------------------------------------------

def test_a_log_pasted_without_its_carriage_returns_reads_like_the_raw_one(tmp_path):
    """Each \\r redraw on a line of its own, as a terminal copy or a CI viewer leaves it."""
    raw = REGISTRY["hf-stdout"].read_at(ATTN_LOG)
    pasted = _stdout(ATTN_LOG.read_text(encoding="utf-8").replace("\r", "\n"), tmp_path)
    assert _points(pasted) == _points(raw)


def test_a_dict_pasted_right_after_its_own_bar_takes_that_bar(tmp_path):
    """What a terminal shows: the bar's last redraw, then the dict on the same line (the next
    bar only lines later): the dict's step is its own bar's count, not the next one's."""
    lines = []
    for line in ATTN_LOG.read_text(encoding="utf-8").splitlines():
        parts = [p.strip(" ") for p in line.split("\r") if p.strip()]
        out = []
        for part in parts:
            if part.startswith("{'") and out and "it/s]" in out[-1]:
                out[-1] += part  # glued to the bar printed just before it
            else:
                out.append(part)
        lines += out
    pasted = _stdout("\n".join(lines) + "\n", tmp_path)
    raw = REGISTRY["hf-stdout"].read_at(ATTN_LOG)
    assert _points(pasted) == _points(raw)
    assert "epoch-mismatch" not in [f.code for f in pasted.findings]


def _history_repr(run):
    return str(json.loads((run / "trainer_state.json").read_text())["log_history"])


def test_a_printed_log_history_and_train_output_are_not_new_entries(tmp_path):
    text = ATTN_LOG.read_text(encoding="utf-8")
    printed = (text + _history_repr(SAMPLES / "attn") + "\n"
               + "TrainOutput(global_step=100, training_loss=2.5, metrics={'train_runtime': "
               "8.5, 'train_samples_per_second': 188.2, 'train_steps_per_second': 11.76, "
               "'train_loss': 2.5, 'epoch': 1.56})\n")
    with_list = _stdout(printed, tmp_path)
    assert _points(with_list) == _points(REGISTRY["hf-stdout"].read_at(ATTN_LOG))
    assert "train/step" not in with_list.scalars.get_column("metric").to_list()


def _thinned_paste(text):
    """The log as a README paste often holds it: each \r redraw on a line of its own, and the
    bar redrawn right after each dict missing, so the next bar shown is steps later."""
    out, after_dict = [], False
    for line in text.replace("\r", "\n").splitlines():
        if after_dict and "it/s]" in line:
            after_dict = False
            continue
        if after_dict and not line.strip():
            continue
        after_dict = line.startswith("{'")
        out.append(line)
    return "\n".join(out) + "\n"


def test_a_printed_log_history_gives_the_steps_a_thinned_paste_lost(tmp_path):
    truth = _points(REGISTRY["hf-stdout"].read_at(ATTN_LOG))
    thinned = _thinned_paste(ATTN_LOG.read_text(encoding="utf-8"))
    assert _points(_stdout(thinned, tmp_path)) != truth  # the next bar is later: steps late
    with_list = _stdout(thinned + _history_repr(SAMPLES / "attn") + "\n", tmp_path)
    assert _points(with_list) == truth
    found = {f.code: f.message for f in with_list.findings}
    assert "log_history printed at line" in found["steps-from-log-history"]
    assert "epoch-mismatch" not in found


def test_a_printed_log_history_of_another_run_is_not_used(tmp_path):
    text = ATTN_LOG.read_text(encoding="utf-8")
    other = _history_repr(DATA / "hf_global32")
    raw = _stdout(text + other + "\n", tmp_path)
    assert _points(raw) == _points(REGISTRY["hf-stdout"].read_at(ATTN_LOG))
    assert "log-history-unmatched" in {f.code for f in raw.findings}


def test_dicts_that_carry_their_own_step_are_at_that_step(tmp_path):
    """Hand-made from real values: trainer_state.json's entries printed with their 'step' key
    and no progress bar (as TRL and custom callbacks print them)."""
    history = json.loads((SAMPLES / "attn" / "trainer_state.json").read_text())["log_history"]
    text = "".join(f"{entry}\n" for entry in history)
    raw = _stdout(text, tmp_path)
    steps = {(m, s) for m, s, _ in _points(raw)}
    expected = {("train/loss", e["step"]) for e in history if "loss" in e}
    assert expected <= steps and "train/step" not in {m for m, _ in steps}


# -- 2. folders of runs ----------------------------------------------------------------------

def test_a_folder_of_hf_output_dirs_beside_a_tensorboard_run_gives_every_run(tmp_path):
    for name in ("hf_global32", "hf_tokens"):
        shutil.copytree(DATA / name, tmp_path / name)
    shutil.copytree(DATA / "tensorboard" / "tf2", tmp_path / "tf2")
    runs = rc.load_many([tmp_path], cache=False, settings=["hf_tokens:seq_len=64"])
    assert sorted(r.name for r in runs) == ["hf_global32", "hf_tokens", "tf2"]
    assert {r.name: r.format for r in runs}["tf2"] == "tensorboard"
    both = rc.load_many([tmp_path / "hf_global32", tmp_path / "hf_tokens"], cache=False)
    assert [r.scalars.height for r in both] == [
        r.scalars.height for r in sorted(runs, key=lambda r: r.name) if r.name != "tf2"]


def test_a_sweeps_runs_come_in_the_order_people_count_them(tmp_path):
    # names with numbers in them: b4 before b16, lr_9 before lr_10 (not "b16" < "b4")
    sweep = rc.load_many([DATA / "batch_sweep"], cache=False)
    assert [r.name for r in sweep] == ["b4", "b8", "b16", "b32", "b64"]
    for name, seed in (("lr_10", "seed0"), ("lr_9", "seed1"), ("lr_1", "seed2")):
        shutil.copytree(DATA / "tensorboard" / "seeds" / seed, tmp_path / "tb" / name)
    for name, version in (("lr_10", "version_0"), ("lr_9", "version_1")):
        shutil.copytree(DATA / "lightning" / "lightning_logs" / version,
                        tmp_path / "pl" / name / version)
    tb = rc.load_many([tmp_path / "tb"], cache=False)
    assert [r.name for r in tb] == ["lr_1", "lr_9", "lr_10"]
    assert [r.format for r in tb] == ["tensorboard"] * 3
    pl_runs = rc.load_many([tmp_path / "pl"], cache=False)
    assert [r.name for r in pl_runs] == ["lr_9/version_1", "lr_10/version_0"]


def test_an_output_dir_holding_only_last_checkpoint_is_read(tmp_path):
    """The Hub's layout with hub_strategy='checkpoint': only last-checkpoint/ is pushed."""
    shutil.copytree(DATA / "hf_global32" / "checkpoint-30", tmp_path / "run" / "last-checkpoint")
    run = rc.load(tmp_path / "run", cache=False)
    state = json.loads((tmp_path / "run" / "last-checkpoint" / "trainer_state.json").read_text())
    assert run.name == "run" and run.scalars.get_column("step").max() == state["global_step"]


# -- 3. step units ---------------------------------------------------------------------------

def _events(folder, tags, steps):
    """An event file written by tensorboard's own EventFileWriter."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    for step in steps:
        values = [Summary.Value(tag=tag, simple_value=float(step) / (i + 1))
                  for i, tag in enumerate(tags)]
        writer.add_event(Event(wall_time=1e9 + step, step=step, summary=Summary(value=values)))
    writer.close()


def test_keras_epoch_tags_are_on_the_epoch_unit_and_its_marker_file_is_no_writer(tmp_path):
    """Tags as Keras names them (epoch_loss at step = epoch), with its profile-empty marker."""
    _events(tmp_path, ["epoch_loss", "epoch_accuracy"], range(10))
    _events(tmp_path, [], [])  # what Keras' profile-empty marker holds: no scalar
    raw = REGISTRY["tensorboard"].read_at(tmp_path)
    assert raw.step_unit == "epoch" and "step-is-epoch" in [f.code for f in raw.findings]
    assert "concurrent-writers" not in [f.code for f in raw.findings]
    run = rc.load(tmp_path, cache=False, source="tensorboard")
    loss = run.scalars.filter(pl.col("metric") == "epoch_loss")
    assert loss.get_column("epoch").to_list() == [float(s) for s in range(10)]
    assert loss.get_column("samples").null_count() == loss.height  # no schedule for epochs


def test_an_epoch_tag_is_the_epoch_axis(tmp_path):
    """Lightning's TensorBoardLogger logs ``epoch`` beside each metric."""
    _events(tmp_path, ["train_loss", "epoch"], range(0, 40, 4))
    run = rc.load(tmp_path, cache=False, source="tensorboard")
    assert "epoch" not in run.scalars.get_column("metric").to_list()
    loss = run.scalars.filter(pl.col("metric") == "train_loss")
    assert loss.get_column("epoch").to_list() == [s / 2 for s in range(0, 40, 4)]


# -- 4. batch facts --------------------------------------------------------------------------

def test_a_world_size_hint_is_shown_as_one_and_a_conflict_is_a_finding():
    hint = rc.Fact(8, "wandb-metadata.json: gpu_count (a hint)", "hint")
    facts = {"per_device_batch": rc.Fact(4, "config"), "grad_accum": rc.Fact(8, "config"),
             "world_size": hint}
    batch, findings = resolve_batch(facts)
    assert batch.global_batch.kind == "hint" and [f.code for f in findings] == ["batch-from-hint"]
    rates = {"train_samples_per_second": rc.Fact(33.646, "summary"),
             "train_steps_per_second": rc.Fact(0.263, "summary")}
    batch, findings = resolve_batch({**facts, **rates})
    assert batch.global_batch.value == 128 and batch.world_size.value == 4
    assert [f.code for f in findings] == ["hint-conflict"]


def test_wandb_rates_under_train_of_older_transformers_are_read():
    """transformers < 4.36 logged its end-of-training rates as train/train_*_per_second."""
    leg = Leg(folder=Path("x"), file=None,
              summary={"train/train_samples_per_second": 33.646,
                       "train/train_steps_per_second": 0.263})
    facts = wandb._facts([leg], pl.DataFrame(schema=RAW_SCHEMA), "_step")
    assert facts["train_samples_per_second"].value == 33.646
    assert facts["train_steps_per_second"].source == \
        "wandb summary: train/train_steps_per_second"


UNSLOTH = """==((====))==  Unsloth - 2x faster free finetuning | Num GPUs used = 1
   \\\\   /|    Num examples = 1,000 | Num Epochs = 1 | Total steps = 20
O^O/ \\_/ \\    Batch size per device = 2 | Gradient accumulation steps = 2
\\        /    Data Parallel GPUs = 1 | Total batch size (2 x 2 x 1) = 4
"""


def test_unsloths_banner_gives_the_batch_and_trl_num_tokens_the_tokens(tmp_path):
    """Hand-made excerpt: unsloth's banner (its print statement) and TRL-style dicts."""
    dicts = "".join(f"{{'loss': '{2 - k / 10:.4g}', 'num_tokens': '{k * 5120:.4g}', "
                    f"'step': {k * 5}, 'epoch': '{k / 4:.2f}'}}\n" for k in range(1, 5))
    log = tmp_path / "run" / "train.log"
    log.parent.mkdir()
    log.write_text(UNSLOTH + dicts, encoding="utf-8")
    run = rc.load(log.parent, cache=False)
    assert run.batch.per_device_batch.value == 2 and run.batch.grad_accum.value == 2
    assert run.batch.global_batch.value == 4 and "Total batch size" in run.batch.global_batch.source
    loss = run.scalars.filter(pl.col("metric") == "train/loss")
    assert loss.get_column("tokens").to_list() == [5120 * k for k in range(1, 5)]


# -- 5. text logs ----------------------------------------------------------------------------

def test_loss_and_train_loss_on_one_line_stay_two_metrics(tmp_path):
    """Hand-made excerpt of a generic key=value loop."""
    log = tmp_path / "train.log"
    log.write_text("".join(f"step={s} loss={3 - s / 10} train_loss={4 - s / 10}\n"
                           for s in range(1, 6)))
    raw = REGISTRY["text"].read_at(log)
    by = {m: len(v) for m, v in raw.scalars.group_by("metric").agg("value").rows()}
    assert by == {"train/loss": 5, "train/train_loss": 5}


def test_megatrons_memory_report_is_no_train_line(tmp_path):
    log = tmp_path / "train.log"
    lines = (DATA / "text" / "megatron_ramp" / "train.log").read_text().splitlines(True)
    at = next(i for i, line in enumerate(lines) if "iteration" in line and "lm loss" in line)
    lines.insert(at + 1, "[Rank 0] (after 10 iterations) memory (MB) | allocated: 9909.07 | "
                         "max allocated: 50277.15 | reserved: 53386.0 | max reserved: 53386.0\n")
    log.write_text("".join(lines))
    raw = REGISTRY["megatron"].read_at(log)
    assert "unparsed-lines" not in [f.code for f in raw.findings]
    assert _points(raw) == _points(REGISTRY["megatron"].read_at(DATA / "text" / "megatron_ramp"))


def test_a_megatron_line_cut_before_its_end_gives_no_value(tmp_path):
    text = (DATA / "text" / "megatron_ramp" / "train.log").read_text()
    last = list(re.finditer(r"lm loss: [\d.E+-]+", text))[-1]
    log = tmp_path / "train.log"
    log.write_text(text[:last.start() + len("lm loss: 8.")] + "\n")
    raw = REGISTRY["megatron"].read_at(log)
    losses = raw.scalars.filter(pl.col("metric") == "train/loss")
    whole = REGISTRY["megatron"].read_at(DATA / "text" / "megatron_ramp").scalars.filter(
        pl.col("metric") == "train/loss")
    assert losses.height == whole.filter(pl.col("step") < losses.get_column("step").max() + 1
                                         ).height and 8.0 not in losses.get_column("value")


@pytest.mark.parametrize("cut", ["loss=2.2", "lr 3.0", "tokens 13"])
def test_a_key_value_log_cut_inside_a_number_at_its_end_gives_no_value(tmp_path, cut):
    """Hand-made key=value log whose last line a killed run left cut."""
    log = tmp_path / "train.log"
    body = "".join(f"step={s} loss=2.{s}95 lr 3.00e-04 tokens 1310720\n" for s in range(1, 4))
    log.write_text(body + f"step=4 {cut}")
    raw = REGISTRY["text"].read_at(log)
    assert raw.scalars.get_column("step").max() == 3
    assert [f.code for f in raw.findings if f.code == "damaged-input"] == ["damaged-input"]


def test_nanogpt_forks_that_print_a_unit_and_the_older_tokens_line(tmp_path):
    text = (DATA / "text" / "nanogpt" / "train.log").read_text()
    fork = re.sub(r"(loss [\d.]+)(,)", r"\1 BPC\2", text)
    fork = fork.replace("tokens per iteration will be: 16,384",
                        "total number of tokens per iteration: 16384")
    log = tmp_path / "train.log"
    log.write_text(fork)
    raw = REGISTRY["nanogpt"].read_at(log)
    plain = REGISTRY["nanogpt"].read_at(DATA / "text" / "nanogpt")
    assert _points(raw) == _points(plain) and raw.facts["tokens_per_step"].value == 16384


# -- 8. clear refusals -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["trainer_state.json", "train.log",
                                  "events.out.tfevents.1.host"])
def test_a_git_lfs_pointer_says_it_is_one(cli, tmp_path, name):
    """Hand-made: the pointer file git writes in place of an LFS object."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / name).write_text("version https://git-lfs.github.com/spec/v1\noid sha256:"
                               + "0" * 64 + "\nsize 12345\n")
    result = cli("inspect", folder / name if name == "train.log" else folder, "--no-cache")
    assert result.exit_code == 1 and "Git LFS pointer" in result.stderr
    assert "git lfs pull" in result.stderr and "Traceback" not in result.stderr



# -- 6. W&B exports --------------------------------------------------------------------------

PANEL = DATA / "wandb_export" / "ui" / "by_global_step" / "train_loss.csv"


def test_a_panel_the_web_app_cut_at_its_row_limit_says_so(tmp_path):
    """The real panel export, its rows repeated on further steps up to the app's 10,000."""
    header, *rows = PANEL.read_text().splitlines()
    values = [row.split(",", 1)[1] for row in rows]
    body = [f'"{5 * (i + 1)}",{values[i % len(values)]}' for i in range(10_000)]
    (tmp_path / "train_loss.csv").write_text("\n".join([header, *body]) + "\n")
    runs = rc.load_many([tmp_path / "train_loss.csv"], cache=False)
    assert all("panel-cut" in [f.code for f in run.findings] for run in runs)
    assert "panel-cut" not in [f.code for run in rc.load_many([PANEL], cache=False)
                               for f in run.findings]


def test_a_panel_on_an_epoch_axis_is_on_the_epoch_unit(tmp_path):
    """The real panel export with its x-axis renamed as a Keras or Lightning run's epoch."""
    header, *rows = PANEL.read_text().splitlines()
    epochs = [f'"{i}",' + row.split(",", 1)[1] for i, row in enumerate(rows)]
    (tmp_path / "loss.csv").write_text("\n".join(['"epoch"' + header[len('"train/global_step"'):],
                                                  *epochs]) + "\n")
    run = rc.load_many([tmp_path / "loss.csv"], cache=False)[0]
    assert run.step_unit == "epoch" and "step-is-epoch" in [f.code for f in run.findings]


# -- 7. names --------------------------------------------------------------------------------

def test_runs_of_one_folder_name_get_names_from_their_paths_that_set_accepts(cli, tmp_path):
    """lightning_logs/version_0 of two projects (copies of the real Lightning run)."""
    for project in ("proj_a", "proj_b"):
        shutil.copytree(DATA / "lightning" / "lightning_logs" / "version_0",
                        tmp_path / project / "lightning_logs" / "version_0")
    paths = [tmp_path / p / "lightning_logs" / "version_0" for p in ("proj_a", "proj_b")]
    runs = rc.load_many(paths, cache=False,
                        settings=["proj_a/lightning_logs/version_0:world_size=3"])
    assert [r.name for r in runs] == ["proj_a/lightning_logs/version_0",
                                      "proj_b/lightning_logs/version_0"]
    assert runs[0].batch.world_size.value == 3
    assert runs[1].batch.world_size.value != 3
    result = cli(paths[0], paths[1], "--no-report", "--set", "version_0:world_size=2")
    assert result.exit_code == 2 and "names 2 runs" in result.stderr
    assert "proj_a/lightning_logs/version_0" in result.stderr


# -- 8. clear refusals (continued) -----------------------------------------------------------

def test_runs_with_no_metric_in_common_are_refused_listing_what_each_has(cli, tmp_path):
    _events(tmp_path / "keras", ["epoch_loss"], range(5))
    result = cli(DATA / "tensorboard" / "tf2", tmp_path / "keras", "--no-report")
    assert result.exit_code == 1 and "share no metric to compare" in result.stderr
    assert "tf2: train/grad_norm, train/loss" in result.stderr
    assert "keras: epoch_loss" in result.stderr and "Traceback" not in result.stderr


def test_a_wandb_run_that_logged_nothing_yet_says_so(cli, tmp_path):
    """The real run's .wandb cut before its first history record, as a run killed before its
    first wandb.log leaves it."""
    run = DATA / "wandb" / "project" / "wandb" / "offline-run-20261129_101033-gb77sxtq"
    copy = tmp_path / "wandb" / run.name
    shutil.copytree(run, copy)
    data = (copy / "run-gb77sxtq.wandb").read_bytes()
    (copy / "run-gb77sxtq.wandb").write_bytes(data[:data.find(b"_step") - 64])
    got = cli.json("inspect", tmp_path, "--no-cache")
    assert got["points"] == 0 and "no-history" in [f["code"] for f in got["findings"]]


def test_checkpoints_of_another_run_in_one_folder_are_a_finding(tmp_path):
    """A real run's folder with another real run's checkpoint saved into it."""
    shutil.copytree(DATA / "hf_tokens", tmp_path / "run")
    shutil.copytree(DATA / "hf_global32" / "checkpoint-30", tmp_path / "run" / "checkpoint-99")
    raw = REGISTRY["hf-trainer"].read_at(tmp_path / "run")
    assert [f.code for f in raw.findings] == ["mixed-runs"]
    assert "(checkpoint-99) hold a log history that is not the start of" in \
        raw.findings[0].message
    assert REGISTRY["hf-trainer"].read_at(DATA / "hf_tokens").findings == []
