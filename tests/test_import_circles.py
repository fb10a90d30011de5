"""No import circles, of any length, between modules or between packages (issues 24 and 36).

An import circle is a group of modules each of which, following imports, reaches all the others:
whichever runs first sees the others half-initialised, and a reader has to untangle them. The
edges are every ``import`` and ``from ... import`` that can run: at the top of a module or inside
a function, class or ``try`` (absolute or relative). Imports under ``if TYPE_CHECKING:`` are not
edges: they never run, they only name a type. ``from P import X`` is an edge to ``P.X`` when
that is a module, else to ``P`` (importing a package runs its ``__init__``, so its re-exports
count). Importing ``a.b.c`` also runs ``a`` and ``a.b`` first; those implicit edges to the parent
packages are left out, or every package that re-exports its own submodules would be a circle.

The package graph folds every module into its package: ``llm_connect.X`` for each subpackage
``X`` and each top-level module, and ``llm_connect`` itself for ``llm_connect/__init__.py``. Its
circles are the groups of packages that reach one another (``llm_connect`` -> ``grading`` ->
``ledger`` -> ``llm_connect`` was one, through ``ledger/_migrate.py``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llm_connect"


def modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module under ``package`` (a package's name is its ``__init__``)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` except those only the type checker reads (``if TYPE_CHECKING:``)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.UnaryOp)
            and isinstance(node.test.op, ast.Not)
            and _is_type_checking(node.test.operand)
        ):
            stack.extend(node.body)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def import_targets(
    name: str, path: Path, node: ast.Import | ast.ImportFrom, known: Mapping[str, Path]
) -> list[str]:
    """The names ``node`` (in module ``name``, file ``path``) imports: ``P.X`` for ``from P import X``
    when ``P.X`` is one of the ``known`` modules, else ``P``; relative imports made absolute."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join([*here, *([base] if base else [])])
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]


def import_graph(known: Mapping[str, Path], *, type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of ``known`` it imports at run time (see the module docstring); with
    ``type_checking``, also those it imports under ``if TYPE_CHECKING:`` (the layer test's view)."""
    edges: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree) if type_checking else runtime_nodes(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in import_targets(name, path, node, known):
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node, each sorted, sorted (Tarjan's
    algorithm, iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def package_of(module: str) -> str:
    """``llm_connect.X`` for a module in subpackage ``X`` or the top-level module ``X``;
    ``llm_connect`` for the top-level ``__init__``."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    folded: dict[str, set[str]] = {package_of(name): set() for name in graph}
    for name, targets in graph.items():
        folded[package_of(name)].update(package_of(t) for t in targets if package_of(t) != package_of(name))
    return folded


# -- the detector itself -------------------------------------------------------------------------


def write_package(root: Path, files: Mapping[str, str]) -> dict[str, Path]:
    """Write ``files`` (relative path -> text) under ``root``; the modules of ``root/pkg``."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return modules(root / "pkg")


def test_a_circle_of_any_length_through_functions_and_relative_imports_is_found(tmp_path: Path) -> None:
    known = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "import pkg.b\n",
            "pkg/b.py": "from pkg import c\n",  # pkg.c is a module: the edge goes to it
            "pkg/c.py": "def late():\n    from .d import thing\n",
            "pkg/d.py": "try:\n    from pkg.a import x\nexcept ImportError:\n    pass\n",
            "pkg/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\nelse:\n    import pkg.f\n",
            "pkg/f.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg import e\n",
        },
    )
    graph = import_graph(known)
    assert graph["pkg.c"] == {"pkg.d"} and graph["pkg.e"] == {"pkg.f"} and graph["pkg.f"] == set()
    assert import_graph(known, type_checking=True)["pkg.e"] == {"pkg.a", "pkg.f"}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.d"]]


def test_a_circle_between_packages_counts_the_top_level_init_as_its_own_package(tmp_path: Path) -> None:
    known = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.grading import Grader\n",
            "pkg/_version.py": "",
            "pkg/grading/__init__.py": "from pkg.grading._grader import Grader\n",
            "pkg/grading/_grader.py": "",
            "pkg/grading/_batch.py": "def run():\n    from pkg.ledger import Ledger\n",
            "pkg/ledger/__init__.py": "from pkg.ledger._store import Ledger\n",
            "pkg/ledger/_store.py": "",
            "pkg/ledger/_migrate.py": "import pkg\n",
        },
    )
    graph = import_graph(known)
    assert circles(graph) == []  # no module reaches back to itself...
    assert circles(package_graph(graph)) == [["pkg", "pkg.grading", "pkg.ledger"]]  # ...but packages do
    (tmp_path / "pkg/ledger/_migrate.py").write_text("from pkg._version import __version__\n")
    assert circles(package_graph(import_graph(known))) == []


# -- llm_connect ---------------------------------------------------------------------------------


def test_the_graph_is_read_as_described() -> None:
    known = modules(PACKAGE)
    graph = import_graph(known)
    assert len(graph) > 150
    # an import inside a function is an edge (matplotlib is looked for on use); one under
    # TYPE_CHECKING is not (the grade writer names the ledger's types only)
    assert "llm_connect._extras" in graph["llm_connect.report._charts"]
    assert "llm_connect.ledger" not in graph["llm_connect.grading._writer"]
    # the top package names its re-exports under TYPE_CHECKING and imports them on first use
    assert package_graph(graph)["llm_connect"] == {"llm_connect._version"}
    typed = package_graph(import_graph(known, type_checking=True))
    assert typed["llm_connect"] >= {"llm_connect.grading", "llm_connect.types"}


def test_no_modules_import_one_another_in_a_circle() -> None:
    assert circles(import_graph(modules(PACKAGE))) == []


def test_no_packages_import_one_another_in_a_circle() -> None:
    assert circles(package_graph(import_graph(modules(PACKAGE)))) == []
