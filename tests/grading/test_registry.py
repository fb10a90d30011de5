"""The judge registry: names, command-line specs, stored specs, plugins."""

from __future__ import annotations

import warnings

import pytest

from llm_connect import ExactMatchJudge
from llm_connect.errors import ConfigurationError
from llm_connect.grading import build_judge, judge_names, parse_judge_spec, register_judge
from llm_connect.grading.judges import JudgeContext, format_judge_spec
from llm_connect.grading.judges._registry import is_llm_grader_id, judge_asks_llm
from tests.fixtures.loops import run as run_closing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("exact", {"name": "exact", "args": {}}),
        ("exact:true", {"name": "exact", "args": {"normalize": True}}),
        ("exact:normalize=true", {"name": "exact", "args": {"normalize": True}}),
        (
            "llm:openai:gpt-4o-mini,seed=7",
            {"name": "llm", "args": {"model": "openai:gpt-4o-mini", "seed": 7}},
        ),
        ("format:json", {"name": "format", "args": {"fmt": "json"}}),
        ("length:min_words=5,max_words=200", {"name": "length", "args": {"min_words": 5, "max_words": 200}}),
    ],
)
def test_parse_judge_spec(text: str, expected: dict) -> None:
    assert parse_judge_spec(text) == expected


def test_format_is_the_inverse_of_parse() -> None:
    for text in ["exact", "length:max_words=200,min_words=5", "llm:model=openai:gpt-4o,seed=3"]:
        assert parse_judge_spec(format_judge_spec(parse_judge_spec(text))) == parse_judge_spec(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nosuch", "unknown judge 'nosuch'"),
        ("", "empty judge spec"),
        ("embedding:foo", "takes no positional argument"),
        ("format:json,xml", "more than one positional"),
        ("format:json,fmt=xml", "gives 'fmt' twice"),
    ],
)
def test_bad_specs_raise_configuration_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_judge_spec(text)


def test_unknown_option_is_rejected_when_building() -> None:
    with pytest.raises(ValueError, match="judge 'exact'"):
        build_judge("exact:colour=blue")


def test_every_builtin_name_is_listed() -> None:
    names = judge_names()
    for name in [
        "exact",
        "embedding",
        "llm",
        "vrty",
        "format",
        "schema",
        "correctness",
        "length",
        "relevance",
        "completeness",
        "persona",
        "safety",
    ]:
        assert name in names


def test_register_judge_adds_a_buildable_name() -> None:
    @register_judge("always-one", summary="test judge")
    def make(context: JudgeContext, *, normalize: bool = False) -> ExactMatchJudge:
        return ExactMatchJudge(normalize=normalize)

    assert "always-one" in judge_names()
    judge = build_judge("always-one:normalize=true")
    assert judge.grader_id == "exact:normalized"


def test_is_llm_grader_id_guesses_from_the_name() -> None:
    """A fallback for grades stored before judges declared ``asks_llm``."""
    assert is_llm_grader_id("llm:openai:gpt-4o-mini:rubric-v1")
    assert is_llm_grader_id("safety:default+llm:openai:gpt-4o")
    assert not is_llm_grader_id("embedding:all-MiniLM-L6-v2")
    assert not is_llm_grader_id("exact")


def test_third_party_judge_loads_from_the_entry_point_group(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "shoutjudge.py").write_text(
        "from llm_connect import ExactMatchJudge\n"
        "def make(context, *, normalize=True):\n"
        "    judge = ExactMatchJudge(normalize=normalize)\n"
        "    judge.grader_id = 'shout'\n"
        "    return judge\n"
    )
    dist = tmp_path / "shoutjudge-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shoutjudge\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[llm_connect.judges]\nshout = shoutjudge:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "shout" in judge_names()
    judge = build_judge("shout")
    assert judge.grader_id == "shout"


# -- asks_llm: judges declare whether they ask an LLM -------------------------------------


class _Embedder:
    adapter_id = "scripted:vectors"

    def embed(self, texts):  # type: ignore[no-untyped-def]
        return [[1.0, 0.0] for _ in texts]


def _pair_result(judge):  # type: ignore[no-untyped-def]
    from llm_connect.types import LLMResponse, RunConfig

    return judge.judge(
        LLMResponse(text="Paris.", model="b", provider="test"),
        LLMResponse(text="Paris!", model="c", provider="test"),
        prompt="Capital of France?",
        run_config=RunConfig(),
    )


@pytest.mark.parametrize(
    ("spec", "asks"),
    [("exact", False), ("exact:true", False), ("tools", False), ("embedding", False), ("vrty", False),
     ("relevance", False), ("safety", False), ("llm:openai:judge", True),
     ("safety:judge_model=openai:judge", True)],
)  # fmt: skip
def test_builtin_judges_declare_asks_llm_on_themselves_their_results_and_specs(
    spec: str,
    asks: bool,
    openai_server,  # type: ignore[no-untyped-def]
) -> None:
    from llm_connect.adapters import OpenAIAdapter

    openai_server.responder = lambda body: {"quality_score": 0.5, "safety_score": 1.0, "notes": "ok"}
    context = JudgeContext(
        make_llm_adapter=lambda s: OpenAIAdapter(s.partition(":")[2], base_url=openai_server.base_url),
        make_embedding_adapter=_Embedder,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # built-ins never warn
        judge = build_judge(spec, context)
    assert judge.asks_llm is asks and judge_asks_llm(judge) is asks
    result = _pair_result(judge)
    assert result.asks_llm is asks
    stored = dict(result.details)["judge_spec"]
    assert stored["asks_llm"] is asks
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rebuilt = build_judge(stored, context)  # the stored spec, asks_llm key and all, rebuilds it
    assert rebuilt.grader_id == judge.grader_id and rebuilt.asks_llm is asks


class _PluginJudge:
    """A third-party judge grading through a model of its own under a name without ``llm:``."""

    grader_id = "house-grader:v2"

    def judge(self, baseline_response, candidate_response, *, prompt, run_config, case=None):  # type: ignore[no-untyped-def]
        from llm_connect.grading import GradingResult

        return GradingResult(0.5, "plugin", self.grader_id, baseline_response, candidate_response)

    async def ajudge(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return self.judge(*args, **kwargs)


class _DeclaringPluginJudge(_PluginJudge):
    asks_llm = True


@pytest.fixture
def plugins():  # type: ignore[no-untyped-def]
    from llm_connect.grading.judges import _registry

    names = ["house-llm", "house-unknown"]
    yield names
    for name in names:
        _registry._registered.pop(name, None)


def test_a_plugin_that_declares_asks_llm_is_reported_as_asking_an_llm(plugins) -> None:  # type: ignore[no-untyped-def]
    register_judge("house-llm")(lambda context: _DeclaringPluginJudge())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        judge = build_judge("house-llm")
    assert not is_llm_grader_id(judge.grader_id)  # the name says nothing...
    assert judge_asks_llm(judge) is True  # ...the judge does


def test_a_plugin_without_asks_llm_is_treated_as_asking_one_with_a_warning(plugins) -> None:  # type: ignore[no-untyped-def]
    register_judge("house-unknown")(lambda context: _PluginJudge())
    with pytest.warns(UserWarning, match=r"judge plugin 'house-unknown' .*asks_llm") as record:
        judge = build_judge("house-unknown")
    assert "its author should set" in str(record[0].message).lower()
    assert judge_asks_llm(judge) is True
    assert judge.asks_llm is True  # marked, so whoever reads the attribute sees it too


def test_judge_asks_llm_without_the_attribute_or_with_a_non_boolean() -> None:
    assert judge_asks_llm(_PluginJudge()) is True
    odd = _PluginJudge()
    odd.asks_llm = "no"  # type: ignore[attr-defined]
    assert judge_asks_llm(odd) is True
    assert judge_asks_llm(ExactMatchJudge()) is False


def test_an_entry_point_plugin_without_asks_llm_warns_naming_it(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "graderplugin.py").write_text(
        "class Judge:\n"
        "    grader_id = 'graderplugin'\n"
        "    def judge(self, *a, **k): raise NotImplementedError\n"
        "    async def ajudge(self, *a, **k): raise NotImplementedError\n"
        "def make(context):\n"
        "    return Judge()\n"
    )
    dist = tmp_path / "graderplugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: graderplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[llm_connect.judges]\ngraderplugin = graderplugin:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(UserWarning, match=r"judge plugin 'graderplugin' \(graderplugin:make\)"):
        judge = build_judge("graderplugin")
    assert judge_asks_llm(judge) is True


def test_paired_grading_flags_the_results_of_a_judge_that_asks_an_llm(openai_server) -> None:  # type: ignore[no-untyped-def]
    """The plugin's results leave ``asks_llm`` at False; its declaration wins (sync and async)."""

    from llm_connect.adapters import OpenAIAdapter
    from llm_connect.grading import PairedGrader
    from llm_connect.types import RunConfig

    base = OpenAIAdapter("base", base_url=openai_server.base_url)
    cand = OpenAIAdapter("cand", base_url=openai_server.base_url)
    judges = [_DeclaringPluginJudge(), ExactMatchJudge()]
    grader = PairedGrader(judges[0])
    assert _DeclaringPluginJudge().judge(*[_pair_result(ExactMatchJudge()).baseline_response] * 2,
                                         prompt="p", run_config=RunConfig()).asks_llm is False  # fmt: skip
    flagged, exact = grader.grade_with(judges, base, cand, "Q?", RunConfig())
    assert (flagged.asks_llm, exact.asks_llm) == (True, False)
    aflagged, aexact = run_closing(grader.agrade_with(judges, base, cand, "Q?", RunConfig()))
    assert (aflagged.asks_llm, aexact.asks_llm) == (True, False)
