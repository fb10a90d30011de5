"""The VRTY 1.0.1 scorer and the ``vrty`` judge, on any Python version."""

from __future__ import annotations

import ast
import asyncio
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llm_connect.errors import ConfigurationError, ScorerDataError
from llm_connect.grading.judges import RelativeJudge, VrtyJudge
from llm_connect.grading.judges._registry import build_judge
from llm_connect.scoring import Scorer
from llm_connect.scoring.vrty import (
    GRADER_ID,
    IDF_SHA256,
    MAX_TOKENS,
    VrtyScorer,
    _score,
    analyse,
)
from llm_connect.scoring.vrty._idf import IDF_PATH, idf_table, read_idf_table
from llm_connect.types import LLMResponse, RunConfig, redact_secrets

FRANCE = "What is the capital of France?"
WORDS = [
    "model",
    "answer",
    "latency",
    "river",
    "whale",
    "kubernetes",
    "the",
    "of",
    "captain",
    "ocean",
    "async",
    "ship",
]
LONG_PROMPT = "Which model answers fastest with the lowest latency on the ship?"
LONG_TEXT = " ".join(
    f"Sentence {i} talks about {WORDS[i % 12]} and {WORDS[(i * 7) % 12]}!" for i in range(400)
)

# (prompt, response) -> (composite, relevance, coherence, completeness, conciseness), as
# vrty 1.0.1 computes them on Python 3.11. They must hold on every Python version.
GOLDEN = [
    (FRANCE, "Paris is the capital of France.", (0.8653358523094898, 0.8295310065985426, 1.0, 1.0, 0.5)),
    (FRANCE, "London is the capital of France.", (0.878524350264551, 0.8672124293272888, 1.0, 1.0, 0.5)),
    (FRANCE, "Paris.", (0.35, 0.0, 1.0, 0.0, 1.0)),
    (
        "Explain how transformers use multi-head attention in deep learning models.",
        "Transformers split attention into several heads. Each head attends to different positions! "
        "The outputs are concatenated and projected? Multi-head attention lets the model learn richer relations. "
        "Deep learning models stack many such layers.",
        (0.539531795860155, 0.528366985060325, 0.0009144339032927243, 0.8284603712240208, 0.7058823529411765),
    ),
    (
        "Summarise the meeting notes for the café team, résumé attached.",
        "Café team: the résumé is attached. Notes summarised below.\n\nAll good!",
        (0.54870211465103, 0.6845092481792137, 0.0, 0.7122311077791993, 0.6363636363636364),
    ),
    (
        LONG_PROMPT,
        LONG_TEXT,
        (0.30001918869384103, 0.13376048759835163, 0.5528703582911015, 0.4725001337539923, 0.005859375),
    ),
]


def _dims(result: object) -> tuple[float, ...]:
    return tuple(
        getattr(result, d) for d in ("composite", "relevance", "coherence", "completeness", "conciseness")
    )


def _response(text: str) -> LLMResponse:
    return LLMResponse(text=text, model="m", provider="recorded")


@pytest.mark.parametrize(("prompt", "response", "expected"), GOLDEN)
def test_golden_values_are_reproduced_exactly(
    prompt: str, response: str, expected: tuple[float, ...]
) -> None:
    assert _dims(analyse(prompt, response)) == expected


@pytest.mark.parametrize(
    "response", ["", "   \n\t", "...!?", "東京は日本の首都です", "42 3.14 1,000", "😀 —"]
)
def test_response_without_tokens_scores_zero_everywhere(response: str) -> None:
    result = analyse(FRANCE, response)
    assert _dims(result) == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert result.response_tokens == 0


@pytest.mark.parametrize("prompt", ["", "   ", "?!", "東京"])
def test_empty_prompt_zeroes_relevance_and_completeness_only(prompt: str) -> None:
    result = analyse(prompt, "Ships sail. Ships sail far!")
    assert (result.relevance, result.completeness) == (0.0, 0.0)
    assert result.coherence == analyse(FRANCE, "Ships sail. Ships sail far!").coherence > 0
    assert result.conciseness == 0.6  # {ships, sail, far} / 5 tokens
    assert result.composite == 0.20 * result.coherence + 0.15 * 0.6


def test_stop_word_only_prompt_has_zero_completeness_but_some_relevance() -> None:
    result = analyse("What is it?", "It is what it is.")
    assert result.completeness == 0.0
    assert result.relevance > 0.0


def test_accents_fold_to_base_letters_and_other_scripts_drop() -> None:
    assert analyse("café résumé", "Café RÉSUMÉ 東京") == analyse("cafe resume", "cafe resume")
    assert analyse(FRANCE, "ﬁne ＰＡＲＩＳ") == analyse(FRANCE, "fine PARIS")  # NFKD compatibility forms


def test_tokens_past_the_cap_are_not_scored() -> None:
    head = " ".join(WORDS[i % 12] for i in range(MAX_TOKENS))
    capped = analyse(LONG_PROMPT, head)
    longer = analyse(LONG_PROMPT, head + " capital france paris " * 200)
    assert longer.response_tokens == capped.response_tokens == MAX_TOKENS
    assert (longer.relevance, longer.completeness, longer.conciseness) == (
        capped.relevance,
        capped.completeness,
        capped.conciseness,
    )


def test_sentence_crossing_the_cap_is_dropped_whole() -> None:
    first = " ".join(["whale"] * (MAX_TOKENS - 10)) + "."
    result = analyse("whale", first + " " + " ".join(["ship"] * 20) + ". Whale.")
    assert result.sentences == 1  # the 20-token sentence would cross the cap; later ones are dropped too
    assert result.coherence == 1.0


def test_coherence_is_one_below_two_sentences_and_a_mean_above() -> None:
    assert analyse(FRANCE, "One sentence without a break").coherence == 1.0
    assert analyse(FRANCE, "Ships sail. Ships sail.").coherence == 1.0
    assert analyse(FRANCE, "Ships sail. Whales swim.").coherence == 0.0
    assert analyse(FRANCE, "Ships sail.Whales swim.").sentences == 1  # no whitespace, no break


def test_identical_prompt_and_response_clamp_to_at_most_one() -> None:
    for text in (FRANCE, LONG_PROMPT, LONG_TEXT[:500]):
        result = analyse(text, text)
        assert 0.999999 < result.relevance <= 1.0
        assert result.completeness == 1.0
        assert 0.0 <= result.composite <= 1.0


def test_scorer_follows_the_scorer_protocol() -> None:
    scorer = VrtyScorer()
    assert isinstance(scorer, Scorer)
    assert scorer.name == GRADER_ID == "vrty:1.0.1"
    assert scorer.spec == {"name": "vrty", "args": {}}
    score = scorer.score("Paris is the capital of France.", prompt=FRANCE)
    assert score.value == 0.8653358523094898
    assert score.details["vrty_version"] == "1.0.1"
    assert score.details["idf_sha256"] == IDF_SHA256 == scorer.idf_sha256
    assert score.details["relevance"] == 0.8295310065985426
    assert score.details["response_tokens"] == 6


def test_score_pair_equals_two_single_scores_and_analyses_the_prompt_once() -> None:
    scorer = VrtyScorer()
    prompt = "A prompt used only by this test about whales and ships?"
    _score.analyse_prompt.cache_clear()
    base, cand = scorer.score_pair("Whales and ships.", "Only ships sail here. Whales!", prompt=prompt)
    info = _score.analyse_prompt.cache_info()
    assert (info.misses, info.hits) == (1, 0)
    assert base == scorer.score("Whales and ships.", prompt=prompt)
    assert cand == scorer.score("Only ships sail here. Whales!", prompt=prompt)


def test_vrty_judge_is_built_from_the_registry_and_grades_relative_to_the_baseline() -> None:
    judge = build_judge("vrty")
    assert isinstance(judge, VrtyJudge) and isinstance(judge, RelativeJudge)
    result = judge.judge(
        _response("Paris is the capital of France."),
        _response("Paris."),
        prompt=FRANCE,
        run_config=RunConfig(temperature=0),
    )
    assert result.grader_id == "vrty:1.0.1"
    assert result.quality_score == 0.35 / 0.8653358523094898
    details = json.loads(json.dumps(dict(result.details)))
    assert details["baseline_score"] == 0.8653358523094898
    assert details["candidate_score"] == 0.35
    assert details["baseline"]["relevance"] == 0.8295310065985426
    assert set(details["candidate"]) >= {"relevance", "coherence", "completeness", "conciseness", "composite"}
    assert details["vrty_version"] == "1.0.1"
    assert details["idf_sha256"] == IDF_SHA256
    assert details["weights"] == {
        "relevance": 0.35,
        "coherence": 0.2,
        "completeness": 0.3,
        "conciseness": 0.15,
    }
    assert isinstance(build_judge(details["judge_spec"]), VrtyJudge)
    assert redact_secrets(details) == details  # the ledger's redaction drops nothing


def test_candidate_at_least_as_good_gets_full_quality() -> None:
    judge = build_judge("vrty")
    result = judge.judge(
        _response("Paris."),
        _response("London is the capital of France."),
        prompt=FRANCE,
        run_config=RunConfig(),
    )
    assert result.quality_score == 1.0
    both_empty = judge.judge(_response(""), _response("..."), prompt=FRANCE, run_config=RunConfig())
    assert both_empty.quality_score == 1.0


def test_ajudge_gives_the_same_grade() -> None:
    judge = build_judge("vrty")
    args = (_response("Paris is the capital of France."), _response("France."))
    sync = judge.judge(*args, prompt=FRANCE, run_config=RunConfig())
    async_ = asyncio.run(judge.ajudge(*args, prompt=FRANCE, run_config=RunConfig()))
    assert async_.quality_score == sync.quality_score
    assert dict(async_.details) == dict(sync.details)


def test_vrty_judge_takes_no_options() -> None:
    with pytest.raises(ConfigurationError, match="vrty"):
        build_judge("vrty:weights=1")


def test_shipped_table_matches_its_pinned_digest_and_formula() -> None:
    table = read_idf_table(IDF_PATH)
    assert table.sha256 == IDF_SHA256
    assert table.oov == math.log(table.doc_count + 1) + 1
    assert len(table.idf) == 32017 and len(table.stopwords) == 126
    assert max(table.idf.values()) < table.oov
    notice = (IDF_PATH.parent / "LICENSE-vrty.txt").read_text(encoding="utf-8")
    assert "MIT License" in notice and "Sundeyp Singh" in notice and "vrty" in notice


def test_modified_table_is_rejected_with_a_clear_error(tmp_path: Path) -> None:
    payload = json.loads(gzip.decompress(IDF_PATH.read_bytes()))
    payload["idf"]["whale"] = 1.0
    tampered = tmp_path / "idf.json.gz"
    tampered.write_bytes(gzip.compress(json.dumps(payload).encode("ascii")))
    with pytest.raises(ScorerDataError, match="integrity check") as info:
        read_idf_table(tampered)
    assert str(tampered) in str(info.value) and info.value.path == str(tampered)


def test_corrupted_or_missing_table_is_rejected(tmp_path: Path) -> None:
    corrupt = tmp_path / "idf.json.gz"
    shutil.copyfile(IDF_PATH, corrupt)
    data = bytearray(corrupt.read_bytes())
    data[100] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    with pytest.raises(ScorerDataError, match="SHA-256"):
        read_idf_table(corrupt)
    with pytest.raises(ScorerDataError, match="cannot read"):
        read_idf_table(tmp_path / "missing.json.gz")


def test_scoring_with_a_modified_shipped_table_fails_before_any_score(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llm_connect.scoring.vrty import _idf

    tampered = tmp_path / "idf.json.gz"
    tampered.write_bytes(IDF_PATH.read_bytes() + b"\0")
    monkeypatch.setattr(_idf, "IDF_PATH", tampered)
    monkeypatch.setattr(_idf, "_table", None)  # as in a fresh process: not loaded yet
    scorer = VrtyScorer()  # building the scorer reads nothing
    with pytest.raises(ScorerDataError, match="integrity check"):
        scorer.score("Paris.", prompt=FRANCE)
    with pytest.raises(ScorerDataError):
        build_judge("vrty").judge(_response("a"), _response("b"), prompt="p", run_config=RunConfig())


def _run(code: str, seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    return done.stdout


def test_table_is_read_on_first_use_not_at_import() -> None:
    code = (
        "import llm_connect.scoring.vrty as v\n"
        "from llm_connect.scoring.vrty import _idf\n"
        "from llm_connect.grading.judges._vrty import make_vrty_judge\n"
        "scorer = v.VrtyScorer(); judge = make_vrty_judge(None)\n"
        "print(_idf._table is None)\n"
        "v.analyse('a', 'b')\n"
        "print(_idf._table is not None)\n"
    )
    assert _run(code, "0").split() == ["True", "True"]


def test_results_are_identical_across_hash_seeds() -> None:
    code = (
        "import json\n"
        "from llm_connect.scoring.vrty import analyse\n"
        "from tests.scoring.test_vrty import GOLDEN\n"
        "print(json.dumps([[x.hex() for x in (r.composite, r.relevance, r.coherence, r.completeness,"
        " r.conciseness)] for r in (analyse(p, t) for p, t, _ in GOLDEN)]))\n"
    )
    outputs = {seed: _run(code, seed) for seed in ("0", "12345", "random")}
    assert len(set(outputs.values())) == 1
    expected = [[x.hex() for x in dims] for _, _, dims in GOLDEN]
    assert json.loads(outputs["0"]) == expected


def test_scoring_code_never_uses_sum_or_fsum() -> None:
    """sum() of floats changed in Python 3.12; every float total is an explicit loop."""
    package = Path(_score.__file__).parent
    for module in package.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                assert name not in {"sum", "fsum"}, f"{module.name}:{node.lineno} calls {name}()"


def test_shared_table_is_loaded_once() -> None:
    assert idf_table() is idf_table()
