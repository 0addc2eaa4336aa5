"""Findings grouped by level and code, for a sweep: one line per kind of finding with how many
there are and which runs they concern, in the terminal and in the report alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Finding

__all__ = ["FindingGroup", "group_findings"]


@dataclass(frozen=True)
class FindingGroup:
    """The findings of one level and code, in the order they came."""

    level: str
    code: str
    members: tuple[Finding, ...]

    @property
    def runs(self) -> list[str]:
        """The runs the findings concern, each once (none: about the comparison as a whole)."""
        return list(dict.fromkeys(f.run for f in self.members if f.run))

    @property
    def messages(self) -> list[str]:
        """The distinct wordings, the first one first."""
        return list(dict.fromkeys(f.message for f in self.members))

    @property
    def concerns(self) -> str:
        """``"3 runs"``, ``"1 run"`` or ``"the comparison"``.

        >>> FindingGroup("info", "x", (Finding("info", "x", "m", "a"),)).concerns
        '1 run'
        """
        runs = self.runs
        return f"{len(runs)} run{'s' if len(runs) != 1 else ''}" if runs else "the comparison"


def group_findings(findings: Sequence[Finding]) -> list[FindingGroup]:
    """One group per (level, code), in the order each first appears.

    >>> groups = group_findings([Finding("warning", "a", "x", "r1"), Finding("info", "b", "y"),
    ...                          Finding("warning", "a", "z", "r2")])
    >>> [(g.code, len(g.members), g.runs, g.messages) for g in groups]
    [('a', 2, ['r1', 'r2'], ['x', 'z']), ('b', 1, [], ['y'])]
    """
    groups: dict[tuple[str, str], list[Finding]] = {}
    for finding in findings:
        groups.setdefault((finding.level, finding.code), []).append(finding)
    return [FindingGroup(level, code, tuple(members))
            for (level, code), members in groups.items()]
