"""Start-up: ``runcompare --help``, ``--version`` and ``batch`` (and ``import runcompare``)
load none of the heavy modules; each command imports the library where it is used. Checked in
a fresh interpreter, as a user's shell starts it. The times are in benchmarks/startup.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("polars", "pyarrow", "pandas", "plotly", "tensorboard", "numpy", "pydantic")
_PROBE = """
import json, sys
watched = set(json.loads(sys.argv[2]))
sys.argv = ["runcompare", *json.loads(sys.argv[1])]
code = 0
if sys.argv[1:] == ["<import>"]:
    import runcompare
else:
    from runcompare.cli import main
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
heavy = sorted({name.split(".")[0] for name in sys.modules} & watched)
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""

BATCH = ["batch", "--per-device", "8", "--world-size", "256", "--global-batch", "4096",
         "--seq-len", "1024", "--max-steps", "23842"]


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"], ["-V"], BATCH,
                                  [*BATCH, "--json"], ["compare", "--help"], ["<import>"]],
                         ids=" ".join)
def test_light_commands_import_no_heavy_module(args):
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(args), json.dumps(HEAVY)],
                          capture_output=True, text=True, check=True)
    result = json.loads(done.stderr.strip().splitlines()[-1])
    assert result == {"code": 0, "heavy": []}, done.stdout
    if args == BATCH:
        assert "100,000,595,968" in done.stdout


def test_inspect_imports_no_plotting_or_pandas():
    """Reading a run needs polars and numpy; not plotly, pandas, pyarrow (W&B histories) or
    tensorboard (whose protos the TensorBoard reader imports only for a text summary or an
    unusual tensor)."""
    from .conftest import SAMPLES

    done = subprocess.run([sys.executable, "-c", _PROBE,
                           json.dumps(["inspect", str(SAMPLES / "attn"), "--json", "--no-cache",
                                       "--source", "hf-trainer"]),
                           json.dumps(["plotly", "pandas", "tensorboard", "pyarrow"])],
                          capture_output=True, text=True, check=True)
    assert json.loads(done.stderr.strip().splitlines()[-1]) == {"code": 0, "heavy": []}
    assert json.loads(done.stdout)["name"] == "attn"


def _command(*args: str) -> subprocess.CompletedProcess[str]:
    """``runcompare ARGS`` as the installed command runs it (``python -m runcompare``)."""
    return subprocess.run([sys.executable, "-m", "runcompare", *args], capture_output=True,
                          text=True)


def test_command_exits_with_its_code_and_all_of_its_output():
    """The command skips the interpreter's teardown (``cli.console``): its output must still
    be whole and its exit code the command's."""
    from .conftest import SAMPLES

    done = _command("inspect", str(SAMPLES / "attn"), "--json", "--no-cache")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["name"] == "attn"  # the whole JSON, flushed
    missing = _command("inspect", str(SAMPLES / "no-such-run"))
    assert missing.returncode == 1
    assert missing.stderr.startswith(f"error: {SAMPLES / 'no-such-run'}: no such file")
    assert _command("--version").returncode == 0
    assert _command("compare", "--no-such-option").returncode == 2
