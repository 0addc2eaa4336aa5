"""Outputs people read: the terminal summary and the HTML report."""

from .html import default_report_path, write_report
from .static import write_figures
from .terminal import print_comparison, print_plan, print_run

__all__ = ["default_report_path", "print_comparison", "print_plan", "print_run", "write_figures",
           "write_report"]
