"""The documents the code and the README cite are in the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITING = sorted([ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("src/**/*.py"),
                 *ROOT.glob("tests/*.py")])
CITED = re.compile(r"\bdocs/[\w-]+\.md\b")


def test_every_document_cited_is_there():
    wrong = []
    for path in CITING:
        text = path.read_text(encoding="utf-8")
        wrong += [f"{path.name} cites {cited}" for cited in sorted(set(CITED.findall(text)))
                  if not (ROOT / cited).is_file()]
        if path.name != "test_docs.py" and "DESIGN.md" in text:
            wrong.append(f"{path.name} cites DESIGN.md, not in the repository: cite "
                         "docs/architecture.md")
    assert wrong == []


def test_the_architecture_page_names_every_layer_the_import_test_holds():
    from .test_imports import LAYERS

    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for names in LAYERS:
        for name in names:
            short = name.removeprefix("runcompare.").removeprefix("runcompare")
            assert f"`{short or 'runcompare'}" in page, name
