"""Lower layers never import higher ones (issue 10, item 9).

The order is ``types`` < ``values`` < ``ledger`` < ``grading`` < ``routing``:
the ledger stores values and imports nothing from grading or routing, not even
under ``TYPE_CHECKING`` or inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "llm_connect"

FORBIDDEN = {
    "values": ("llm_connect.ledger", "llm_connect.grading", "llm_connect.routing", "llm_connect.cli"),
    "ledger": (
        "llm_connect.grading",
        "llm_connect.routing",
        "llm_connect.calibration",
        "llm_connect.labels",
        "llm_connect.cli",
    ),
    # scorers sit below judges: a scorer never imports grading (Case comes from values)
    "scoring": ("llm_connect.grading", "llm_connect.routing", "llm_connect.ledger", "llm_connect.cli"),
    "stability": ("llm_connect.routing", "llm_connect.ledger", "llm_connect.cli"),
    # suites from traffic write the suite format; they never grade, store or route
    "traffic": ("llm_connect.grading", "llm_connect.routing", "llm_connect.ledger", "llm_connect.cli"),
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_lower_layer_imports_nothing_from_a_higher_one(layer: str) -> None:
    root = PACKAGE / layer
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]
    assert files
    bad = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in files
        for name in _imports(path)
        if name.startswith(FORBIDDEN[layer])
    ]
    assert not bad, bad


def test_the_router_reads_the_ledger_through_its_public_surface() -> None:
    source = (PACKAGE / "routing" / "_router.py").read_text(encoding="utf-8")
    assert "self.ledger._" not in source and "ledger._models" not in source and "sqlalchemy" not in source
