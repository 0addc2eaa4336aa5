"""The import rules of the whole package, read from the source: every module sits in a layer,
imports point down the layers (docs/architecture.md draws them), and the import graph has
no cycle. The few imports that point up are lazy (inside a function), named here with why,
and must stay lazy; ``tests/test_layers.py`` holds the finer rules inside ``sources/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from .importgraph import PACKAGE, cycle, graph, imports

#: The layers, bottom first: a module imports only modules of lower layers, or of its own
#: package (a subpackage of the same layer), never above. A name is a module or a package
#: (all of its modules).
LAYERS: list[tuple[str, ...]] = [
    ("runcompare._version", "runcompare._lazy", "runcompare._forkserver", "runcompare._forkserver_env",
     "runcompare.errors"),
    ("runcompare.display", "runcompare.options", "runcompare.parallel"),
    ("runcompare.model",),
    ("runcompare.facts", "runcompare.batch", "runcompare.outputs"),
    ("runcompare.sources",),
    ("runcompare.resolve", "runcompare.legs", "runcompare.cache", "runcompare.tb_writer"),
    ("runcompare.axes", "runcompare.remote"),
    ("runcompare.export",),
    ("runcompare.load",),
    ("runcompare.audit",),
    ("runcompare.analysis",),
    ("runcompare.report",),
    ("runcompare.cli",),
    ("runcompare.__main__", "runcompare"),
]

#: The imports that point up, each lazy: the notebook and plotting conveniences of the
#: objects a user holds, which render them with the report's code.
UPWARD = {
    ("runcompare.model", "runcompare.report.notebook"): "Run._repr_html_, the notebook view",
    ("runcompare.analysis.compare", "runcompare.report.notebook"):
        "Comparison._repr_html_, the notebook view",
    ("runcompare.analysis.compare", "runcompare.report.static"):
        "Comparison.figure(), the plotly figure the report draws",
    ("runcompare.analysis.compare", "runcompare.report.html"):
        "Comparison.write_report(), the HTML report",
}

GRAPH = graph()


def layer_of(module: str) -> tuple[int, str]:
    """The layer of ``module`` and the layer entry (module or package) it falls under."""
    best: tuple[int, str] | None = None
    for rank, names in enumerate(LAYERS):
        for name in names:
            inside = module == name or (name != "runcompare" and module.startswith(name + "."))
            if inside and (best is None or len(name) > len(best[1])):
                best = (rank, name)
    if best is None and module == "runcompare":
        best = (len(LAYERS) - 1, "runcompare")
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def violations(edges: dict[str, dict[str, bool]]) -> list[str]:
    """Every import of ``edges`` that breaks the rules, described."""
    out = []
    for module, imported in sorted(edges.items()):
        rank, entry = layer_of(module)
        for target, lazy in sorted(imported.items()):
            their_rank, their_entry = layer_of(target)
            if their_rank < rank or their_entry == entry:
                continue
            why = UPWARD.get((module, target))
            if why is None:
                out.append(f"{module} imports {target}, a layer above it ({their_entry})")
            elif not lazy:
                out.append(f"{module} imports {target} at the top; it may only lazily ({why})")
    return out


def test_every_module_is_in_a_layer():
    for module in GRAPH:
        layer_of(module)


def test_imports_point_down_the_layers():
    assert violations(GRAPH) == []


def test_the_upward_imports_named_are_still_there_and_lazy():
    for (module, target), why in UPWARD.items():
        assert GRAPH[module].get(target) is True, f"{module} -> {target} ({why}): gone or eager"


def test_the_import_graph_has_no_cycle():
    edges = {module: {t for t in imported if (module, t) not in UPWARD}
             for module, imported in GRAPH.items()}
    assert cycle(edges) is None, f"import cycle: {' -> '.join(cycle(edges) or [])}"


def test_the_rules_catch_an_upward_import_and_a_cycle(tmp_path: Path):
    """A model that imports the report at the top, and two modules importing each other."""
    fake = tmp_path / "model.py"
    fake.write_text((PACKAGE / "model.py").read_text(encoding="utf-8")
                    + "\nfrom .report import html\nfrom .analysis import compare\n",
                    encoding="utf-8")
    found = imports(fake, "runcompare.model")
    assert found["runcompare.report.html"] is False
    broken = violations({"runcompare.model": found})
    assert "runcompare.model imports runcompare.report.html, a layer above it " \
        "(runcompare.report)" in broken
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


@pytest.mark.parametrize("module", ["runcompare.analysis.wording", "runcompare.analysis.headline"])
def test_type_only_imports_are_not_imports(module: str):
    """``if TYPE_CHECKING:`` imports (of the verdict's types) are never run."""
    assert "runcompare.analysis.verdict" not in GRAPH[module]
