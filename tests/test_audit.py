"""The fairness audit on real runs: mismatched ones raise the right findings, matched ones none."""

from __future__ import annotations

import pytest

import runcompare as rc
from runcompare.audit import audit, propose_axis

from .conftest import DATA, SAMPLES


@pytest.fixture(scope="module")
def samples():
    return rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"])


@pytest.fixture(scope="module")
def mismatched():
    # global batch 16 (2 × 8) against 32 (4 × 8), both sequence length 64
    return rc.load_many([SAMPLES / "attn", DATA / "hf_global32"],
                        settings=["hf_global32:seq_len=64"])


@pytest.mark.parametrize("x", ["step", "samples", "tokens"])
def test_matched_runs_raise_nothing(samples, x):
    # nothing but which question the axis answers
    assert [f.code for f in audit(samples, x=x)] == ["axis-question"]
    assert propose_axis(samples) == "tokens"


@pytest.mark.parametrize(("x", "question"), [
    ("tokens", "data efficiency"), ("samples", "data efficiency"),
    ("flops", "compute efficiency"), ("device_hours", "cost on this hardware"),
    ("elapsed", "cost on this hardware")])
def test_the_audit_says_which_question_the_axis_answers(samples, x, question):
    finding = next(f for f in audit(samples, x=x) if f.code == "axis-question")
    assert finding.level == "info"
    assert finding.message.startswith(f"compared on {x}, which answers {question}")
    assert "flops compute efficiency" in finding.message


def test_steps_with_different_global_batches(mismatched):
    codes = {f.code: f for f in audit(mismatched, x="step")}
    finding = codes["global-batch-mismatch"]
    assert finding.level == "warning"
    assert "attn 16, hf_global32 32" in finding.message and "use --x tokens" in finding.message


def test_tokens_axis_removes_the_batch_mismatch(mismatched):
    assert "global-batch-mismatch" not in {f.code for f in audit(mismatched, x="tokens")}


def test_same_peak_lr_for_different_batches_shows_both_rules(mismatched):
    (finding,) = [f for f in audit(mismatched, x="tokens") if f.code == "lr-not-rescaled"]
    lr = mismatched[0].facts["learning_rate"].value
    assert lr == mismatched[1].facts["learning_rate"].value
    assert f"linear rule {lr * 2:.3g}" in finding.message
    assert f"square-root rule {lr * 2 ** 0.5:.3g}" in finding.message


def test_eval_cadence_differs_on_the_tokens_axis(mismatched):
    (finding,) = [f for f in audit(mismatched, x="tokens") if f.code == "different-eval-cadence"]
    # attn evaluates every 25 steps × 1,024 tokens, hf_global32 every 10 × 2,048
    assert "attn 25,600, hf_global32 20,480" in finding.message


def test_seq_len_mismatch_on_samples_but_only_info_on_tokens():
    runs = rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"], settings=["attn:seq_len=128"])
    on_samples = [f for f in audit(runs, x="samples") if f.code == "seq-len-mismatch"]
    on_tokens = [f for f in audit(runs, x="tokens") if f.code == "seq-len-mismatch"]
    assert [f.level for f in on_samples] == ["warning"] and [f.level for f in on_tokens] == ["info"]


def test_padding_counted_as_tokens_when_the_counter_includes_padding():
    run = rc.load(DATA / "hf_tokens")
    assert run.facts["include_num_input_tokens_seen"].value == "all"
    codes = [f.code for f in audit([run], x="tokens")]
    assert codes.count("padding-counted-as-tokens") == 1
    assert "padding-counted-as-tokens" not in [f.code for f in audit([run], x="step")]


def test_world_size_unknown_is_reported_with_the_fix():
    run = rc.load(DATA / "hf_ddp", source="hf-trainer")
    (finding,) = [f for f in audit([run], x="tokens") if f.code == "world-size-unknown"]
    assert "--set hf_ddp:world_size=N" in finding.message


def test_transformers_before_the_loss_fix_with_accumulation():
    old, new = rc.load_many([DATA / "hf_v4_accum4", SAMPLES / "attn"],
                            settings=["hf_v4_accum4:grad_accum=4", "hf_v4_accum4:seq_len=64"])
    assert old.facts["transformers_version"].value == "4.45.2"
    assert new.facts["transformers_version"].value.startswith("5.")
    (finding,) = [f for f in audit([old, new], x="tokens")
                  if f.code == "loss-normalisation-changed"]
    assert "hf_v4_accum4 (transformers 4.45.2, accumulation 4)" in finding.message
    assert finding.level == "warning"
    # two runs of the same, current release raise nothing of the kind
    assert "loss-normalisation-changed" not in {
        f.code for f in audit(rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"]), x="tokens")}


def test_a_step_that_counts_log_calls_is_not_an_optimizer_step():
    # a real offline W&B run logged without a step metric, against an HF Trainer run
    plain = next(r for r in rc.load_many([DATA / "wandb" / "project" / "wandb"])
                 if r.name == "plain")
    assert plain.step_unit == "log_call"
    (finding,) = [f for f in audit([plain, rc.load(SAMPLES / "attn")], x="step")
                  if f.code == "step-unit-mismatch"]
    assert "plain counts log_call, attn counts optimizer" in finding.message
    assert "--set RUN:step_metric=NAME" in finding.message


SWEEP = [DATA / "batch_sweep" / name for name in ("b4", "b8", "b16", "b32", "b64")]
TOKENS_FIX = ("a sequence length or a logged token counter: pass --set {}seq_len=N or write "
              "`seq_len = N` in a runcompare.toml beside the logs")


def _fallback(runs):
    return [f.message for f in rc.compare(runs).findings if f.code == "axis-fallback"]


def test_runs_that_all_lack_a_fact_are_told_the_set_for_every_run():
    """The batch sweep's five real runs state no sequence length: the hint is ``--set
    seq_len=N`` (every run), not ``--set b4:seq_len=N`` (issue 33); one run lacking it keeps
    its own (``hf_ddp:seq_len=N``, tests/test_cli_habits.py)."""
    assert _fallback(rc.load_many(SWEEP)) == [
        ("compared on samples, not tokens: b4, b8, b16, b32, b64 have no sequence length "
        "(--set seq_len=N)")]
    # two of three lack it: KEY=N would set the third too, so the one-run form is said beside
    seeded = DATA / "hf_seeds" / "lr1e-3_seed1"  # seq_len 64 in hf_seeds/runcompare.toml
    assert _fallback(rc.load_many([*SWEEP[:2], seeded])) == [
        ("compared on samples, not tokens: b4, b8 have no sequence length "
        "(--set seq_len=N for every run, or RUN:seq_len=N for one)")]


def test_a_sweep_of_200_runs_is_told_one_setting_and_it_works(tmp_path):
    """200 HF runs (tests/sweep.py: sample_logs/attn's trainer_state.json, scaled) without a
    sequence length: one line, ``--set seq_len=N``, and passing it puts them on tokens."""
    from .sweep import write_sweep

    paths = write_sweep(tmp_path, 200)
    for path in paths:
        toml = path / "runcompare.toml"
        toml.write_text("".join(line for line in toml.read_text().splitlines(keepends=True)
                                if not line.startswith("seq_len")))
    runs = rc.load_many(paths, cache=False)
    said = _fallback(runs)
    assert said == [("compared on samples, not tokens: all 200 runs have no sequence length "
                    "(--set seq_len=N)")]
    fixed = rc.compare(rc.load_many(paths, cache=False, settings={"seq_len": 64}))
    assert fixed.x == "tokens" and "axis-fallback" not in {f.code for f in fixed.findings}


def test_the_axis_error_names_the_set_for_every_run_when_several_lack_it():
    from runcompare.model import require_axes

    runs = rc.load_many([*SWEEP, DATA / "hf_seeds" / "lr1e-3_seed1"])
    with pytest.raises(rc.MissingInfoError) as one:
        runs[0].frame(x="tokens")
    assert str(one.value) == ("run 'b4' cannot be put on the tokens axis: it needs "
                              + TOKENS_FIX.format("b4:"))
    with pytest.raises(rc.MissingInfoError) as every:
        require_axes(runs[:5], "tokens")
    assert str(every.value) == ("runs 'b4', 'b8', 'b16', 'b32', 'b64' cannot be put on the "
                                "tokens axis: they need " + TOKENS_FIX.format(""))
    with pytest.raises(rc.MissingInfoError) as some:
        require_axes(runs, "tokens")
    assert str(some.value).endswith(TOKENS_FIX.format("") + " (--set KEY=N sets every run; "
                                    "RUN:KEY=N sets one)")
    require_axes(runs, "samples")  # every run has samples: no error
