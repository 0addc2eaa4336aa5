"""The line reader's batching of small logs: the same rows and findings as one by one."""

from __future__ import annotations

import polars as pl
import pytest

from runcompare.sources import REGISTRY
from runcompare.sources.textlog import rows as textrows

from .conftest import DATA


@pytest.mark.parametrize("name", ["kv", "nanogpt", "torchtitan"])
def test_small_logs_read_together_give_what_each_gives_alone(tmp_path, monkeypatch, name):
    """A real log split into many small files, one with a line cut inside a number and one
    with a byte that is not UTF-8 (the damage each file would report alone)."""
    source = next((DATA / "text" / name).glob("*.log"))
    lines = source.read_bytes().splitlines(keepends=True)
    size = max(2, len(lines) // 8)
    parts = [lines[i:i + size] for i in range(0, len(lines), size)]
    parts[1] = [*parts[1][:-1], parts[1][-1].rstrip(b"\n")[:-3]]  # cut inside its last line
    parts[2] = [b"\xff" + parts[2][0], *parts[2][1:]]
    for i, part in enumerate(parts):
        (tmp_path / f"part{i:03d}.log").write_bytes(b"".join(part))
    fmt = {"kv": "text", "nanogpt": "nanogpt", "torchtitan": "torchtitan"}[name]
    together = REGISTRY[fmt].read_at(tmp_path)
    monkeypatch.setattr(textrows, "SMALL_BYTES", 0)  # every file read alone
    alone = REGISTRY[fmt].read_at(tmp_path)
    assert together.scalars.equals(alone.scalars)
    assert together.findings == alone.findings
    assert together.scalars.height > 0 and pl.Series(together.scalars["step"]).n_unique() > 1
