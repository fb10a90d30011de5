"""persona judge: authenticity = 0.6 style + 0.25 traits + 0.15 lexicon, with the real MiniLM weights."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from llm_connect.adapters import SentenceTransformerEmbeddingAdapter
from llm_connect.errors import CaseDataError, ConfigurationError
from llm_connect.grading import Case, JudgeContext, build_judge
from llm_connect.scoring.persona import PersonaScorer, detect_traits, load_persona
from llm_connect.scoring.persona._traits import formality, tone, verbosity

pytestmark = pytest.mark.embeddings

ANALYST = """\
name: analyst
examples:
  - "Our baseline analysis shows a clear signal in the quarterly revenue data. Variance remains within the expected range."
  - "The regression indicates a statistically significant effect; therefore, we recommend extending the test by two weeks."
traits:
  formality: formal
  tone: technical
  verbosity: concise
lexicon:
  preferred: [baseline, signal, analysis]
  avoided: [lol, hype, crushing it]
"""

ON_VOICE = "Our baseline analysis shows a strong signal in the conversion metrics; variance is within range."
OFF_VOICE = "OMG this launch is crushing it lol!!! Total hype, you're gonna love it"


class CountingEmbedder:
    """The real adapter, counting calls (to check batching and caching)."""

    def __init__(self) -> None:
        self.inner = SentenceTransformerEmbeddingAdapter()
        self.adapter_id = self.inner.adapter_id
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return self.inner.embed(texts)


@pytest.fixture
def persona_file(tmp_path: Path) -> Path:
    path = tmp_path / "analyst.yaml"
    path.write_text(ANALYST)
    return path


@pytest.fixture
def scorer(persona_file: Path) -> PersonaScorer:
    return PersonaScorer(load_persona(persona_file), embedder=SentenceTransformerEmbeddingAdapter())


def test_authenticity_is_the_weighted_sum_of_its_parts(scorer: PersonaScorer) -> None:
    result = scorer.score(ON_VOICE, prompt="How did the test go?")
    d = result.details
    expected = 0.6 * d["style_similarity"] + 0.25 * d["trait_match"] + 0.15 * d["lexicon"]
    assert result.value == pytest.approx(expected)
    assert d["traits_detected"] == {"formality": "formal", "tone": "technical", "verbosity": "concise"}
    assert d["trait_match"] == 1.0 and d["lexicon"] == 1.0
    assert d["embedding_model"] == "sentence-transformers:all-MiniLM-L6-v2"


def test_an_example_response_is_maximally_similar(scorer: PersonaScorer, persona_file: Path) -> None:
    d = scorer.score(load_persona(persona_file).examples[1], prompt="").details
    assert d["style_similarity"] == pytest.approx(1.0, abs=1e-5)
    assert d["closest_example"] == 1


def test_on_voice_beats_off_voice(scorer: PersonaScorer) -> None:
    on = scorer.score(ON_VOICE, prompt="")
    off = scorer.score(OFF_VOICE, prompt="")
    assert on.value > off.value + 0.3
    assert off.details["avoided_found"] == ["lol", "hype", "crushing it"]
    assert off.details["lexicon"] == 0.0  # 0/3 preferred - 0.3, clamped


def test_lexicon_fraction_minus_avoided_penalty(scorer: PersonaScorer) -> None:
    d = scorer.score("The baseline analysis is fine lol", prompt="").details
    assert d["preferred_found"] == ["baseline", "analysis"]
    assert d["lexicon"] == pytest.approx(2 / 3 - 0.1)


def test_persona_without_preferred_words_starts_lexicon_at_one(tmp_path: Path) -> None:
    path = tmp_path / "plain.yaml"
    path.write_text("name: plain\nexamples: ['Hello there.']\nlexicon: {avoided: [darn]}\n")
    plain = PersonaScorer(load_persona(path), embedder=SentenceTransformerEmbeddingAdapter())
    assert plain.score("Hello.", prompt="").details["lexicon"] == 1.0
    assert plain.score("Darn, hello.", prompt="").details["lexicon"] == pytest.approx(0.9)
    assert plain.score("Hello.", prompt="").details["trait_match"] == 1.0  # no traits declared


def test_empty_response_scores_zero(scorer: PersonaScorer) -> None:
    result = scorer.score("   ", prompt="")
    assert result.value == 0.0 and result.details["reason"] == "empty response"


def test_examples_are_embedded_once_and_a_pair_in_one_call(persona_file: Path) -> None:
    embedder = CountingEmbedder()
    scorer = PersonaScorer(load_persona(persona_file), embedder=embedder)
    scorer.score_pair(ON_VOICE, OFF_VOICE, prompt="")
    scorer.score_pair(OFF_VOICE, ON_VOICE, prompt="")
    assert embedder.calls == [2, 2, 2]  # pair, examples (once), pair


def test_judge_many_embeds_a_whole_batch_in_one_call(persona_file: Path) -> None:
    from llm_connect.grading import JudgePair
    from llm_connect.grading.judges import PersonaJudge
    from llm_connect.types import LLMResponse, RunConfig

    embedder = CountingEmbedder()
    judge = PersonaJudge(PersonaScorer(load_persona(persona_file), embedder=embedder))
    texts = [(ON_VOICE, OFF_VOICE), (OFF_VOICE, ON_VOICE), (ON_VOICE, "")]
    pairs = [
        JudgePair(
            LLMResponse(text=a, model="base", provider="test"),
            LLMResponse(text=b, model="cand", provider="test"),
            prompt="p",
            run_config=RunConfig(),
        )
        for a, b in texts
    ]
    batch = judge.judge_many(pairs)
    assert embedder.calls == [5, 2]  # the five non-empty responses, then the examples once
    one_by_one = [
        judge.judge(p.baseline_response, p.candidate_response, prompt=p.prompt, run_config=p.run_config)
        for p in pairs
    ]
    for got, want in zip(batch, one_by_one, strict=True):
        assert got.quality_score == pytest.approx(want.quality_score, abs=1e-6)
        assert got.grader_id == want.grader_id == "persona:analyst"
    assert batch[2].quality_score == 0.0  # an empty candidate


def test_judge_grades_candidate_relative_to_baseline(persona_file: Path) -> None:
    from llm_connect.types import LLMResponse, RunConfig

    judge = build_judge(f"persona:{persona_file}")
    assert judge.grader_id == "persona:analyst"
    result = judge.judge(
        LLMResponse(text=ON_VOICE, model="base", provider="test"),
        LLMResponse(text=OFF_VOICE, model="cand", provider="test"),
        prompt="p",
        run_config=RunConfig(),
    )
    details = dict(result.details)
    assert result.quality_score == pytest.approx(details["candidate_score"] / details["baseline_score"])
    assert details["judge_spec"] == {
        "name": "persona",
        "args": {"persona": str(persona_file)},
        "asks_llm": False,
    }
    assert result.asks_llm is False and judge.asks_llm is False
    assert judge.scorer.embedder.adapter_id == "onnx:all-MiniLM-L6-v2"  # the default backend, ONNX Runtime


def test_persona_from_the_case(persona_file: Path) -> None:
    judge = build_judge("persona", JudgeContext(base_dir=persona_file.parent))
    assert judge.grader_id == "persona"
    case = Case(id="c1", prompt="p", expected={"persona": persona_file.name})
    assert judge.scorer.score(ON_VOICE, prompt="p", case=case).details["persona"] == "analyst"
    with pytest.raises(CaseDataError) as info:
        judge.scorer.score(ON_VOICE, prompt="p", case=Case(id="c2", prompt="p"))
    assert info.value.case_id == "c2" and info.value.field == "expected.persona"


# -- persona files --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        ("name: x\nexamples: [a]\ntraits:\n  tone: grumpy\n", "traits.tone", 4),
        ("name: x\nexamples: []\n", "examples", 2),
        ("examples: [a]\n", "name", 1),
        ("name: x\nexamples:\n  - ok\n  - 3\n", "examples[1]", 4),
        ("name: x\nexamples: [a]\nlexicon:\n  preferred: word\n", "lexicon.preferred", 4),
        ("name: x\nexamples: [a]\ntraits:\n  humour: dry\n", "traits.humour", 4),
        ("name: x\nexample: [a]\n", "example", 2),
    ],
)
def test_bad_persona_file_names_file_field_and_line(tmp_path: Path, text: str, field: str, line: int) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as info:
        build_judge(f"persona:{path}")
    message = str(info.value)
    assert f"{path}:{line}" in message and f"field {field!r}" in message


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nexamples: [a\ntraits: {}\n")
    with pytest.raises(ConfigurationError, match=r"broken\.yaml:\d+: persona file is not valid YAML"):
        build_judge(f"persona:{path}")


def test_missing_persona_file_fails_at_build_time(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read persona file"):
        build_judge("persona:nope.yaml", JudgeContext(base_dir=tmp_path))


# -- trait detectors ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Hey, that's gonna be awesome! Can't wait!", "casual"),
        ("Consequently, the committee shall reconvene regarding the proposal.", "formal"),
        ("Thanks for the update. I will look at it tomorrow and get back to you.", "business_casual"),
    ],
)
def test_formality_detector(text: str, label: str) -> None:
    assert formality(text)[0] == label


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Set `max_retries` in the config; p99 latency drops to 120ms.", "technical"),
        ("Please review the policy and contact our support team.", "professional"),
        ("Thanks so much, glad you enjoyed it!", "friendly"),
        ("So, honestly, I think it's pretty good? You know?", "conversational"),
        ("The river flows north.", "professional"),
    ],
)
def test_tone_detector(text: str, label: str) -> None:
    assert tone(text)[0] == label


@pytest.mark.parametrize(
    ("words", "label"), [(1, "concise"), (50, "concise"), (51, "balanced"), (151, "detailed")]
)
def test_verbosity_bands(words: int, label: str) -> None:
    assert verbosity(" ".join(["word"] * words)) == (label, words)


def test_detectors_are_deterministic() -> None:
    text = "Well, the API's latency is fine! Thanks."
    assert detect_traits(text) == detect_traits(text)
