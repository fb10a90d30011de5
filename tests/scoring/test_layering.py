"""Layering: scorers sit below grading; every judge lives in ``llm_connect.grading.judges``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import llm_connect.scoring
from llm_connect.grading.judges import _registry

SCORING = Path(llm_connect.scoring.__file__).parent
ALLOWED_FROM_GRADING = {"llm_connect.grading._protocols", "llm_connect.grading._results"}
HIGHER = ("llm_connect.grading", "llm_connect.ledger", "llm_connect.routing", "llm_connect.calibration",
          "llm_connect.cli")  # fmt: skip


def _imports(tree: ast.AST) -> list[tuple[str, int]]:
    """Every imported module with its line, except inside ``__getattr__`` (lazy re-exports)."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_scoring_imports_nothing_from_grading_but_the_case_and_result_modules() -> None:
    offending = []
    for path in sorted(SCORING.rglob("*.py")):
        for module, line in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if module.startswith(HIGHER) and module not in ALLOWED_FROM_GRADING:
                offending.append(f"{path.relative_to(SCORING.parent)}:{line}: {module}")
    assert offending == []


def test_every_builtin_judge_factory_lives_in_the_judges_package() -> None:
    for name, entry in _registry._BUILTINS.items():
        assert isinstance(entry.target, str)
        assert entry.target.startswith("llm_connect.grading.judges._"), name
        module, _, attr = entry.target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr))


@pytest.mark.parametrize(
    ("old_module", "name", "new_module"),
    [
        ("llm_connect.scoring", "RelativeJudge", "llm_connect.grading.judges"),
        ("llm_connect.scoring._base", "RelativeJudge", "llm_connect.grading.judges"),
        ("llm_connect.scoring.vrty", "VrtyJudge", "llm_connect.grading.judges"),
        ("llm_connect.scoring.vrty", "make_vrty_judge", "llm_connect.grading.judges._vrty"),
        ("llm_connect.scoring.persona", "PersonaJudge", "llm_connect.grading.judges"),
        ("llm_connect.scoring.persona", "make_persona_judge", "llm_connect.grading.judges._persona"),
        ("llm_connect.scoring.safety", "make_safety_judge", "llm_connect.grading.judges._safety"),
        ("llm_connect.scoring.rules", "make_format_judge", "llm_connect.grading.judges._rules"),
        ("llm_connect.scoring.rules", "make_schema_judge", "llm_connect.grading.judges._rules"),
        ("llm_connect.scoring.rules", "make_correctness_judge", "llm_connect.grading.judges._rules"),
        ("llm_connect.scoring.rules", "make_length_judge", "llm_connect.grading.judges._rules"),
        ("llm_connect.scoring.rules", "make_relevance_judge", "llm_connect.grading.judges._rules"),
        ("llm_connect.scoring.rules", "make_completeness_judge", "llm_connect.grading.judges._rules"),
    ],
)
def test_old_import_paths_still_resolve_to_the_moved_judges(old_module: str, name: str, new_module: str) -> None:
    old = getattr(importlib.import_module(old_module), name)
    assert old is getattr(importlib.import_module(new_module), name)
    with pytest.raises(AttributeError):
        _ = importlib.import_module(old_module).NoSuchJudge
