"""Shared fixtures: paths of the checked-in real logs and a CLI runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import runcompare as rc
from runcompare.cli import app

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
DATA = Path(__file__).resolve().parent / "data"
#: Logs, not tests: never collected (mmengine's config.py dumps there are Python files).
collect_ignore = ["data"]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Each test session caches into its own folder, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


class Cli:
    """Runs the real CLI in-process and keeps stdout and stderr apart."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str | Path):
        return self.runner.invoke(app, [str(a) for a in args], catch_exceptions=False,
                                  prog_name="runcompare")

    def json(self, *args: str | Path):
        result = self(*args, "--json")
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)


@pytest.fixture
def cli() -> Cli:
    return Cli()


@pytest.fixture(scope="session")
def sweep(tmp_path_factory: pytest.TempPathFactory):
    """The comparison of a generated 200-run sweep, read from its real-format logs
    (:mod:`tests.sweep`)."""
    from .sweep import write_sweep

    paths = write_sweep(tmp_path_factory.mktemp("sweep"), 200)
    return rc.compare(rc.load_many(paths, cache=False))  # before the per-test cache folder
