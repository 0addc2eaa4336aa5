"""The habits a command line is expected to have, each with its exact message: --version/-V,
-h, readable metavars, "did you mean", -q/-v, NO_COLOR, --json that prints only JSON, an
unknown export suffix, a summary kept when a figure format fails, the axis fallback said."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import runcompare as rc

from .conftest import DATA, SAMPLES

RUNS = (SAMPLES / "mamba", SAMPLES / "attn")
_COLOUR = re.compile(r"\x1b\[[0-9;]*(3[0-7]|9[0-7])(;[0-9]+)*m")


def _error(result, code, message):
    assert (result.exit_code, result.stderr) == (code, f"error: {message}\n"), result.stdout


def test_version_long_and_short(cli):
    for flag in ("--version", "-V"):
        result = cli(flag)
        assert (result.exit_code, result.stdout) == (0, f"runcompare {rc.__version__}\n")


def test_h_is_help_everywhere_with_readable_metavars(cli):
    assert cli("-h").stdout == cli("--help").stdout
    assert "Usage: runcompare [OPTIONS] COMMAND [ARGS]..." in cli("-h").stdout
    compare = cli("compare", "-h").stdout
    assert compare.startswith("Usage: runcompare compare [OPTIONS] RUN...\n")
    for line in ("  RUN...  Run folders or log files.  [required]", "  --x AXIS ",
                 "  --metric METRIC ", "  --set [RUN:]KEY=VALUE ", "  --source NAME ",
                 "  -o, --output FILE ", "  -q, --quiet ", "  -v, --verbose ",
                 "  -h, --help "):
        assert line in compare, line
    assert not re.search(r"<(str|int|float|path|list)", compare) and "list[" not in compare
    assert cli("inspect", "-h").stdout.startswith("Usage: runcompare inspect [OPTIONS] RUN\n")
    assert "  --per-device, --per-device-batch N\n" in cli("batch", "-h").stdout
    assert "  -o, --output PATH " in cli("export", "-h").stdout


def test_the_help_says_compare_is_the_default_command(cli):
    """``runcompare -h`` says that ``runcompare RUN...`` is ``runcompare compare RUN...``, and
    it is: the same summary from both (issue 33)."""
    text = " ".join(cli("-h").stdout.split())
    assert ("compare is the default command: runcompare RUN... is runcompare compare RUN... "
            "(runcompare compare -h lists its options)") in text
    assert " compare Compare runs (the default command: " in text
    bare, named = cli(*RUNS, "-q", "--no-report"), cli("compare", *RUNS, "-q", "--no-report")
    assert bare.exit_code == named.exit_code == 0
    assert bare.stdout == named.stdout and "eval/loss" in bare.stdout


def test_batch_help_documents_only_its_own_options(cli):
    """``batch -h`` named --from and --budget, which only ``plan`` has (issue 33); it points
    to plan instead, and neither flag is taken."""
    text = cli("batch", "-h").stdout
    assert "--from" not in text and "--budget" not in text
    assert "For a token budget or a run's measured speed, see runcompare plan." in " ".join(
        text.split())
    for flag in ("--from", "--budget"):
        result = cli("batch", "--per-device", "8", "--world-size", "2", "--grad-accum", "1",
                     flag, "x")
        assert result.exit_code == 2 and f"No such option: {flag}" in result.stderr
    plan = cli("plan", "-h").stdout
    assert "--from RUN" in plan and "--budget TOKENS" in plan


_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _help_parts(text):
    """A command's help: the description (before Arguments/Options) and the options' part;
    a flag that click wrapped at a hyphen (``--global-`` / ``batch``) joined again."""
    head, _, options = re.sub(r"-\n +", "-", text).partition("\nOptions:\n")
    return head.split("\nArguments:\n")[0], options


def test_every_commands_help_documents_its_own_options(cli):
    """Each command's -h (issue 33: batch's named --from and --budget, plan's): every option
    has a help line and is shown; every --flag in the options' help is the command's own;
    one in the description is its own or another command's (a pointer, "for --source of the
    commands that read runs"); the top-level help names only its own and compare's."""
    from typer.main import get_command

    from runcompare.cli import app

    group = get_command(app)
    every = {o for c in group.commands.values() for p in c.params for o in (*p.opts,
                                                                        *p.secondary_opts)}
    for name, command in group.commands.items():
        text = cli(name, "-h").stdout
        own = {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
        description, options = _help_parts(text)
        assert set(_FLAG.findall(options)) <= own, name
        assert set(_FLAG.findall(description)) <= own | every, name
        for param in command.params:
            if param.param_type_name == "option":
                assert param.help, (name, param.opts)
                assert all(opt in options for opt in param.opts), (name, param.opts)
    top = cli("-h").stdout
    allowed = {o for p in group.params for o in p.opts} | {"--help"} | {
        o for p in group.commands["compare"].params for o in p.opts}
    assert set(_FLAG.findall(top)) <= allowed
    assert "  --per-device, --per-device-batch N" in cli("batch", "-h").stdout


def test_a_mistyped_command_suggests_the_command(cli):
    _error(cli("expor", *RUNS), 2, "'expor' is neither a command nor a path; did you mean "
           "'export'? (runcompare -h lists the commands)")


def test_a_path_named_like_a_command_is_still_a_run(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "expor").mkdir()
    _error(cli("expor"), 1, "expor: no training logs found; `runcompare formats` lists what is "
           "read and where, --pattern REGEX reads other text logs")


def test_did_you_mean_axis_metric_key_source_and_format(cli, tmp_path):
    _error(cli(*RUNS, "--x", "toknes"), 2, "unknown axis 'toknes'; did you mean 'tokens'? "
           "choose one of step, micro_step, samples, tokens, epoch, elapsed, wall_time, flops, "
           "device_hours")
    result = cli(*RUNS, "--metric", "loss", "--no-report")
    assert result.exit_code == 1 and result.stderr.startswith(
        "error: no run logged metric 'loss'; did you mean 'eval/loss' or 'train/loss'? "
        "available: eval/loss, eval/runtime, ")
    result = cli(*RUNS, "--set", "seqlen=64")
    assert result.exit_code == 2 and result.stderr.startswith(
        "error: --set: unknown key 'seqlen'; did you mean 'seq_len'? known keys: "
        "per_device_batch, grad_accum, ")
    result = cli("inspect", SAMPLES / "attn", "--source", "tensorbord")
    assert result.exit_code == 2 and result.stderr.startswith(
        "error: unknown source 'tensorbord'; did you mean 'tensorboard'? choose one of "
        "hf-trainer, tensorboard, ")
    assert result.stderr.endswith(" (runcompare formats lists them)\n")
    _error(cli("export", *RUNS, "-o", tmp_path / "x", "--format", "jsnl"), 2,
           "unknown export format 'jsnl'; did you mean 'jsonl'? choose one of parquet, csv, "
           "jsonl, tensorboard")


def test_an_unknown_export_suffix_is_an_error_listing_the_formats(cli, tmp_path):
    out = tmp_path / "x.xlsx"
    _error(cli("export", *RUNS, "-o", out), 2,
           f"{out}: unknown export suffix '.xlsx'; name the output .parquet, .pq, .csv, .jsonl "
           "or .ndjson (a folder without a suffix is parquet), or pass --format parquet, csv, "
           "jsonl or tensorboard")
    assert not out.exists()


def test_quiet_prints_only_the_result(cli, tmp_path):
    compare = cli(*RUNS, "-q", "-o", tmp_path / "r.html")
    comparison = rc.compare(rc.load_many(RUNS))
    assert (compare.exit_code, compare.stdout, compare.stderr) == (0, f"{comparison}\n", "")
    assert (tmp_path / "r.html").is_file()
    inspect = cli("inspect", SAMPLES / "attn", "-q")
    attn = rc.load(SAMPLES / "attn")
    assert inspect.stdout == (f"attn (hf-trainer): 100 optimizer steps, {attn.scalars.height} "
                              f"points of {len(attn.metrics)} metrics, global batch 16, 1,024 "
                              f"tokens/step, {len(attn.findings)} findings\n")
    export = cli("export", *RUNS, "-o", tmp_path / "runs.csv", "-q")
    assert (export.exit_code, export.stdout) == (0, "")
    assert (tmp_path / "runs.csv").is_file()


def test_verbose_adds_where_each_axis_comes_from_and_every_finding(cli, tmp_path):
    plain = cli(*RUNS, "--no-report").stdout
    loud = cli(*RUNS, "--no-report", "-v").stdout
    assert loud.startswith(plain)
    extra = loud[len(plain):]
    assert "attn: tokens from schedule: step × tokens_per_step\n" in extra
    assert "info [sources-merged] attn: points from hf-trainer;" in extra
    files = cli("export", *RUNS, "-o", tmp_path / "runs.parquet", "-v").stdout.splitlines()
    assert files[1:] == [str(tmp_path / "runs.parquet" / "run=mamba" / "part-0.parquet"),
                         str(tmp_path / "runs.parquet" / "run=attn" / "part-0.parquet")]


def test_json_prints_only_json_and_the_report_path_is_in_it(cli, tmp_path):
    report = tmp_path / "r.html"
    result = cli(*RUNS, "--json", "-o", report)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["report"] == str(report) and report.is_file()
    assert result.stderr == f"note: report: {report}\n"
    quiet = cli(*RUNS, "--json", "-q", "-o", report)
    assert quiet.stderr == "" and json.loads(quiet.stdout)["report"] == str(report)
    assert json.loads(cli(*RUNS, "--json", "--no-report").stdout)["report"] is None


def test_a_failing_figure_format_leaves_the_summary_printed(cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "kaleido", None)  # kaleido not installed
    result = cli(*RUNS, "--png", "-o", tmp_path / "r.html")
    assert result.exit_code == 1
    found = rc.compare(rc.load_many(RUNS)).verdict
    printed = " ".join(result.stdout.split())  # wrapped
    assert printed.startswith(found.headline) and " ".join(str(found).split()) in printed
    assert f"report: {tmp_path / 'r.html'}" in result.stdout
    assert result.stderr == ("error: static figures need kaleido: pip install "
                             "'runcompare[static]' (it draws with the installed chromium)\n")


def test_a_figure_the_browser_fails_to_draw_is_a_clear_error(cli, tmp_path, monkeypatch):
    """kaleido 1.x gives back the figures it failed to draw instead of raising (a render
    timed out, a browser that crashed): the command says which and why, and writes none.
    The failure is injected (kaleido's call made to fail as it does), not a real log."""
    import kaleido

    monkeypatch.setattr(kaleido, "write_fig_from_object_sync",
                        lambda jobs, **_: (RuntimeError("render timed out"),))
    result = cli(*RUNS, "--png", "-o", tmp_path / "r.html")
    assert result.exit_code == 1
    assert f"report: {tmp_path / 'r.html'}" in result.stdout
    assert result.stderr.startswith("error: the browser could not draw eval_loss.png, ")
    assert result.stderr.endswith(" (render timed out); run the command again, or leave out "
                                  "--png/--svg\n")
    assert not list((tmp_path / "r").glob("*.png"))


def test_the_fair_axis_fallback_is_said_in_one_line(cli):
    result = cli(DATA / "hf_ddp", SAMPLES / "attn", "--no-report")
    assert result.exit_code == 0
    said = [f for f in rc.compare(rc.load_many([DATA / "hf_ddp", SAMPLES / "attn"])).findings
            if f.code == "axis-fallback"]
    assert [f.message for f in said] == [("compared on samples, not tokens: hf_ddp has no "
                                          "sequence length (--set hf_ddp:seq_len=N)")]
    assert "info [axis-fallback] compared on samples, not tokens: hf_ddp" in result.stdout
    # an axis given is not a fallback
    assert "axis-fallback" not in cli(DATA / "hf_ddp", SAMPLES / "attn", "--x", "samples",
                                      "--no-report").stdout


def _colour_run(*extra_env: tuple[str, str]):
    env = {**os.environ, "FORCE_COLOR": "1", **dict(extra_env)}
    env.pop("NO_COLOR", None) if "NO_COLOR" not in dict(extra_env) else None
    return subprocess.run([sys.executable, "-m", "runcompare", "inspect", str(SAMPLES / "attn")],
                          capture_output=True, text=True, env=env, check=True)


def test_no_color_is_honoured():
    coloured = _colour_run()
    assert _COLOUR.search(coloured.stdout + coloured.stderr)  # the progress bar, at least
    plain = _colour_run(("NO_COLOR", "1"))
    assert not _COLOUR.search(plain.stdout + plain.stderr)
    assert "Batch hierarchy" in plain.stdout


def test_running_out_of_memory_is_one_clear_line(cli, monkeypatch):
    import importlib

    def exhausted(*_, **__):
        raise MemoryError
    monkeypatch.setattr(importlib.import_module("runcompare.load"), "read_runs", exhausted)
    result = cli("inspect", SAMPLES / "attn")
    assert result.exit_code == 1
    assert result.stderr == ("error: ran out of memory; read fewer runs at once, or fewer "
                             "metrics (--metric), or on a machine with more memory\n")
