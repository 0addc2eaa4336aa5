"""Outputs people read: the terminal summary, the HTML report, static figures and the
notebook view. Names are imported on first use (:mod:`runcompare._lazy`), so that
``runcompare batch`` loads no polars or plotly."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import install

if TYPE_CHECKING:
    from .html import default_report_path, write_report
    from .plan_table import print_plan
    from .static import write_figures
    from .terminal import print_comparison, print_run, print_runs

__all__ = ["default_report_path", "print_comparison", "print_plan", "print_run", "print_runs",
           "write_figures", "write_report"]

if not TYPE_CHECKING:
    install(__name__, {
        "default_report_path": ".html", "write_report": ".html", "print_plan": ".plan_table",
        "write_figures": ".static", "print_comparison": ".terminal", "print_run": ".terminal",
        "print_runs": ".terminal"})
