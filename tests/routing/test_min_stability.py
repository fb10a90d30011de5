"""Router.decide(..., min_stability=...): route only to candidates whose stored stability verdict is good enough."""

from __future__ import annotations

import pytest

from llm_connect.errors import ConfigurationError
from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger
from llm_connect.routing import Router
from llm_connect.types import LLMResponse
from tests.cli._util import invoke


def fill(ledger: QualityLedger, cases: int = 80) -> None:
    base = LLMResponse("a", "big", "openai", cost_usd=0.01)
    cand = LLMResponse("a", "small", "openai", cost_usd=0.001)
    results = [GradingResult(1.0, "same", "exact", base, cand, prompt=f"q{i}") for i in range(cases)]
    for i, r in enumerate(results):
        ledger.record(r, task="support", run_id="r", case_id=f"c{i}")


def analysis(ledger: QualityLedger, verdict: str, model: str = "small", task: str = "support") -> int:
    score = {"SAFE": 0.95, "RISKY": 0.8, "DO_NOT_SHIP": 0.5}[verdict]
    return ledger.record_stability(
        task=task,
        model=model,
        adapter_id=f"openai:{model}",
        prompt_sha256="0" * 64,
        runs=20,
        successful_runs=20,
        overall_score=score,
        verdict=verdict,
        report={"version": 1},
    )


def decide(ledger: QualityLedger, **kw: object):  # type: ignore[no-untyped-def]
    return Router(ledger).decide(
        "support", baseline="big", candidates=["small"], grader_id="exact", min_quality=0.8, **kw
    )


def test_without_min_stability_nothing_changes(ledger_url: str) -> None:
    with QualityLedger(ledger_url) as ledger:
        fill(ledger)
        decision = decide(ledger)
        assert decision.model == "small" and decision.min_stability is None
        assert decision.candidates[0].stability is None and decision.candidates[0].stability_ok


def test_a_candidate_needs_a_stored_analysis_good_enough_on_the_task(ledger_url: str) -> None:
    with QualityLedger(ledger_url) as ledger:
        fill(ledger)
        missing = decide(ledger, min_stability="SAFE")
        assert missing.model == "big"
        assert "no stability analysis stored on support" in missing.reason
        analysis(ledger, "SAFE", task="other")  # another task's analysis does not count
        assert decide(ledger, min_stability="SAFE").model == "big"
        analysis(ledger, "RISKY")
        risky = decide(ledger, min_stability="SAFE")
        assert risky.model == "big" and "stability RISKY on support" in risky.reason
        assert risky.candidates[0].stability == "RISKY" and not risky.candidates[0].stability_ok
        assert decide(ledger, min_stability="RISKY").model == "small"
        analysis(ledger, "SAFE")  # the newest analysis is the one that counts
        safe = decide(ledger, min_stability="SAFE")
        assert safe.model == "small" and "stability SAFE on support" in safe.reason
        analysis(ledger, "DO_NOT_SHIP")
        assert decide(ledger, min_stability="RISKY").model == "big"
        stored = ledger.decisions("support")
        assert stored[-1].min_stability == "RISKY" and stored[-1].candidates[0].stability == "DO_NOT_SHIP"


def test_stability_does_not_rescue_a_candidate_without_quality_evidence(ledger_url: str) -> None:
    with QualityLedger(ledger_url) as ledger:
        fill(ledger, cases=5)
        analysis(ledger, "SAFE")
        assert decide(ledger, min_stability="SAFE").model == "big"


@pytest.mark.parametrize("bad", ["safe", "GREAT", "DO_NOT_SHIP_ME", ""])
def test_an_unknown_min_stability_is_a_configuration_error(ledger_url: str, bad: str) -> None:
    with QualityLedger(ledger_url) as ledger, pytest.raises(ConfigurationError, match="min_stability"):
        decide(ledger, min_stability=bad)


def test_route_cli_min_stability(tmp_path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'l.db'}"
    with QualityLedger(db) as ledger:
        fill(ledger)
        analysis(ledger, "RISKY")
    args = [
        "route",
        "--task",
        "support",
        "-b",
        "big",
        "-c",
        "small",
        "-j",
        "exact",
        "--min-quality",
        "0.8",
        "--db",
        db,
    ]
    result = invoke(*args, "--min-stability", "SAFE")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "big" and "stability RISKY" in result.stdout
    assert invoke(*args, "--min-stability", "risky").stdout.splitlines()[0] == "small"
    bad = invoke(*args, "--min-stability", "GOOD")
    assert bad.exit_code == 2 and "--min-stability" in bad.stderr


def test_one_list_of_stability_verdicts_serves_the_ledger_routing_and_the_analysis() -> None:
    from typing import get_args

    from llm_connect.ledger._chat import VERDICTS
    from llm_connect.routing import STABILITY_ORDER
    from llm_connect.stability import Verdict
    from llm_connect.values import STABILITY_VERDICTS

    assert VERDICTS is STABILITY_ORDER is STABILITY_VERDICTS
    assert get_args(Verdict) == STABILITY_VERDICTS
