"""Every registered format, from the registry: its name, its own test data and nobody else's,
``--source NAME``, and the one line the no-logs error lists for it."""

from __future__ import annotations

import importlib
import re

import pytest

from runcompare.sources import FORMATS, REGISTRY

from .conftest import DATA, ROOT, SAMPLES

FORMATS_DIR = ROOT / "src" / "runcompare" / "sources" / "formats"

#: One real log of each format, which no other format claims.
OWN = {
    "hf-trainer": DATA / "hf_v4_accum4" / "trainer_state.json",
    "tensorboard": DATA / "tensorboard" / "tf2",
    "wandb": DATA / "wandb" / "project" / "wandb" / "offline-run-20261129_101033-gb77sxtq",
    "wandb-export": DATA / "wandb_export" / "ui" / "by_step" / "train_loss.csv",
    "lightning": DATA / "lightning" / "lightning_logs" / "version_0",
    "mlflow": DATA / "mlflow" / "sqlite" / "mlflow.db",
    "llamafactory": DATA / "llamafactory" / "graduate_agent",
    "detectron2": DATA / "detectron2" / "output",
    "mmengine": DATA / "mmengine" / "mmpretrain_resnet50",
    "keras-csv": DATA / "keras_csv" / "voice_identification",
    "axolotl": DATA / "axolotl" / "axolotl.yml",
    "hf-stdout": SAMPLES / "attn" / "train.log",
    "megatron": DATA / "text" / "megatron_ramp" / "train.log",
    "nanogpt": DATA / "text" / "nanogpt" / "train.log",
    "torchtitan": DATA / "text" / "torchtitan" / "train.log",
    "fairseq": DATA / "fairseq" / "wav2vec2_hydra" / "hydra_train.log",
    "jsonl": DATA / "jsonl" / "plain" / "metrics.jsonl",
    "text": DATA / "text" / "kv" / "train.log",
}


def test_every_format_has_test_data_here():
    assert set(OWN) == set(REGISTRY)


@pytest.mark.parametrize("module", sorted(".".join(p.relative_to(FORMATS_DIR).with_suffix("").parts)
                                          for p in FORMATS_DIR.rglob("[!_]*.py")))
def test_every_format_module_is_registered_under_its_own_name(module):
    """A module in formats/ whose FORMAT is missing from the registry (or there under another
    object) fails here."""
    fmt = importlib.import_module(f"runcompare.sources.formats.{module}").FORMAT
    assert REGISTRY.get(fmt.name) is not None
    registered = REGISTRY[fmt.name]
    assert (registered.read, registered.files) == (fmt.read, fmt.files)
    assert len(FORMATS) == len(REGISTRY)  # no name twice


@pytest.mark.parametrize("name", list(REGISTRY))
def test_it_finds_its_own_data_and_nobody_elses(name):
    assert REGISTRY[name].finds(OWN[name])
    others = [other for other, path in OWN.items() if other != name and REGISTRY[name].finds(path)]
    assert others == []


@pytest.mark.parametrize("name", [n for n in REGISTRY if not REGISTRY[n].facts_only])
def test_source_name_reads_it_and_json_says_that_name(cli, name):
    run = cli.json("inspect", OWN[name], "--source", name, "--no-cache")
    runs = run if isinstance(run, list) else [run]
    assert {r["format"] for r in runs} == {name} and all(r["points"] > 0 for r in runs)


def test_a_facts_only_format_read_alone_says_it_found_no_points(cli):
    result = cli("inspect", OWN["axolotl"], "--source", "axolotl")
    assert result.exit_code == 1 and "only a configuration (axolotl)" in result.stderr


def test_the_no_logs_error_is_one_short_line_and_formats_lists_each_format(cli, tmp_path):
    (tmp_path / "notes.txt").write_text("nothing to see\n")
    result = cli("inspect", tmp_path)
    assert result.exit_code == 1
    assert result.stderr == (f"error: {tmp_path}: no training logs found; `runcompare formats` "
                             "lists what is read and where, --pattern REGEX reads other text "
                             "logs\n")
    listing = cli("formats")
    assert listing.exit_code == 0
    width = max(len(fmt.name) for fmt in FORMATS)
    assert listing.stdout.splitlines() == [f"{fmt.name:<{width}}  {fmt.describe}"
                                           for fmt in FORMATS]
    for fmt in FORMATS:
        assert "\n" not in fmt.describe and "``" not in fmt.describe
    assert cli.json("formats")[0] == {"name": "hf-trainer", "describe": FORMATS[0].describe}


def test_the_readme_names_every_format():
    """Renaming a format in its module alone fails here: users type the names the README shows."""
    table = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"^\| `([a-z0-9-]+)`(?:, `([a-z0-9-]+)`)? \|", table, re.MULTILINE))
    assert {name for pair in named for name in pair if name} == set(REGISTRY)
