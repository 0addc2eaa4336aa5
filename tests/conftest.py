"""Shared fixtures: paths of the checked-in real logs and a CLI runner."""

from __future__ import annotations

import json
import random
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


def decimal_tokens(seed: int, wholes: tuple[str, ...]) -> list[str]:
    """Numbers a correctly rounding reader must read as ``float`` reads them (the native
    readers' _decimal.h): mantissas of 1 to 23 digits at every power of ten from 10^-360 to
    10^329 and a halfway point of 54 bits at each; fractions after one of ``wholes``, with
    leading zeros, of up to 24 digits, plain and cut by an exponent; the edges of the subnormal
    and overflow ranges."""
    rng = random.Random(seed)
    tokens = []
    for exponent in range(-360, 330):
        for digits in (1, 9, 16, 17, 18, 19, 23):
            mantissa = rng.randrange(10 ** (digits - 1), 10 ** digits)
            tokens += [f"{mantissa}e{exponent}", f"-{mantissa}E{exponent:+d}"]
        odd = 2**53 + 2 * rng.randrange(2**52) + 1
        tokens.append(f"{odd}e{exponent}")
    for _ in range(2000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 25)))
        zeros = "0" * rng.choice((0, 0, 1, 3, 8))
        whole = rng.choice(wholes)
        tokens += [f"{whole}.{zeros}{digits}", f"{whole}.{zeros}{digits}e-{rng.randrange(40)}"]
    return tokens + [
        "0.12345678", "0.1234567890123456", "0.00000000123456789012", "1.00000000",
        "0.0000000000000000000000", "9.9999999999999999999e307", "2.2250738585072011e-308",
        "2.2250738585072014e-308", "4.9406564584124654e-324", "1.7976931348623157e308",
        "1.7976931348623159e308"]


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
