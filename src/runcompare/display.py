"""Numbers as people read them, in every output (terminal, report, findings)."""

from __future__ import annotations

__all__ = ["fmt"]


def fmt(value: float | None) -> str:
    """A number as people read it: thousands separators, 4 significant digits for floats.

    >>> fmt(4194304), fmt(2.34567), fmt(None), fmt(float("nan")), fmt(1.5e9), fmt(12003.7)
    ('4,194,304', '2.346', '—', 'nan', '1,500,000,000', '12,004')
    """
    if value is None:
        return "—"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()
                                  and abs(value) < 1e15):
        return f"{int(value):,}"
    if abs(value) >= 1000 and abs(value) < 1e15:
        return f"{value:,.0f}"
    return f"{value:.4g}"
