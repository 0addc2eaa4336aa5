"""Which formats claim each folder of the checked-in real logs: a table written from what is
true of each (a format that starts claiming another's files, or stops finding its own, fails
here), with how many runs the folder is (``expand``: one root per run).

Every folder down to two levels below tests/data and sample_logs has a row (a new one must get
its row: :func:`test_every_folder_has_a_row`), and a few deeper ones that are runs of their own.
An empty set: no format reads the folder as given (``no training logs found``), each for a
reason its row's comment says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runcompare.errors import NoLogsFoundError
from runcompare.load import expand
from runcompare.sources import detect

from .conftest import DATA, SAMPLES

TOPS = {"DATA": DATA, "SAMPLES": SAMPLES}

#: (top, folder below it) -> (the formats ``detect`` finds there, the runs ``expand`` gives).
CLAIMS: dict[tuple[str, str], tuple[set[str], int]] = {
    # every run two levels down, of the formats that look that far
    ("DATA", "."): ({"detectron2", "fairseq", "hf-stdout", "hf-trainer", "jsonl", "llamafactory",
                     "megatron", "mmengine", "nanogpt", "tensorboard", "text", "torchtitan"}, 58),
    ("DATA", "axolotl"): ({"axolotl"}, 1),
    ("DATA", "batch_sweep"): ({"hf-stdout", "hf-trainer"}, 5),
    ("DATA", "batch_sweep/b16"): ({"hf-stdout", "hf-trainer"}, 1),
    ("DATA", "batch_sweep/b32"): ({"hf-stdout", "hf-trainer"}, 1),
    ("DATA", "batch_sweep/b4"): ({"hf-stdout", "hf-trainer"}, 1),
    ("DATA", "batch_sweep/b64"): ({"hf-stdout", "hf-trainer"}, 1),
    ("DATA", "batch_sweep/b8"): ({"hf-stdout", "hf-trainer"}, 1),
    ("DATA", "detectron2"): ({"detectron2"}, 1),
    ("DATA", "detectron2/output"): ({"detectron2"}, 1),
    ("DATA", "eval_rises"): ({"hf-trainer"}, 1),
    ("DATA", "eval_rises/whisper_ja"): ({"hf-trainer"}, 1),
    ("DATA", "fairseq"): ({"fairseq"}, 1),
    ("DATA", "fairseq/wav2vec2_hydra"): ({"fairseq"}, 1),
    ("DATA", "hf_ddp"): ({"hf-stdout", "hf-trainer", "tensorboard", "wandb"}, 1),
    ("DATA", "hf_ddp/checkpoint-30"): ({"hf-trainer"}, 1),
    ("DATA", "hf_ddp/runs"): ({"tensorboard"}, 1),
    ("DATA", "hf_ddp/wandb"): ({"wandb"}, 1),
    ("DATA", "hf_global32"): ({"hf-stdout", "hf-trainer", "tensorboard", "wandb"}, 1),
    ("DATA", "hf_global32/checkpoint-30"): ({"hf-trainer"}, 1),
    ("DATA", "hf_global32/runs"): ({"tensorboard"}, 1),
    ("DATA", "hf_global32/wandb"): ({"wandb"}, 1),
    ("DATA", "hf_resumed"): ({"hf-stdout", "hf-trainer", "tensorboard", "wandb"}, 1),
    ("DATA", "hf_resumed/checkpoint-20"): ({"hf-trainer"}, 1),
    ("DATA", "hf_resumed/checkpoint-40"): ({"hf-trainer"}, 1),
    ("DATA", "hf_resumed/runs"): ({"tensorboard"}, 1),
    ("DATA", "hf_resumed/wandb"): ({"wandb"}, 2),
    ("DATA", "hf_resumed_noskip"): ({"hf-stdout", "hf-trainer", "tensorboard", "wandb"}, 1),
    ("DATA", "hf_resumed_noskip/checkpoint-20"): ({"hf-trainer"}, 1),
    ("DATA", "hf_resumed_noskip/checkpoint-40"): ({"hf-trainer"}, 1),
    ("DATA", "hf_resumed_noskip/runs"): ({"tensorboard"}, 1),
    ("DATA", "hf_resumed_noskip/wandb"): ({"wandb"}, 2),
    ("DATA", "hf_seeds"): ({"hf-stdout", "hf-trainer", "tensorboard"}, 6),
    ("DATA", "hf_seeds/lr1e-3_seed1"): ({"hf-stdout", "hf-trainer", "tensorboard"}, 1),
    ("DATA", "hf_seeds/lr1e-3_seed2"): ({"hf-stdout", "hf-trainer", "tensorboard"}, 1),
    ("DATA", "hf_seeds/lr1e-3_seed3"): ({"hf-stdout", "hf-trainer", "tensorboard"}, 1),
    ("DATA", "hf_seeds/lr3e-3_seed1"): ({"hf-stdout", "hf-trainer", "tensorboard"}, 1),
    ("DATA", "hf_seeds/lr3e-3_seed2"): ({"hf-stdout", "hf-trainer", "tensorboard"}, 1),
    ("DATA", "hf_seeds/lr3e-3_seed3"): ({"hf-stdout", "hf-trainer", "tensorboard"}, 1),
    ("DATA", "hf_tokens"): ({"hf-stdout", "hf-trainer", "tensorboard", "wandb"}, 1),
    ("DATA", "hf_tokens/checkpoint-30"): ({"hf-trainer"}, 1),
    ("DATA", "hf_tokens/runs"): ({"tensorboard"}, 1),
    ("DATA", "hf_tokens/wandb"): ({"wandb"}, 1),
    ("DATA", "hf_v4_accum4"): ({"hf-stdout", "hf-trainer", "tensorboard"}, 1),
    ("DATA", "hf_v4_accum4/checkpoint-30"): ({"hf-trainer"}, 1),
    ("DATA", "hf_v4_accum4/runs"): ({"tensorboard"}, 1),
    ("DATA", "hf_wd0.1_adafactor"): ({"hf-stdout", "hf-trainer", "tensorboard"}, 1),
    ("DATA", "hf_wd0.1_adafactor/checkpoint-40"): ({"hf-trainer"}, 1),
    ("DATA", "hf_wd0.1_adafactor/runs"): ({"tensorboard"}, 1),
    ("DATA", "jsonl"): ({"jsonl"}, 3),
    ("DATA", "jsonl/diverged"): ({"jsonl"}, 1),
    ("DATA", "jsonl/plain"): ({"jsonl"}, 1),
    ("DATA", "jsonl/resumed"): ({"jsonl"}, 1),
    # keras-csv reads the folder given only (its training.log is one below)
    ("DATA", "keras_csv"): (set(), 0),
    ("DATA", "keras_csv/voice_identification"): ({"keras-csv"}, 1),
    ("DATA", "lightning"): ({"lightning"}, 2),
    ("DATA", "lightning/lightning_logs"): ({"lightning"}, 2),
    ("DATA", "llamafactory"): ({"hf-trainer", "llamafactory"}, 3),
    ("DATA", "llamafactory/graduate_agent"): ({"llamafactory"}, 1),
    ("DATA", "llamafactory/healthai"): ({"hf-trainer", "llamafactory"}, 1),
    # LLaMA-Factory's log of a prediction run: claimed, then refused when read
    ("DATA", "llamafactory/predict_only"): ({"llamafactory"}, 1),
    # mlflow looks for mlruns/ or mlflow.db at the folder given, not two below
    ("DATA", "mlflow"): (set(), 0),
    ("DATA", "mlflow/file_store"): ({"mlflow"}, 2),
    ("DATA", "mlflow/keras_autolog"): ({"mlflow"}, 1),
    ("DATA", "mlflow/sqlite"): ({"mlflow"}, 3),
    # TensorBoard's smoothed values as reference numbers: no log
    ("DATA", "smoothing"): (set(), 0),
    ("DATA", "tensorboard"): ({"tensorboard"}, 18),
    ("DATA", "mmengine"): ({"mmengine"}, 3),
    ("DATA", "mmengine/mmdet_rerun"): ({"mmengine"}, 1),
    ("DATA", "mmengine/mmpose_rtmpose_ear"): ({"mmengine"}, 1),
    ("DATA", "mmengine/mmpretrain_resnet50"): ({"mmengine"}, 1),
    ("DATA", "tensorboard/clu"): ({"tensorboard"}, 1),
    ("DATA", "tensorboard/damaged"): ({"tensorboard"}, 6),
    ("DATA", "tensorboard/flax"): ({"tensorboard"}, 1),
    ("DATA", "tensorboard/seeds"): ({"tensorboard"}, 3),
    ("DATA", "tensorboard/tb_typed"): ({"tensorboard"}, 1),
    ("DATA", "tensorboard/tb_writer"): ({"tensorboard"}, 1),
    ("DATA", "tensorboard/tf1"): ({"tensorboard"}, 1),
    ("DATA", "tensorboard/tf2"): ({"tensorboard"}, 1),
    ("DATA", "tensorboard/torch_new_style"): ({"tensorboard"}, 1),
    ("DATA", "tensorboard/torch_purge"): ({"tensorboard"}, 1),
    ("DATA", "tensorboard/torch_simple"): ({"tensorboard"}, 1),
    ("DATA", "text"): ({"hf-stdout", "megatron", "nanogpt", "text", "torchtitan"}, 10),
    ("DATA", "text/colon"): ({"text"}, 1),
    ("DATA", "text/hf4x_attn"): ({"hf-stdout"}, 1),
    ("DATA", "text/kv"): ({"text"}, 1),
    ("DATA", "text/megatron_ramp"): ({"megatron"}, 1),
    ("DATA", "text/megatron_restart"): ({"megatron"}, 1),
    ("DATA", "text/megatron_skipped"): ({"megatron"}, 1),
    ("DATA", "text/nanogpt"): ({"nanogpt"}, 1),
    # a log only --pattern reads
    ("DATA", "text/pattern"): (set(), 0),
    ("DATA", "text/seed_trainer"): ({"text"}, 1),
    ("DATA", "text/torchtitan"): ({"torchtitan"}, 1),
    ("DATA", "text/torchtitan_resume"): ({"torchtitan"}, 1),
    # the wandb/ folders are two below; W&B looks at the folder given and its wandb/
    ("DATA", "wandb"): (set(), 0),
    ("DATA", "wandb/legacy"): ({"wandb"}, 1),
    ("DATA", "wandb/project"): ({"wandb"}, 3),
    # the API history is one below, and W&B's (never a JSON-lines log); the panels two below
    ("DATA", "wandb_export"): (set(), 0),
    ("DATA", "wandb_export/api"): ({"wandb-export"}, 4),
    # the panel CSVs are one below, in a folder per x-axis
    ("DATA", "wandb_export/ui"): (set(), 0),
    ("SAMPLES", "."): ({"hf-stdout", "hf-trainer", "tensorboard"}, 2),
    ("SAMPLES", "attn"): ({"hf-stdout", "hf-trainer", "tensorboard", "wandb"}, 1),
    ("SAMPLES", "attn/checkpoint-100"): ({"hf-trainer"}, 1),
    ("SAMPLES", "attn/runs"): ({"tensorboard"}, 1),
    ("SAMPLES", "attn/wandb"): ({"wandb"}, 1),
    ("SAMPLES", "mamba"): ({"hf-stdout", "hf-trainer", "tensorboard", "wandb"}, 1),
    ("SAMPLES", "mamba/checkpoint-100"): ({"hf-trainer"}, 1),
    ("SAMPLES", "mamba/runs"): ({"tensorboard"}, 1),
    ("SAMPLES", "mamba/wandb"): ({"wandb"}, 1),
    # deeper folders that are runs (or run folders) of their own
    ("DATA", "wandb_export/ui/by_step"): ({"wandb-export"}, 2),
    ("DATA", "wandb_export/ui/by_global_step"): ({"wandb-export"}, 2),
    ("DATA", "lightning/lightning_logs/version_0"): ({"lightning"}, 1),
    ("DATA", "mlflow/file_store/mlruns"): ({"mlflow"}, 2),
    ("DATA", "mlflow/keras_autolog/mlruns"): ({"mlflow"}, 1),
    ("DATA", "wandb/project/wandb"): ({"wandb"}, 3),
    ("DATA", "wandb/legacy/wandb"): ({"wandb"}, 1),
    ("DATA", "tensorboard/torch_simple/1795948723.2991717"): ({"tensorboard"}, 1),
    ("DATA", "hf_ddp/runs/Nov29_10-07-11_vm"): ({"tensorboard"}, 1),
}


def _path(top: str, folder: str) -> Path:
    return TOPS[top] if folder == "." else TOPS[top] / folder


@pytest.mark.parametrize(("top", "folder"), list(CLAIMS), ids=lambda v: v)
def test_the_formats_that_claim_a_folder_and_its_runs(top, folder):
    formats, runs = CLAIMS[(top, folder)]
    path = _path(top, folder)
    if not formats:
        with pytest.raises(NoLogsFoundError):
            detect(path)
        return
    assert set(detect(path)) == formats
    assert len(expand(path)) == runs


def test_every_folder_has_a_row():
    """A folder added under tests/data or sample_logs (two levels down) without a row fails."""
    on_disk = {(top, "." if p == base else p.relative_to(base).as_posix())
               for top, base in TOPS.items()
               for p in [base, *base.glob("*"), *base.glob("*/*")] if p.is_dir()}
    written = {(top, folder) for top, folder in CLAIMS if folder.count("/") < 2}
    assert written == on_disk


def test_a_folder_of_runs_in_several_text_formats_gives_each_format_its_runs():
    """Text logs in run folders below: every text format found is kept beside the structured
    ones (was: dropped when its logs were in two or more run folders, and those runs lost)."""
    names = {name for _, name, _ in expand(DATA)}
    assert {"text/megatron_ramp", "text/torchtitan", "text/kv", "jsonl/plain"} <= names


#: Folders claimed and then refused on purpose when read (each has its own test).
REFUSED = {("DATA", "llamafactory/predict_only")}


@pytest.mark.parametrize(("top", "folder"),
                         [key for key, (formats, runs) in CLAIMS.items()
                          if formats and runs == 1 and key not in REFUSED], ids=lambda v: v)
def test_a_folder_claimed_as_one_run_is_read_by_each_format_that_claims_it(top, folder):
    """Each format that finds the one run at the folder reads it there (was: detectron2 and
    LLaMA-Factory found the one output folder below and then did not read it)."""
    path = _path(top, folder)
    for name, fmt in detect(path).items():
        raw = fmt.read_at(path)
        assert raw.source == name and (raw.points > 0 or fmt.facts_only)
        assert fmt.files_at(path), f"{name}: the cache would check no file of {path}"
