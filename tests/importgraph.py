"""The imports of runcompare's modules, read from the source (not by importing it): which
module imports which, and whether only inside a function (a lazy import). Imports under
``if TYPE_CHECKING:`` are left out: they are never run."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "runcompare"


def module_name(path: Path) -> str:
    """The dotted name of the module at ``path`` under ``src/``."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=1)
def known_modules() -> frozenset[str]:
    """Every module of the package."""
    return frozenset(module_name(p) for p in PACKAGE.rglob("*.py"))


def imports(path: Path, module: str | None = None) -> dict[str, bool]:
    """The runcompare modules ``path`` (the module ``module``, by default the one at that
    path) imports, each with whether it is imported only lazily (inside a function).
    ``from . import x`` counts ``x`` when it is a module, and the package only when it is
    not."""
    name = module or module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    known = known_modules()
    found: dict[str, bool] = {}

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other, lazy)
                continue
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            for target in _targets(child, package, known):
                if target != name:
                    found[target] = found.get(target, True) and inner
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def _targets(node: ast.AST, package: list[str], known: frozenset[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = package[:len(package) - node.level + 1] if node.level else []
    target = ".".join(base + ([node.module] if node.module else []))
    subs = [f"{target}.{alias.name}" for alias in node.names]
    modules = [sub for sub in subs if sub in known]
    whole = [] if node.module is None and len(modules) == len(subs) else [target]
    return [t for t in whole + modules if t in known]


def graph() -> dict[str, dict[str, bool]]:
    """Every module's imports (:func:`imports`)."""
    return {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``edges`` (module -> modules it imports), as the modules on it, or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for start in sorted(edges):
        if start not in state and (found := walk(start)):
            return found
    return None
