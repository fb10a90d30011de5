"""PersonaJudge: brand-voice authenticity, candidate relative to baseline (``--judge persona:FILE``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_connect.errors import ConfigurationError
from llm_connect.grading._protocols import JudgePair
from llm_connect.grading._results import GradingResult
from llm_connect.grading.judges._options import check_no_unknown
from llm_connect.grading.judges._registry import JudgeContext
from llm_connect.grading.judges._relative import RelativeJudge
from llm_connect.scoring.persona import PersonaScorer, load_persona

__all__ = ["PersonaJudge", "make_persona_judge"]


class PersonaJudge(RelativeJudge):
    """The persona judge: a :class:`RelativeJudge` whose :meth:`judge_many` embeds
    every response of a batch in one call (the batch engine uses it)."""

    scorer: PersonaScorer

    def __init__(self, scorer: PersonaScorer) -> None:
        super().__init__(scorer)

    def judge_many(self, pairs: Sequence[JudgePair]) -> list[GradingResult]:
        """Grade every pair, in order, with one embedding call for all their responses."""
        items = [
            (text, pair.case)
            for pair in pairs
            for text in (pair.baseline_response.text, pair.candidate_response.text)
        ]
        scores = self.scorer.score_items(items)
        return [
            self.grading_result(self.compare(scores[2 * i], scores[2 * i + 1]), pair)
            for i, pair in enumerate(pairs)
        ]


def make_persona_judge(context: JudgeContext, persona: str | None = None, **unknown: Any) -> PersonaJudge:
    """Registry factory for ``persona`` (``persona:voices/analyst.yaml``).

    The persona file is read and validated here (a bad file raises
    :class:`~llm_connect.errors.ConfigurationError` naming file, field and
    line); without ``persona`` each case must name one in ``expected.persona``.
    The embedding model is loaded on the first score.
    """
    check_no_unknown("persona", unknown, ["persona"])
    loaded = None
    if persona is not None:
        if not isinstance(persona, str) or not persona.strip():
            raise ConfigurationError(
                f"judge 'persona': option 'persona' must be a file path, not {persona!r}"
            )
        loaded = load_persona(context.resolve_path(persona).resolve())
    return PersonaJudge(PersonaScorer(loaded, embedder=context.embedding_adapter, context=context))
