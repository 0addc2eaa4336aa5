"""The layers of ``runcompare.sources`` and the direction of imports, read from the source.

formats never import each other (a module named ``_x`` in formats/ is a helper of a format,
named after it or in its package, used by it alone, and imports no format); codecs know no
format (they import only codecs and the errors); textlog, naming and config import no format. That nothing under sources/ imports the layers above it is
``tests/test_imports.py``'s rule for the whole package.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .importgraph import PACKAGE, imports, module_name

SOURCES = PACKAGE / "sources"


def _imports(path: Path, module: str | None = None) -> set[str]:
    """The runcompare modules ``path`` (the module ``module``, by default the one at that
    path) imports, at the top or in a function (:func:`.importgraph.imports`)."""
    return set(imports(path, module))


MODULES = sorted(SOURCES.rglob("*.py"))
#: Format modules (formats/x.py, formats/<package>/x.py), their helpers (a name starting with
#: ``_``) and the packages holding them (formats/, formats/wandb/).
FORMATS = {module_name(p) for p in (SOURCES / "formats").rglob("[!_]*.py")}
HELPERS = {module_name(p) for p in (SOURCES / "formats").rglob("_*.py") if p.name != "__init__.py"}
PACKAGES = {module_name(p) for p in (SOURCES / "formats").rglob("__init__.py")}


def test_the_layers_exist():
    for layer in ("formats", "codecs", "textlog"):
        assert (SOURCES / layer / "__init__.py").is_file(), layer
    assert (SOURCES / "naming.py").is_file() and (SOURCES / "config.py").is_file()
    assert len(FORMATS) >= 13 and "runcompare.sources.formats.jsonl" in FORMATS
    assert {"runcompare.sources.formats.wandb.run_folder",
            "runcompare.sources.formats.wandb.export"} <= FORMATS


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(SOURCES).as_posix())
def test_imports_point_down(path):
    """Inside sources/ (``tests/test_imports.py`` keeps sources/ below the layers above it)."""
    name, imported = module_name(path), _imports(path)
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


def _owner(helper: str) -> str:
    """The format module (or the format package) a helper belongs to: a helper in a package of
    formats is the package's; one directly in formats/ is named ``_<format>_<what>``."""
    package, _, name = helper.rpartition(".")
    if package != "runcompare.sources.formats":
        return package
    owners = [f for f in FORMATS if name.startswith(f"_{f.rpartition('.')[2]}_")]
    assert len(owners) == 1, f"{helper}: its name says no one format that owns it"
    return owners[0]


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_a_helper_is_named_after_its_owner_and_used_by_it_alone(helper):
    """``_hf_trainer_json`` is hf_trainer's, ``wandb/_steps`` the W&B formats': no other
    module of sources/ imports them."""
    owner = _owner(helper)
    users = {module_name(p) for p in MODULES if helper in _imports(p)}
    assert users and all(u == owner or u.startswith(f"{owner}.") for u in users), (
        f"{helper} ({owner}'s) is imported by {sorted(users)}")


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_package_of_formats_imports_nothing(package):
    """formats/__init__.py and formats/wandb/__init__.py import no format or helper: importing
    one format never loads another."""
    path = SOURCES.parent.parent / Path(*package.split(".")) / "__init__.py"
    assert not _imports(path) & (FORMATS | HELPERS)


def test_the_rule_is_checked_on_a_module_that_breaks_it(tmp_path):
    """The import reader sees relative imports of a format from a format."""
    fake = SOURCES / "formats" / "megatron.py"
    found = _imports(fake)
    assert {"runcompare.sources.textlog.lines", "runcompare.sources.textlog.logs"} <= found
    assert "runcompare.sources.format" in found
    text = fake.read_text(encoding="utf-8") + "\nfrom . import nanogpt\n"
    copy = tmp_path / "megatron.py"
    copy.write_text(text, encoding="utf-8")
    assert "runcompare.sources.formats.nanogpt" in _imports(
        copy, "runcompare.sources.formats.megatron")
