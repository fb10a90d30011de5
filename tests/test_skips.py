"""CI never skips in silence (issue 36, item 4).

* A test skips only through ``tests/fixtures/skips.py``: for a reason with a REQUIRE variable that
  makes it a failure instead. No ``pytest.skip``, ``pytest.importorskip``, ``pytest.mark.skip``,
  ``pytest.mark.skipif`` or ``xfail`` anywhere else in ``tests/``.
* ``.ci/run`` exports every REQUIRE variable as ``1``, and no file names one that is not listed.
* Every package a test imports is declared by name in the ``[dev]`` extra (or in the dependencies
  and extras it includes), not merely installed because another package pulls it in.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures import skips
from tests.fixtures.skips import REQUIRE, import_or_skip, skip_or_fail

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
HELPER = TESTS / "fixtures" / "skips.py"

_SKIP_CALLS = {"pytest.skip", "pytest.importorskip", "pytest.xfail", "skip", "importorskip", "xfail"}
_SKIP_MARKS = ("mark.skip", "mark.skipif", "mark.xfail")
_UNITTEST_SKIPS = {"skipTest", "skipIf", "skipUnless"}


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def silent_skips(source: str) -> list[str]:
    """``line: what`` for every way ``source`` skips or expects a failure other than the helper."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        where = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and node.module == "pytest":
            names = {alias.name for alias in node.names} & {"skip", "importorskip", "xfail", "mark"}
            found.extend(f"{where}: from pytest import {name}" for name in sorted(names))
        elif isinstance(node, ast.Call) and _dotted(node.func) in _SKIP_CALLS:
            found.append(f"{where}: {_dotted(node.func)}(...)")
        elif isinstance(node, ast.Attribute):
            name = _dotted(node) or ""
            if name.endswith(_SKIP_MARKS) or node.attr in _UNITTEST_SKIPS:
                found.append(f"{where}: {name or node.attr}")
    return sorted(found, key=lambda hit: int(hit.partition(":")[0]))


def test_the_scan_finds_every_way_to_skip() -> None:
    source = (
        "import pytest\n"
        "from pytest import importorskip\n"
        "pytestmark = pytest.mark.skipif(True, reason='x')\n"
        "@pytest.mark.skip(reason='x')\n"
        "def test_a():\n"
        "    pytest.skip('x')\n"
        "def test_b():\n"
        "    pytest.importorskip('sklearn')\n"
        "    self.skipTest('x')\n"
        "@pytest.mark.xfail\n"
        "def test_c():\n"
        "    with pytest.raises(pytest.skip.Exception):\n"  # catching a skip is not skipping
        "        pass\n"
    )
    assert [hit.partition(":")[0] for hit in silent_skips(source)] == ["2", "3", "4", "6", "8", "9", "10"]


def _test_sources() -> Iterator[Path]:
    for path in sorted(TESTS.rglob("*.py")):
        if path != HELPER:
            yield path


def test_no_test_skips_but_through_a_require_variable() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{hit}"
        for path in _test_sources()
        for hit in silent_skips(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "skip with tests.fixtures.skips.skip_or_fail / import_or_skip instead"


def test_ci_sets_every_require_variable() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    exported = set(re.findall(r"^export (LLM_CONNECT_REQUIRE_\w+)=1$", ci, re.M))
    assert exported == set(REQUIRE)


def test_no_file_names_a_require_variable_that_is_not_listed() -> None:
    places = [ROOT / ".ci" / "run", ROOT / "scripts" / "test", ROOT / "pyproject.toml", *TESTS.rglob("*.py")]
    named = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in places
        for name in re.findall(r"LLM_CONNECT_REQUIRE_\w+", path.read_text(encoding="utf-8"))
        if name not in REQUIRE
    }
    assert named == set()


def test_a_skip_names_its_variable_and_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    env = "LLM_CONNECT_REQUIRE_NETNS"
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        skip_or_fail(env, "no ip command", tests="the partition test")
    assert str(skipped.value) == f"the partition test: no ip command ({env}=1 makes this a failure)"
    monkeypatch.setenv(env, "1")
    with pytest.raises(pytest.fail.Exception) as failed:
        skip_or_fail(env, "no ip command", tests="the partition test")
    assert str(failed.value) == f"{env}=1 but no ip command"
    with pytest.raises(KeyError, match="HOME is not a REQUIRE variable"):
        skip_or_fail("HOME", "x", tests="x")


def test_a_missing_module_skips_or_fails_under_the_dev_extra_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)  # imports as missing
    monkeypatch.delenv(skips.DEV_EXTRA_ENV, raising=False)
    with pytest.raises(
        pytest.skip.Exception, match=r"sklearn cannot be imported .*pip install -e '\.\[dev\]'"
    ):
        import_or_skip("sklearn", tests="t")
    monkeypatch.setenv(skips.DEV_EXTRA_ENV, "1")
    with pytest.raises(
        pytest.fail.Exception, match=f"{skips.DEV_EXTRA_ENV}=1 but sklearn cannot be imported"
    ):
        import_or_skip("sklearn", tests="t")
    assert import_or_skip("json", tests="t").dumps([]) == "[]"


# -- every package a test imports is declared ----------------------------------------------------


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, requirement
    return _normal(match.group(0))


def declared_for_tests(pyproject: dict[str, object]) -> set[str]:
    """The distributions ``pip install -e '.[dev]'`` asks for by name: the dependencies, the dev
    extra and every extra it names (``llm-connect[embeddings,...]``), normalised."""
    project = pyproject["project"]
    assert isinstance(project, dict)
    extras: dict[str, list[str]] = project["optional-dependencies"]
    own = _normal(project["name"])
    names = {_requirement_name(r) for r in project["dependencies"]}
    todo, seen = ["dev"], set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in extras[extra]:
            name = _requirement_name(requirement)
            if name == own:
                todo.extend(e.strip() for e in requirement.partition("[")[2].partition("]")[0].split(","))
            else:
                names.add(name)
    return names


def imported_by_tests() -> dict[str, str]:
    """Top-level module -> one place a test imports it (``import``, ``from``, ``import_or_skip``),
    for every module outside the standard library, ``tests`` and ``llm_connect``."""
    found: dict[str, str] = {}
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (
                isinstance(node, ast.Call)
                and _dotted(node.func) in ("import_or_skip", "importlib.import_module")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names = [node.args[0].value]
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top not in ("tests", "llm_connect", "__future__"):
                    found.setdefault(top, f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}")
    return found


def test_every_package_a_test_imports_is_declared_in_the_dev_extra() -> None:
    declared = declared_for_tests(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8")))
    providers = importlib.metadata.packages_distributions()
    imported = imported_by_tests()
    assert {"pytest", "sqlalchemy", "sklearn", "selenium"} <= set(imported)
    undeclared = {
        f"{module} ({where}; installed by {', '.join(providers.get(module, [])) or 'nothing here'})"
        for module, where in imported.items()
        # a module not installed here (vrty off Python 3.11) must be declared under its own name
        if not ({_normal(d) for d in providers.get(module, [])} | {_normal(module)}) & declared
    }
    assert undeclared == set(), "add each to the [dev] extra in pyproject.toml"
