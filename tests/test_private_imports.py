"""One package uses another through its ``__init__``, never through its private modules (issue 36, item 1).

A package's public names are those its ``__init__`` exports; its modules whose names start with
``_`` are its own business, free to move and split. So a module of package ``A`` that needs
something of package ``B`` imports it from ``llm_connect.B`` (or a public subpackage or module of
``B``: ``llm_connect.grading.judges``, ``llm_connect.scoring.safety``), never from a path with a
part after ``B`` that starts with ``_`` (``llm_connect.values._decision``), and never a name that
starts with ``_`` (``from llm_connect.grading.judges import _registry``). Every import counts:
at the top of a module, inside a function, under ``if TYPE_CHECKING:``, relative or absolute.

A package's own modules import its private modules freely: the packages are those of
``tests/test_import_circles.py`` (``llm_connect.X`` for each subpackage ``X``, its subpackages
included: ``llm_connect.grading.judges`` is part of ``llm_connect.grading``; ``llm_connect``'s
``__init__`` and each top-level module on its own). The root package's private top-level modules
in :data:`SHARED_LEAVES` are shared leaves, imported from anywhere.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.test_import_circles import PACKAGE, modules, package_of, write_package

SHARED_LEAVES = frozenset(
    {
        "_conversation",
        "_extras",
        "_fences",
        "_hints",
        "_json",
        "_renamed",
        "_secrets",
        "_structured",
        "_version",
    }
)
"""The root package's private top-level modules every package may import: small leaves (the
version, strict JSON, optional-package checks, "did you mean", renamed names, secrets, fences
and the one-object reply rule, the JSON reply ladder, conversations) that belong to no package."""

PENDING: frozenset[tuple[str, str]] = frozenset()
"""Imports of private modules still to move to the package (none left)."""
"""(file, import) pairs left for now: imports of private modules in files being changed
elsewhere, each with the public import that replaces it. Empty it; add nothing."""


@dataclass(frozen=True)
class PrivateImport:
    """One imported name (or module) that reaches into another package's private parts."""

    path: str
    """The importing file, relative to the repository root."""
    line: int
    statement: str
    """``from M import N`` (one name of the statement) or ``import M``."""


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _reaches_in(importer: str, target: str, name: str | None) -> bool:
    """Whether module ``importer`` importing ``name`` from ``target`` (or the module ``target``)
    uses a private module or name of another package."""
    package = package_of(target)
    if package == package_of(importer):
        return False
    root, _, rest = target.partition(".")
    leaf = rest.split(".")[0] if rest else ""
    if package != root and leaf in SHARED_LEAVES:
        return name is not None and _private(name)  # a leaf's own private names stay its own
    return any(_private(part) for part in target.split(".")[1:]) or (name is not None and _private(name))


def private_imports(known: Mapping[str, Path], root: Path) -> list[PrivateImport]:
    """Every import in the modules of ``known`` (dotted name -> file; paths shown relative to
    ``root``) that reaches into another package's private module or name, in file order."""
    top = next(iter(known)).split(".")[0]
    found = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        shown = path.relative_to(root).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                pairs: list[tuple[str, str | None]] = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    here = here[: len(here) - (node.level - 1)]
                    base = ".".join([*here, *([base] if base else [])])
                pairs = [(base, alias.name) for alias in node.names]
            else:
                continue
            for target, member in pairs:
                if target != top and not target.startswith(f"{top}."):
                    continue
                statement = f"import {target}" if member is None else f"from {target} import {member}"
                if member is not None and f"{target}.{member}" in known:  # ``from P import module``
                    target, member = f"{target}.{member}", None
                if _reaches_in(name, target, member):
                    found.append(PrivateImport(shown, node.lineno, statement))
    return sorted(found, key=lambda item: (item.path, item.line, item.statement))


# -- the detector itself -------------------------------------------------------------------------


def test_every_kind_of_import_into_another_packages_private_parts_is_found(tmp_path: Path) -> None:
    known = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg._version import __version__\n",
            "pkg/_version.py": "__version__ = '1'\n",
            "pkg/_other.py": "",
            "pkg/values/__init__.py": "from pkg.values._case import Case\n",
            "pkg/values/_case.py": "from pkg._version import __version__\n",
            "pkg/grading/__init__.py": "from pkg.grading.judges import build\n",
            "pkg/grading/_protocols.py": (
                "from typing import TYPE_CHECKING\n"
                "from pkg.values import Case\n"
                "if TYPE_CHECKING:\n    from pkg.values._case import Case\n"
            ),
            "pkg/grading/judges/__init__.py": "from pkg.grading.judges._registry import build\n",
            "pkg/grading/judges/_registry.py": (
                "from pkg.grading._protocols import Case\n"  # its own package: allowed
                "from ...values import _case\n"  # a private module by name, relative
                "def build():\n    import pkg.values._case\n"
            ),
            "pkg/cli/__init__.py": (
                "from pkg.grading.judges import build\n"  # a public subpackage: allowed
                "from pkg.grading import judges\n"
                "def late():\n    from pkg.grading.judges import _registry\n"
                "    from pkg.grading.judges._registry import build\n"
                "    from pkg import _other, _version\n"
                "    from pkg._version import __version__, _secret\n"
            ),
        },
    )
    assert [(f.path, f.line, f.statement) for f in private_imports(known, tmp_path)] == [
        ("pkg/cli/__init__.py", 4, "from pkg.grading.judges import _registry"),
        ("pkg/cli/__init__.py", 5, "from pkg.grading.judges._registry import build"),
        ("pkg/cli/__init__.py", 6, "from pkg import _other"),
        ("pkg/cli/__init__.py", 7, "from pkg._version import _secret"),
        ("pkg/grading/_protocols.py", 4, "from pkg.values._case import Case"),
        ("pkg/grading/judges/_registry.py", 2, "from pkg.values import _case"),
        ("pkg/grading/judges/_registry.py", 4, "import pkg.values._case"),
    ]


# -- llm_connect ---------------------------------------------------------------------------------


def _found() -> list[PrivateImport]:
    return private_imports(modules(PACKAGE), PACKAGE.parent)


def test_the_shared_leaves_are_top_level_modules() -> None:
    assert {path.stem for path in PACKAGE.glob("_*.py")} >= SHARED_LEAVES


def test_no_package_imports_another_packages_private_modules() -> None:
    bad = [f"{f.path}:{f.line}: {f.statement}" for f in _found() if (f.path, f.statement) not in PENDING]
    assert bad == [], (
        "import these from the package (export the name in its __init__ if it is not), "
        f"{len(bad)} import(s):\n" + "\n".join(bad)
    )


def test_every_pending_import_is_still_there() -> None:
    gone = sorted(PENDING - {(f.path, f.statement) for f in _found()})
    assert gone == [], f"no longer found (remove from PENDING): {gone}"
