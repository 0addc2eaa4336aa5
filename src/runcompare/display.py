"""Numbers as people read them, and text from logs shown as text, in every output.

A name or message that came from a log (a metric, a run, a config key, a finding about them)
is data, never markup or a control sequence: :func:`plotly_text` for what plotly draws (its
titles, legends and hover read a small HTML), :func:`terminal_text` for what the terminal prints.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

__all__ = ["LISTED", "did_you_mean", "fmt", "fmt_apart", "listing", "plotly_text", "set_prefix",
           "setting", "terminal_text"]

#: Items a sentence lists before it says how many more there are (a sweep of 200 runs).
LISTED = 6

#: Characters a terminal acts on rather than shows (C0 and C1 controls, DEL) and those that
#: reorder what follows (bidirectional overrides and isolates), each as its escape.
_CONTROLS = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
             for code in (*range(0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F,
                          *range(0x202A, 0x202F), *range(0x2066, 0x206A))}


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


def fmt_apart(values: list[float]) -> list[str]:
    """Values printed with the fewest significant digits (4 to 10) at which the ones that
    differ no longer print the same, so a ranked column never shows one number twice for two.

    >>> fmt_apart([2.19912, 2.19934, 2.3]), fmt_apart([2.5, 2.5]), fmt_apart([])
    (['2.1991', '2.1993', '2.3'], ['2.5', '2.5'], [])
    """
    finite = [v for v in values if isinstance(v, float) and math.isfinite(v)]
    for digits in range(4, 11):
        shown = {f"{v:.{digits}g}" for v in set(finite)}
        if len(shown) == len(set(finite)):
            break
    if digits == 4:
        return [fmt(v) for v in values]
    return [f"{v:.{digits}g}" if isinstance(v, float) and math.isfinite(v) else fmt(v)
            for v in values]


def setting(value: object) -> str:
    """A hyperparameter's value in full (a float as the shortest text that reads back as it,
    so two values that differ never look the same).

    >>> setting(3e-4), setting(0.00030000001), setting(500), setting(None), setting("")
    ('0.0003', '0.00030000001', '500', '—', '""')
    """
    if value is None:
        return "—"
    if value == "":
        return '""'
    return repr(value) if isinstance(value, float) else str(value)


def listing(items: Sequence[str], *, limit: int = LISTED, sep: str = ", ") -> str:
    """``items`` joined for a sentence, the first ``limit`` only when there are more.

    >>> listing(["a 16", "b 2"]), listing([f"r{i}" for i in range(9)], limit=3)
    ('a 16, b 2', 'r0, r1, r2 and 6 more')
    """
    if len(items) <= limit:
        return sep.join(items)
    return f"{sep.join(items[:limit])} and {len(items) - limit} more"


def set_prefix(lacking: Sequence[str]) -> str:
    """What comes before the key in the ``--set`` that supplies a fact the runs ``lacking``
    lack: one run's name (``--set b4:seq_len=N``); nothing for several (``--set seq_len=N``,
    which sets every run), so a sweep whose runs all lack it is told the one setting that
    fixes it, not its first run's.

    >>> set_prefix(["b4"]), set_prefix(["b4", "b8"])
    ('b4:', '')
    """
    return f"{lacking[0]}:" if len(lacking) == 1 else ""


def plotly_text(text: str) -> str:
    """``text`` as plotly shows it literally: ``&``, ``<`` and ``>`` as entities, so a name
    such as ``<a href=...>`` or ``<br>`` is neither a link nor a line break.

    >>> plotly_text("<a href='http://x'>loss</a> & more")
    "&lt;a href='http://x'&gt;loss&lt;/a&gt; &amp; more"
    """
    return html.escape(text, quote=False)


def terminal_text(text: str) -> str:
    r"""``text`` with every control character (an escape sequence's ESC, a carriage return, a
    newline, a bidirectional override) written as its escape, so it prints as it is.

    >>> terminal_text("loss\x1b[2J\r\u202eevil")
    'loss\\x1b[2J\\x0d\\u202eevil'
    """
    return text.translate(_CONTROLS)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"did you mean 'X'? "`` for the choices closest to a mistyped ``word`` (up to three,
    the closest first; a name's last ``/`` part counts too, so ``loss`` finds ``train/loss``),
    or ``""`` when none is close. The one "did you mean" of every message: commands, axes,
    metrics, ``--set`` keys, sources and export formats.

    >>> did_you_mean("toknes", ["step", "samples", "tokens"])
    "did you mean 'tokens'? "
    >>> did_you_mean("loss", ["eval/loss", "train/loss", "train/grad_norm"])
    "did you mean 'eval/loss' or 'train/loss'? "
    >>> did_you_mean("zzz", ["tokens"])
    ''
    """
    import difflib

    def score(choice: str) -> float:
        parts = {choice, choice.rsplit("/", 1)[-1]}
        return max(difflib.SequenceMatcher(None, word.lower(), p.lower()).ratio() for p in parts)

    scored = sorted(((score(c), c) for c in set(choices)), key=lambda sc: (-sc[0], sc[1]))
    close = [choice for value, choice in scored if value >= 0.75][:3]
    if not close:
        return ""
    names = [repr(c) for c in close]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return f"did you mean {listed}? "
