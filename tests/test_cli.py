"""The command line end to end on the sample runs: contracts, exit codes, messages."""

from __future__ import annotations

import re

import runcompare as rc

from .conftest import DATA, SAMPLES

RUNS = (SAMPLES / "mamba", SAMPLES / "attn")


def test_compare_is_the_default_command_and_writes_the_report(cli, tmp_path):
    report = tmp_path / "out.html"
    result = cli(*RUNS, "--x", "tokens", "-o", report)
    assert result.exit_code == 0, result.stderr
    assert report.stat().st_size > 1_000_000  # plotly.js is embedded
    for text in ("Batch hierarchy", "mamba", "attn", "1,024", "eval/loss on tokens",
                 f"report: {report}"):
        assert text in result.stdout


def test_compare_json_contract(cli, tmp_path):
    out = cli.json(*RUNS, "--x", "tokens", "-o", tmp_path / "r.html")
    assert set(out) == {"x", "runs", "summary", "totals", "findings", "verdict", "throughput",
                        "differs", "report"} and out["x"] == "tokens"
    assert out["report"] == str(tmp_path / "r.html")
    runs = {run["name"]: run for run in out["runs"]}
    assert set(runs) == {"mamba", "attn"}
    for run in runs.values():
        assert set(run) == {"name", "path", "format", "sources", "step_unit", "batch", "steps",
                            "samples", "tokens", "metrics", "points", "findings", "hparams"}
        assert run["batch"]["global_batch"]["value"] == 16
        assert run["batch"]["tokens_per_step"]["value"] == 1024
        assert run["tokens"] == run["steps"]["optimizer"] * 1024
    assert {row["run"] for row in out["summary"]} == {"mamba", "attn"}
    assert {"run", "metric", "final", "best", "at_common_budget", "x_to_target"} <= set(
        out["summary"][0])
    assert out["summary"][0]["metric"] == "eval/loss"


def test_equal_tokens_at_equal_optimizer_steps(cli, tmp_path):
    import runcompare as rc

    mamba, attn = rc.load_many(RUNS)
    left = mamba.frame(x="tokens").filter(metric="train/loss").select("step", "tokens")
    right = attn.frame(x="tokens").filter(metric="train/loss").select("step", "tokens")
    assert left.equals(right) and left.height == 20


def test_no_report_writes_nothing(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(*RUNS, "--no-report").exit_code == 0
    assert not (tmp_path / "reports").exists()


def test_default_report_path(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(*RUNS).exit_code == 0
    assert (tmp_path / "reports" / "mamba_vs_attn.html").is_file()


def test_inspect_json_contract(cli):
    out = cli.json("inspect", SAMPLES / "attn")
    assert out["name"] == "attn" and out["format"] == "hf-trainer"
    assert out["step_unit"] == "optimizer" and out["steps"]["optimizer"] == 100
    # the run's config (W&B, TensorBoard args) outranks the value trainer_state.json logged
    assert out["batch"]["per_device_batch"]["value"] == 2
    assert out["batch"]["grad_accum"]["value"] == 8
    assert out["steps"]["micro"] == 800
    assert out["batch"]["seq_len"] == {"value": 64, "source": "runcompare.toml: seq_len"}
    assert "train/loss" in out["metrics"] and out["points"] > 0


def test_set_overrides_per_run(cli):
    out = cli.json("inspect", SAMPLES / "attn", "--set", "attn:seq_len=128")
    assert out["batch"]["seq_len"] == {"value": 128, "source": "--set"}
    assert out["batch"]["tokens_per_step"]["value"] == 16 * 128


def _fails(result, code, *texts):
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    for text in texts:
        assert text in result.stderr


def test_missing_path(cli, tmp_path):
    _fails(cli(tmp_path / "nope"), 1, "nope: no such file or directory")


def test_folder_without_logs_says_where_to_look(cli, tmp_path):
    _fails(cli("inspect", tmp_path), 1, "no training logs found", "`runcompare formats`")
    # one source asked for: what it looks for
    _fails(cli("inspect", tmp_path, "--source", "hf-trainer"), 1,
           f"{tmp_path}: no hf-trainer logs found (looked for an HF Trainer output dir")


def test_tokens_without_sequence_length_names_the_fix(cli):
    _fails(cli(DATA / "hf_ddp", "--x", "tokens"), 1, "hf_ddp", "--set hf_ddp:seq_len=N",
           "runcompare.toml")


def test_unknown_metric_lists_the_available_ones(cli):
    _fails(cli(*RUNS, "--metric", "eval/acc", "--no-report"), 1,
           "no run logged metric 'eval/acc'", "available: eval/loss")


def test_bad_set_is_a_usage_error(cli):
    _fails(cli(*RUNS, "--set", "seqlen=3"), 2, "unknown key 'seqlen'")


def test_set_for_a_run_that_is_not_there(cli):
    _fails(cli(*RUNS, "--set", "gpt:seq_len=3"), 2, "no run called gpt")


def test_unknown_axis_is_a_usage_error(cli):
    _fails(cli(*RUNS, "--x", "parameters"), 2, "unknown axis 'parameters'")


def test_corrupt_trainer_state_exits_1_with_file_and_position(cli, tmp_path):
    # malformed input made by hand
    (tmp_path / "trainer_state.json").write_text("{]")
    _fails(cli("inspect", tmp_path), 1, "trainer_state.json: not valid JSON at line 1 column 2")


def test_terminal_output_fits_columns_without_colour(cli, monkeypatch):
    runs = [SAMPLES / "mamba", SAMPLES / "attn", DATA / "hf_tokens", DATA / "hf_global32",
            DATA / "hf_resumed"]
    for columns in (100, 72):
        monkeypatch.setenv("COLUMNS", str(columns))
        result = cli(*runs, "--set", "seq_len=64", "--no-report")
        assert result.exit_code == 0, result.stderr
        assert "\x1b[" not in result.stdout
        assert max(len(line) for line in result.stdout.splitlines()) <= columns
        assert "hf_global32" in result.stdout and "32" in result.stdout


def test_piped_output_takes_columns_or_cuts_nothing(cli, monkeypatch):
    """Piped (stdout no terminal, as under the test runner): COLUMNS is the width when set;
    without it, no table is cut to 100 columns (issue 33). Nine real HF runs: at 100 columns
    "what differs" leaves keys out (tests/test_terminal_sweep.py); piped, it shows them all,
    and the verdict is one line."""
    from runcompare.cli import PIPED_WIDTH

    runs = [DATA / "hf_seeds", DATA / "hf_tokens", DATA / "hf_v4_accum4",
            DATA / "hf_wd0.1_adafactor"]
    monkeypatch.setenv("COLUMNS", "100")
    narrow = cli(*runs, "--set", "seq_len=64", "--no-report").stdout
    assert "more keys than fit at this width" in narrow
    assert max(len(line) for line in narrow.splitlines()) <= 100
    monkeypatch.delenv("COLUMNS")
    wide = cli(*runs, "--set", "seq_len=64", "--no-report").stdout
    assert "more keys than fit at this width" not in wide
    assert re.search(r"┃ optim +┃", wide) and re.search(r"┃ weight_decay +┃", wide)
    found = rc.compare(rc.load_many(runs, settings=["seq_len=64"])).verdict
    assert wide.splitlines()[0] == found.headline  # the headline, then the full text whole
    assert str(found) in wide.splitlines() and len(str(found)) > 100
    assert 100 < max(len(line) for line in wide.splitlines()) < PIPED_WIDTH
    for junk in ("", "0", "wide"):  # not a width: as if unset
        monkeypatch.setenv("COLUMNS", junk)
        assert cli(*runs, "--set", "seq_len=64", "--no-report").stdout == wide


def test_config_file_supplies_facts_to_every_run(cli):
    # an Axolotl config: micro_batch_size 2, gradient_accumulation_steps 8, sequence_len 64
    config = DATA / "axolotl" / "axolotl.yml"
    out = cli.json("inspect", DATA / "hf_global32", "--config", config)
    assert out["batch"]["seq_len"] == {"value": 64, "source": "axolotl.yml: sequence_len"}
    assert out["batch"]["per_device_batch"]["source"] == "axolotl.yml: micro_batch_size"
    # the run's own config says micro-batch 4: the disagreement is reported, not hidden
    conflicts = [f["message"] for f in out["findings"] if f["code"] == "fact-conflict"]
    assert any(m.startswith("per_device_batch is 2 (axolotl.yml") for m in conflicts)


def test_pattern_reads_a_log_no_source_knows(cli):
    folder = DATA / "text" / "pattern"
    _fails(cli("inspect", folder), 1, "no training logs found")
    pattern = (r"(?P<wall_time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ep \d+ it (?P<step>\d+) "
               r"train_loss (?P<loss>\S+) acc (?P<acc>\S+)")
    out = cli.json("inspect", folder, "--pattern", pattern)
    assert out["format"] == "text" and out["steps"]["optimizer"] == 100
    assert {"train/loss", "train/acc"} <= set(out["metrics"])


def test_rich_markup_in_a_run_name_prints_as_it_is(cli):
    result = cli(DATA / "hf_tokens", "--no-report", "--set", "hf_tokens:name=[/]x[red]")
    assert result.exit_code == 0, result.stderr
    assert "[/]x[red]" in result.stdout
    result = cli("inspect", DATA / "hf_tokens", "--set", "hf_tokens:name=[bold]y")
    assert result.exit_code == 0 and "[bold]y" in result.stdout


def test_a_report_path_that_cannot_be_written_is_a_one_line_error(cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    _fails(cli(*RUNS, "-o", blocker / "report.html"), 1, str(blocker))
