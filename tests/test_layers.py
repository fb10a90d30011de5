"""Every package has a layer, and a layer imports only from the layers below it (issues 10 and 36).

The layers, bottom to top, are :data:`LAYERS`: each subpackage of ``llm_connect``, each top-level
module and ``llm_connect`` itself (its ``__init__``) sits in exactly one. A module may import from
its own package and from packages in lower layers only: nothing from its own layer's other
packages, nothing from above, not under ``if TYPE_CHECKING:`` and not inside a function (the
import graph of ``tests/test_import_circles.py``, type-only imports included). So the ledger
stores values and knows nothing of grading or routing; scorers sit below judges; a suite from
traffic never grades, stores or routes; the CLI is the only thing above the library.

A new package must be given a layer here; a package that needs one of its own layer's packages
moves up a layer.
"""

from __future__ import annotations

from functools import cache

import pytest

from tests.test_import_circles import PACKAGE, import_graph, modules, package_of

TOP = "llm_connect"
"""``llm_connect/__init__.py``, the top-level package's own re-exports."""

LAYERS: tuple[tuple[str, ...], ...] = (
    # leaves: import nothing of llm_connect
    ("_version", "_json", "_hints", "_extras", "_secrets", "_renamed", "_fences"),
    ("errors",),
    ("_conversation",),
    ("types",),
    ("values", "traffic", "_structured"),  # the value types; suites from traffic; the JSON ladder
    ("adapters",),
    ("ledger", "scoring", "stability"),
    ("grading",),
    ("routing",),
    ("labels", TOP),
    ("calibration", "report"),
    ("cli",),
    ("__main__",),
)


def _full(name: str) -> str:
    return name if name == TOP else f"{TOP}.{name}"


RANK = {_full(name): rank for rank, layer in enumerate(LAYERS) for name in layer}


@cache
def _graph() -> dict[str, set[str]]:
    return import_graph(modules(PACKAGE), type_checking=True)


def test_every_package_has_exactly_one_layer() -> None:
    placed = [_full(name) for layer in LAYERS for name in layer]
    assert len(placed) == len(set(placed))
    assert set(placed) == {package_of(module) for module in modules(PACKAGE)}


@pytest.mark.parametrize("package", sorted(RANK))
def test_a_lower_layer_imports_nothing_from_a_higher_one(package: str) -> None:
    bad = sorted(
        f"{module} imports {target} (layer {RANK[package_of(target)]}, {package} is in layer {RANK[package]})"
        for module, targets in _graph().items()
        if package_of(module) == package
        for target in targets
        if package_of(target) != package and RANK.get(package_of(target), len(LAYERS)) >= RANK[package]
    )
    assert bad == []


def test_the_router_reads_the_ledger_through_its_public_surface() -> None:
    source = (PACKAGE / "routing" / "_router.py").read_text(encoding="utf-8")
    assert "self.ledger._" not in source and "ledger._models" not in source and "sqlalchemy" not in source
