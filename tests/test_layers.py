"""The layers of ``runcompare.sources`` and the direction of imports, read from the source.

formats never import each other (a module named ``_x`` in formats/ is a helper of a format
and imports no format); codecs know no format (they import only codecs and the errors);
textlog, naming and
config import no format; nothing under sources/ imports the layers above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
SOURCES = SRC / "runcompare" / "sources"
ABOVE = ("runcompare.load", "runcompare.cli", "runcompare.analysis", "runcompare.report",
         "runcompare.export", "runcompare.audit", "runcompare.cache", "runcompare.axes")


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str | None = None) -> set[str]:
    """The runcompare modules ``path`` (the module ``module``, by default the one at that
    path) imports, anywhere in the file (``from . import x`` counts ``x`` when it is one)."""
    package = (module or _module(path)).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found.add(target)
            found |= {f"{target}.{alias.name}" for alias in node.names}
    known = {_module(p) for p in SRC.rglob("*.py")}
    return {name for name in found if name in known}


MODULES = sorted(SOURCES.rglob("*.py"))
FORMATS = {_module(p) for p in (SOURCES / "formats").glob("[!_]*.py")}
HELPERS = {_module(p) for p in (SOURCES / "formats").glob("_*.py")} - {
    "runcompare.sources.formats"}


def test_the_layers_exist():
    for layer in ("formats", "codecs", "textlog"):
        assert (SOURCES / layer / "__init__.py").is_file(), layer
    assert (SOURCES / "naming.py").is_file() and (SOURCES / "config.py").is_file()
    assert len(FORMATS) >= 13 and "runcompare.sources.formats.jsonl" in FORMATS


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(SOURCES).as_posix())
def test_imports_point_down(path):
    name, imported = _module(path), _imports(path)
    assert not {m for m in imported if m.startswith(ABOVE)}, f"{name} imports a layer above"
    if name in FORMATS:
        assert not imported & (FORMATS - {name}), f"{name} imports another format"
    if name in HELPERS or name.startswith(("runcompare.sources.textlog",
                                           "runcompare.sources.naming",
                                           "runcompare.sources.config",
                                           "runcompare.sources.format")):
        assert not imported & FORMATS, f"{name} imports a format"
    if name.startswith("runcompare.sources.codecs"):
        outside = {m for m in imported if not m.startswith("runcompare.sources.codecs")
                   and m != "runcompare.errors"}
        assert not outside, f"{name} (a codec) imports {sorted(outside)}"


def test_the_rule_is_checked_on_a_module_that_breaks_it(tmp_path):
    """The import reader sees relative imports of a format from a format."""
    fake = SOURCES / "formats" / "megatron.py"
    found = _imports(fake)
    assert "runcompare.sources.textlog.lines" in found
    assert "runcompare.sources.format" in found
    text = fake.read_text(encoding="utf-8") + "\nfrom . import nanogpt\n"
    copy = tmp_path / "megatron.py"
    copy.write_text(text, encoding="utf-8")
    assert "runcompare.sources.formats.nanogpt" in _imports(
        copy, "runcompare.sources.formats.megatron")
