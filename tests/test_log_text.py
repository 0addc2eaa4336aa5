"""Names from logs are shown as text everywhere (issue 15): a metric name holding terminal
escape sequences prints as escapes, one holding plotly's markup draws as those characters."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

from runcompare.display import plotly_text, terminal_text

from .conftest import SAMPLES

#: Clears the screen, then plants a terminal hyperlink (OSC 8) and reverses the text after it.
ESCAPES = "\x1b[2J\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\\u202egol"
#: A live link and a line break, as plotly's title markup reads them.
MARKUP = '<a href="http://evil.example/">loss</a><br>&amp;'


def renamed_loss(folder: Path, name: str) -> Path:
    """A real copy of sample_logs/attn whose trainer_state.json logs its loss as ``name``."""
    run = folder / "attn"
    shutil.copytree(SAMPLES / "attn", run)
    for extra in ("runs", "wandb", "train.log", "checkpoint-100"):  # one source: the state
        path = run / extra
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    state = json.loads((run / "trainer_state.json").read_text())
    for entry in state["log_history"]:
        if "loss" in entry:
            entry[name] = entry.pop("loss")
    (run / "trainer_state.json").write_text(json.dumps(state))
    return run


def test_the_helpers():
    assert terminal_text(ESCAPES) == (
        "\\x1b[2J\\x1b]8;;http://evil.example/\\x1b\\click\\x1b]8;;\\x1b\\\\u202egol")
    assert terminal_text("tab\there, é, 日本, emoji 🙂") == "tab\\x09here, é, 日本, emoji 🙂"
    assert plotly_text(MARKUP) == ('&lt;a href="http://evil.example/"&gt;loss&lt;/a&gt;'
                                   "&lt;br&gt;&amp;amp;")


def test_inspect_prints_escape_sequences_from_names_as_text(cli, tmp_path):
    run = renamed_loss(tmp_path, ESCAPES)
    result = cli("inspect", run, "--no-cache")
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert terminal_text(ESCAPES) in result.stdout


def test_the_summary_and_error_lines_print_names_as_text(cli, tmp_path):
    run = renamed_loss(tmp_path, ESCAPES)
    summary = cli(run, "--metric", ESCAPES, "--no-report", "--x", "step")
    assert summary.exit_code == 0, summary.stderr
    assert "\x1b" not in summary.stdout and f"{terminal_text(ESCAPES)} on step" in summary.stdout
    error = cli(run, "--metric", "nope", "--no-report")
    assert error.exit_code == 1 and "\x1b" not in error.stderr
    assert terminal_text(ESCAPES) in error.stderr


def test_a_static_figure_draws_a_markup_name_as_text(cli, tmp_path):
    run = renamed_loss(tmp_path, MARKUP)
    result = cli(run, "--metric", MARKUP, "-o", tmp_path / "r.html", "--svg", "--x", "step")
    assert result.exit_code == 0, result.stderr
    (figure,) = (tmp_path / "r").glob("*.svg")
    svg = figure.read_text()
    assert "<a " not in svg and "xlink:href" not in svg  # no live link
    title = re.search(r'<text class="gtitle"[^>]*>(.*?)</text>', svg).group(1)
    assert html.unescape(title) == f"{MARKUP} against optimizer steps"  # every character, as text
