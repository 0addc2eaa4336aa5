"""runcompare: compare ML training runs on a fair axis. ::

    import runcompare as rc
    runs = rc.load_many(["sample_logs/mamba", "sample_logs/attn"])
    runs[0].frame(x="tokens")            # polars; runs[0].to_pandas(x="tokens") for pandas
    rc.compare(runs).summary

The names are imported on first use (:mod:`runcompare._lazy`): ``import runcompare`` loads
no polars until a run is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import install

if TYPE_CHECKING:
    from ._version import __version__
    from .analysis.compare import Comparison, compare
    from .analysis.critical_batch import CriticalBatch, critical_batch
    from .analysis.goodput import Goodput, goodput
    from .analysis.noise_scale import NoiseScale, noise_scale
    from .analysis.plan import Plan, plan
    from .batch import BatchPlan, plan_batch
    from .errors import (
        InputError,
        MissingInfoError,
        NoLogsFoundError,
        RuncompareError,
        UnknownMetricError,
        UsageError,
    )
    from .load import load, load_many
    from .model import BatchConfig, Fact, Finding, Findings, RawLog, Run

__all__ = [
    "BatchConfig",
    "BatchPlan",
    "Comparison",
    "CriticalBatch",
    "Fact",
    "Finding",
    "Findings",
    "Goodput",
    "InputError",
    "MissingInfoError",
    "NoLogsFoundError",
    "NoiseScale",
    "Plan",
    "RawLog",
    "Run",
    "RuncompareError",
    "UnknownMetricError",
    "UsageError",
    "__version__",
    "compare",
    "critical_batch",
    "goodput",
    "load",
    "load_many",
    "noise_scale",
    "plan",
    "plan_batch",
]

_MODULES = {
    "__version__": "._version",
    "Comparison": ".analysis.compare", "compare": ".analysis.compare",
    "CriticalBatch": ".analysis.critical_batch", "critical_batch": ".analysis.critical_batch",
    "Goodput": ".analysis.goodput", "goodput": ".analysis.goodput",
    "NoiseScale": ".analysis.noise_scale", "noise_scale": ".analysis.noise_scale",
    "Plan": ".analysis.plan", "plan": ".analysis.plan",
    "BatchPlan": ".batch", "plan_batch": ".batch",
    **dict.fromkeys(("InputError", "MissingInfoError", "NoLogsFoundError", "RuncompareError",
                     "UnknownMetricError", "UsageError"), ".errors"),
    "load": ".load", "load_many": ".load",
    **dict.fromkeys(("BatchConfig", "Fact", "Finding", "Findings", "RawLog", "Run"), ".model"),
}

if not TYPE_CHECKING:
    install(__name__, _MODULES)
