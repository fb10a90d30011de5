"""Layering: scorers sit below grading; every judge lives in ``llm_connect.grading.judges``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import llm_connect.scoring
from llm_connect.grading.judges import _registry

SCORING = Path(llm_connect.scoring.__file__).parent
HIGHER = ("llm_connect.grading", "llm_connect.ledger", "llm_connect.routing", "llm_connect.calibration",
          "llm_connect.cli")  # fmt: skip


def _imports(tree: ast.AST) -> list[tuple[str, int]]:
    """Every imported module with its line, at the top or inside a function."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_scoring_imports_nothing_from_grading() -> None:
    # Not even lazily: the old re-exports of moved judges made scorer modules import their own
    # importers (issue 24); Case and validate_quality_score come from llm_connect.values.
    offending = []
    for path in sorted(SCORING.rglob("*.py")):
        for module, line in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if module.startswith(HIGHER):
                offending.append(f"{path.relative_to(SCORING.parent)}:{line}: {module}")
    assert offending == []


def test_every_builtin_judge_factory_lives_in_the_judges_package() -> None:
    for name, entry in _registry._BUILTINS.items():
        assert isinstance(entry.target, str)
        assert entry.target.startswith("llm_connect.grading.judges._"), name
        module, _, attr = entry.target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr))


@pytest.mark.parametrize(
    ("old_module", "name"),
    [
        ("llm_connect.scoring", "RelativeJudge"),
        ("llm_connect.scoring.vrty", "VrtyJudge"),
        ("llm_connect.scoring.persona", "make_persona_judge"),
        ("llm_connect.scoring.safety", "make_safety_judge"),
        ("llm_connect.scoring.rules", "make_format_judge"),
    ],
)
def test_judges_are_reached_from_grading_only(old_module: str, name: str) -> None:
    with pytest.raises(AttributeError):
        getattr(importlib.import_module(old_module), name)
    assert callable(getattr(importlib.import_module("llm_connect.grading.judges"), name, None)) or callable(
        getattr(importlib.import_module(f"llm_connect.grading.judges._{old_module.rpartition('.')[2]}"), name)
    )
