"""No module imports its own importer (issue 24): two modules that import each other, at the
top or inside a function, are an import circle a reader has to untangle.

A package and its own submodules are exempt (``__init__`` re-exports what its modules define),
and so are imports under ``if TYPE_CHECKING:``: they never run, they only name a type.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "llm_connect"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def runtime_nodes(tree: ast.AST) -> list[ast.AST]:
        found: list[ast.AST] = []
        stack = [tree]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.If) and ast.unparse(node.test) in (
                "TYPE_CHECKING",
                "typing.TYPE_CHECKING",
            ):
                stack.extend(node.orelse)
                continue
            found.append(node)
            stack.extend(ast.iter_child_nodes(node))
        return found

    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                if target.startswith("llm_connect") and (found := resolve(target)) not in (None, name):
                    edges[name].add(str(found))
    return edges


def test_no_two_modules_import_each_other() -> None:
    edges = _edges(_modules())
    assert len(edges) > 100
    circles = sorted(
        f"{a} <-> {b}"
        for a, targets in edges.items()
        for b in targets
        if a < b and a in edges[b] and not (b.startswith(a + ".") or a.startswith(b + "."))
    )
    assert circles == []
