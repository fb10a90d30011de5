"""Adapter providers are entry points (group ``llm_connect.adapters``), built-in and plugin alike.

Each plugin here is a real installed distribution, written into a temporary directory (a module, a
``*.dist-info`` with ``METADATA`` and ``entry_points.txt``) and put on ``sys.path``: exactly what
``pip install`` leaves behind, without touching the project or its environment.
"""

from __future__ import annotations

import json
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from importlib.metadata import distribution
from pathlib import Path

import pytest

from llm_connect.adapters import (
    OpenAIAdapter,
    ProviderOptions,
    RecordedAdapter,
    _providers,
    adapter_from_spec,
    provider_names,
    register_provider,
)
from llm_connect.errors import ConfigurationError
from llm_connect.grading import PairedGrader, build_judge
from llm_connect.types import LLMResponse, RunConfig
from tests.cli._util import invoke, write_suite
from tests.fixtures.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]

ECHO = '''
"""A provider plugin: its adapter answers every prompt with the prompt itself."""

from llm_connect.types import LLMResponse, prompt_text


class EchoAdapter:
    def __init__(self, model, options):
        self.model = model
        self.adapter_id = f"echo:{model}"
        self.options = options

    def complete(self, prompt, run_config):
        return LLMResponse(text=prompt_text(prompt), model=self.model, provider="echo")

    async def acomplete(self, prompt, run_config):
        return self.complete(prompt, run_config)


def make_adapter(model, options):
    return EchoAdapter(model, options)
'''


class Plugins:
    """Installs plugin distributions into temporary directories on ``sys.path``."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path = tmp_path
        self.monkeypatch = monkeypatch
        self.modules: list[str] = []

    def install(self, dist: str, entry_points: str, modules: dict[str, str], *, clear: bool = True) -> Path:
        """Write distribution ``dist`` 0.1 (its ``modules``: name -> source, and its
        ``[llm_connect.adapters]`` entry points) into a directory of its own on ``sys.path``;
        ``clear``: make the registry read the group again."""
        root = self.tmp_path / dist
        root.mkdir()
        for name, source in modules.items():
            (root / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
            self.modules.append(name)
        info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n", encoding="utf-8"
        )
        (info / "entry_points.txt").write_text(f"[llm_connect.adapters]\n{entry_points}\n", encoding="utf-8")
        self.monkeypatch.syspath_prepend(str(root))
        if clear:
            _providers.clear_provider_cache()
        return root

    def echo(self) -> Path:
        return self.install("echo-plugin", "echo = echo_plugin:make_adapter", {"echo_plugin": ECHO})


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Plugins]:
    _providers.clear_provider_cache()
    installed = Plugins(tmp_path, monkeypatch)
    yield installed
    _providers.clear_provider_cache()  # the directories leave sys.path after this (monkeypatch)
    for name in installed.modules:
        sys.modules.pop(name, None)


# -- a plugin adds a prefix ----------------------------------------------------------------------


def test_a_plugin_package_adds_a_provider_prefix(plugins: Plugins) -> None:
    plugins.echo()
    adapter = adapter_from_spec("echo:anything", base_url="http://example.test/v1", api_key="sk-plugin-key")
    assert adapter.adapter_id == "echo:anything"
    response = adapter.complete("hello there", RunConfig())
    assert (response.text, response.model, response.provider) == ("hello there", "anything", "echo")
    options = vars(adapter)["options"]  # the plugin adapter keeps what its factory got
    assert options == ProviderOptions(
        spec="echo:anything", base_url="http://example.test/v1", api_key="sk-plugin-key"
    )
    assert "sk-plugin-key" not in repr(options)
    assert provider_names()["echo"] == (
        "entry point 'echo = echo_plugin:make_adapter' of distribution echo-plugin 0.1"
    )


def test_the_plugin_adapter_is_graded_as_a_candidate(plugins: Plugins) -> None:
    plugins.echo()
    candidate = adapter_from_spec("echo:anything")
    baseline = RecordedAdapter({"What is 2+2?": "What is 2+2?", "Say hi": "hi"})
    grader = PairedGrader(build_judge("exact"))
    same = grader.grade(baseline, candidate, "What is 2+2?", RunConfig())
    assert same.quality_score == 1.0
    assert same.grader_id == "exact" and same.candidate_response.provider == "echo"
    assert grader.grade(baseline, candidate, "Say hi", RunConfig()).quality_score == 0.0
    assert build_judge("llm:echo:judge").grader_id == "llm:echo:judge:rubric-v1"  # an LLM judge's model too


def test_the_cli_grades_a_plugin_candidate(plugins: Plugins, tmp_path: Path) -> None:
    plugins.echo()
    suite = write_suite(
        tmp_path / "suite.jsonl",
        [
            {
                "id": "c1",
                "prompt": "hello",
                "task": "qa",
                "baseline_response": {"text": "hello", "model": "big"},
            },
            {
                "id": "c2",
                "prompt": "bye",
                "task": "qa",
                "baseline_response": {"text": "ciao", "model": "big"},
            },
        ],
    )
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    result = invoke("grade", str(suite), "-c", "echo:x", "-j", "exact", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    (stats,) = json.loads(result.stdout)["stats"]
    assert stats["candidate_model"] == "x" and stats["n"] == 2 and stats["mean"] == 0.5
    prompt = invoke("grade", "--prompt", "What is 2+2?", "-b", "echo:a", "-c", "echo:b", "--db", db)
    assert prompt.exit_code == 0, prompt.output
    assert "quality=1.000" in prompt.stdout


def test_entry_points_load_only_when_their_prefix_is_used(plugins: Plugins) -> None:
    plugins.echo()
    assert "echo" in provider_names()  # listed from its metadata, not imported
    adapter_from_spec("openai:m", base_url="http://127.0.0.1:9/v1")
    assert "echo_plugin" not in sys.modules
    adapter_from_spec("echo:m")
    assert "echo_plugin" in sys.modules


def test_a_plugin_installed_after_the_group_was_read_is_found(plugins: Plugins) -> None:
    assert "echo" not in provider_names()  # the group is read, and kept, without it
    plugins.install("echo-plugin", "echo = echo_plugin:make_adapter", {"echo_plugin": ECHO}, clear=False)
    assert adapter_from_spec("echo:late").adapter_id == "echo:late"  # an unknown name reads it again


def test_register_provider_adds_one_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_providers, "_registered", {})

    @register_provider("canned")
    def make(model: str, options: ProviderOptions) -> RecordedAdapter:
        return RecordedAdapter({"q": LLMResponse(text=f"{model} says hi", model=model, provider="canned")})

    assert adapter_from_spec("canned:bot").complete("q", RunConfig()).text == "bot says hi"
    assert provider_names()["canned"].startswith("registered in-process: ")
    for bad in ("", "a:b", "a b"):
        with pytest.raises(ConfigurationError, match="invalid provider name"):
            register_provider(bad)


# -- errors --------------------------------------------------------------------------------------


def test_an_unknown_prefix_lists_the_known_ones_plugins_included(plugins: Plugins) -> None:
    plugins.echo()
    with pytest.raises(ConfigurationError) as caught:
        adapter_from_spec("nope:x")
    assert (
        str(caught.value) == "adapter spec 'nope:x': unknown provider 'nope' (known: echo, openai, recorded)"
    )


BROKEN = [
    pytest.param(
        "broken = broken_plugin:make_adapter",
        "import not_installed_anywhere_xyz\n",
        "failed to load: ModuleNotFoundError: No module named 'not_installed_anywhere_xyz'",
        id="import-error",
    ),
    pytest.param(
        "broken = broken_plugin:no_such_factory",
        "def make_adapter(model, options):\n    return None\n",
        "failed to load: AttributeError:",
        id="missing-factory",
    ),
    pytest.param(
        "broken = broken_plugin:FACTORY",
        "FACTORY = 42\n",
        "is not a factory but int",
        id="not-callable",
    ),
    pytest.param(
        "broken = broken_plugin:make_adapter",
        "def make_adapter(model, options):\n    raise RuntimeError('no credentials for ' + model)\n",
        "failed: RuntimeError: no credentials for x",
        id="factory-raises",
    ),
    pytest.param(
        "broken = broken_plugin:make_adapter",
        "def make_adapter(model, options):\n    return 'not an adapter'\n",
        "returned str, not an LLMAdapter",
        id="not-an-adapter",
    ),
]


@pytest.mark.parametrize(("entry", "source", "problem"), BROKEN)
def test_a_broken_plugin_names_its_distribution_and_entry_point(
    plugins: Plugins, entry: str, source: str, problem: str
) -> None:
    plugins.install("broken-plugin", entry, {"broken_plugin": source})
    with pytest.raises(ConfigurationError) as caught:
        adapter_from_spec("broken:x")
    message = str(caught.value)
    assert message.startswith(f"adapter spec 'broken:x': provider 'broken' (entry point '{entry}' ")
    assert "of distribution broken-plugin 0.1)" in message and problem in message
    adapter_from_spec("openai:m", base_url="http://127.0.0.1:9/v1")  # the others still work


def test_a_plugin_factory_s_own_configuration_error_passes_through(plugins: Plugins) -> None:
    source = """
    from llm_connect.errors import ConfigurationError

    def make_adapter(model, options):
        raise ConfigurationError(f"strict: unknown model {model!r}")
    """
    plugins.install("strict-plugin", "strict = strict_plugin:make_adapter", {"strict_plugin": source})
    with pytest.raises(ConfigurationError, match=r"^strict: unknown model 'x'$"):
        adapter_from_spec("strict:x")


def test_two_plugins_declaring_one_prefix_are_both_named(plugins: Plugins) -> None:
    plugins.echo()
    plugins.install("other-echo", "echo = other_echo:make_adapter", {"other_echo": ECHO})
    with pytest.raises(ConfigurationError) as caught:
        adapter_from_spec("echo:x")
    message = str(caught.value)
    assert "provider 'echo' is declared by more than one plugin" in message
    assert "of distribution echo-plugin 0.1" in message and "of distribution other-echo 0.1" in message
    assert "echo_plugin" not in sys.modules and "other_echo" not in sys.modules


def test_a_plugin_cannot_take_over_a_built_in_prefix(plugins: Plugins) -> None:
    plugins.install("hijack", "openai = hijack_plugin:make_adapter", {"hijack_plugin": ECHO})
    adapter = adapter_from_spec("openai:m", base_url="http://127.0.0.1:9/v1")
    assert isinstance(adapter, OpenAIAdapter)
    assert "hijack_plugin" not in sys.modules
    assert "hijack" not in provider_names()["openai"]


# -- the built-ins are entry points too -----------------------------------------------------------


def test_pyproject_declares_the_built_in_providers() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"][_providers.ENTRY_POINT_GROUP] == dict(_providers.BUILTIN_PROVIDERS)


def test_the_built_ins_are_read_through_the_entry_point_group() -> None:
    _providers.clear_provider_cache()
    installed = {
        ep.name: ep.value
        for ep in distribution("llm-connect").entry_points
        if ep.group == _providers.ENTRY_POINT_GROUP
    }
    assert installed == dict(_providers.BUILTIN_PROVIDERS), (
        "the installed llm-connect metadata predates its provider entry points: reinstall (pip install -e .)"
    )
    names = provider_names()
    for name, value in _providers.BUILTIN_PROVIDERS.items():
        assert names[name].startswith(f"entry point '{name} = {value}' of distribution llm-connect ")


def test_without_installed_metadata_the_built_ins_still_work(
    monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> None:
    monkeypatch.setattr(_providers, "_group_entry_points", list)
    _providers.clear_provider_cache()
    try:
        assert provider_names() == {
            name: f"built-in {value} (no installed entry point)"
            for name, value in _providers.BUILTIN_PROVIDERS.items()
        }
        adapter = adapter_from_spec("openai:gpt-test", base_url=openai_server.base_url)
        assert adapter.complete("hi", RunConfig()).text == "echo: hi"
        with pytest.raises(ConfigurationError, match="read from a suite's responses by the CLI"):
            adapter_from_spec("recorded:baseline")
    finally:
        _providers.clear_provider_cache()
