"""What kind of number a metric is, which decides how a comparison shows it.

- ``quality``: what training is for (losses, perplexity, accuracy-like scores) and whatever
  ``--metric`` names: these get races (target, x to target, speedup).
- ``diagnostic``: schedules and health signals (learning rate, grad norm, loss scale,
  throughput, memory, run times): listed and drawn, never raced.
- ``total``: end-of-run values (the HF Trainer's ``train_runtime``,
  ``train_samples_per_second``, ``train_steps_per_second``, ``total_flos``, ``train_loss``,
  and any metric that no run logged more than once): one number per run, shown in a totals
  table and never drawn as a one-point chart.

A metric is an eval metric when its first part says so (``eval/``, ``val/``, ``test/``): its
crossings are found on the values as logged; those of per-step training metrics on the
smoothed curve.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

__all__ = ["DIAGNOSTIC", "QUALITY", "TOTAL", "is_eval", "metric_kind", "metric_kinds"]

QUALITY, DIAGNOSTIC, TOTAL = "quality", "diagnostic", "total"

#: Name fragments of quality metrics (checked on the last part of the name).
_QUALITY = ("loss", "ppl", "perplexity", "acc", "f1", "bleu", "rouge", "exact_match", "auc",
            "precision", "recall", "wer", "cer", "error", "score", "bpb", "bpc", "nll",
            "reward")
#: Fragments that make a quality-looking name a diagnostic (Megatron's loss scale).
_NOT_QUALITY = ("loss_scale", "lossscale", "scaler")
_EVAL_PREFIXES = ("eval", "val", "valid", "validation", "test")


def is_eval(metric: str) -> bool:
    """Whether ``metric`` is measured on held-out data at intervals rather than per step.

    >>> is_eval("eval/loss"), is_eval("val/acc"), is_eval("train/loss"), is_eval("loss")
    (True, True, False, False)
    """
    head, slash, _ = metric.partition("/")
    return bool(slash) and head.lower() in _EVAL_PREFIXES


def metric_kind(metric: str, *, named: Collection[str] = (), points: int | None = None) -> str:
    """``quality``, ``diagnostic`` or ``total`` for one metric (see the module docstring);
    ``points`` is the most points any run logged of it.

    >>> [metric_kind(m) for m in ("eval/loss", "train/learning_rate", "train/train_runtime",
    ...                            "train/total_flos", "train/loss_scale", "eval/ppl")]
    ['quality', 'diagnostic', 'total', 'total', 'diagnostic', 'quality']
    >>> metric_kind("train/grad_norm", named=["train/grad_norm"]), metric_kind("eval/loss",
    ...                                                                          points=1)
    ('quality', 'total')
    """
    if metric in named:
        return QUALITY
    if metric == "train/total_flos" or metric.startswith("train/train_") or points == 1:
        return TOTAL
    leaf = metric.rsplit("/", 1)[-1].lower()
    if any(part in leaf for part in _NOT_QUALITY):
        return DIAGNOSTIC
    return QUALITY if any(part in leaf for part in _QUALITY) else DIAGNOSTIC


def metric_kinds(points: Mapping[str, int], *, named: Collection[str] = ()) -> dict[str, str]:
    """The kind of each metric, given the most points any run logged of it."""
    return {metric: metric_kind(metric, named=named, points=n) for metric, n in points.items()}
