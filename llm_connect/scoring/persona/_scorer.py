"""PersonaScorer: brand-voice authenticity of a response against a persona file."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from llm_connect.errors import CaseDataError, ConfigurationError
from llm_connect.scoring._base import PathResolver, Score, WorkingDirectory
from llm_connect.scoring.persona._file import Persona, load_persona
from llm_connect.scoring.persona._traits import detect_traits
from llm_connect.scoring.rules._common import case_field, compile_phrase
from llm_connect.values import Case

if TYPE_CHECKING:
    import numpy as np

    from llm_connect.adapters import EmbeddingAdapter

__all__ = [
    "LEXICON_WEIGHT",
    "STYLE_WEIGHT",
    "TRAIT_WEIGHT",
    "PersonaScorer",
]

STYLE_WEIGHT = 0.6
TRAIT_WEIGHT = 0.25
LEXICON_WEIGHT = 0.15
_AVOIDED_PENALTY = 0.1


def _clamp(value: float) -> float:
    return 0.0 if value < 0.0 else 1.0 if value > 1.0 else value


def _unit_rows(vectors: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    unit: np.ndarray = matrix / norms
    return unit


class _Prepared:
    """A persona plus its example embeddings, computed once."""

    def __init__(self, persona: Persona) -> None:
        self.persona = persona
        self.preferred = [(w, compile_phrase(w)) for w in persona.preferred]
        self.avoided = [(w, compile_phrase(w)) for w in persona.avoided]
        self._examples: np.ndarray | None = None
        self._lock = threading.Lock()

    def examples(self, embedder: EmbeddingAdapter) -> np.ndarray:
        with self._lock:
            if self._examples is None:
                self._examples = _unit_rows(embedder.embed(list(self.persona.examples)))
            return self._examples


class PersonaScorer:
    """Authenticity = 0.6 x style + 0.25 x traits + 0.15 x lexicon, each in 0..1.

    * style: the highest cosine similarity between the response's embedding
      and the persona's example responses (embedded once per scorer), clamped
      to 0..1.
    * traits: the fraction of the persona's declared traits (formality, tone,
      verbosity) that the deterministic detectors of
      :mod:`llm_connect.scoring.persona._traits` find in the response; 1.0
      when the persona declares none.
    * lexicon: preferred words found / preferred words, minus 0.1 per distinct
      avoided word found, clamped to 0..1; with no preferred words the first
      term is 1.0 (only avoided words can lower it).

    An empty (or whitespace-only) response scores 0.0. The persona comes from
    the ``persona`` option or, when absent, the case's ``expected.persona``
    path; the grader id is ``persona:<name>`` or plain ``persona`` then.
    """

    def __init__(
        self,
        persona: Persona | None = None,
        *,
        embedder: EmbeddingAdapter | Callable[[], EmbeddingAdapter],
        context: PathResolver | None = None,
    ) -> None:
        self._embedder_source = embedder
        self._embedder: EmbeddingAdapter | None = None
        self._context: PathResolver = context or WorkingDirectory()
        self._lock = threading.Lock()
        self._by_path: dict[Path, _Prepared] = {}
        self._fixed = _Prepared(persona) if persona is not None else None
        args: dict[str, Any] = {}
        if persona is not None:
            if persona.path is None:
                raise ConfigurationError("judge 'persona': the persona has no file path for its spec")
            args["persona"] = str(persona.path)
        self.name = f"persona:{persona.name}" if persona is not None else "persona"
        self.spec: Mapping[str, Any] = {"name": "persona", "args": args}

    def __repr__(self) -> str:
        return f"PersonaScorer({self.name!r})"

    @property
    def embedder(self) -> EmbeddingAdapter:
        """The embedding adapter this scorer embeds with (built on first use, then kept), so
        session stability (:func:`~llm_connect.scoring.persona.session_stabilities`) reuses it."""
        with self._lock:
            if self._embedder is None:
                source = self._embedder_source
                made = source if hasattr(source, "embed") else cast(Callable[[], Any], source)()
                self._embedder = cast("EmbeddingAdapter", made)
            return self._embedder

    def _embed(self, texts: list[str]) -> np.ndarray:
        return _unit_rows(self.embedder.embed(texts))

    def _prepared(self, case: Case | None) -> _Prepared:
        if self._fixed is not None:
            return self._fixed
        raw = case_field(case, "persona")
        case_id = case.id if case is not None else None
        if not isinstance(raw, str) or not raw.strip():
            raise CaseDataError(
                "no persona: give the judge option 'persona' (a YAML file) or the case field "
                "expected.persona",
                case_id=case_id,
                field="expected.persona",
            )
        path = self._context.resolve_path(raw).resolve()
        with self._lock:
            prepared = self._by_path.get(path)
        if prepared is None:
            try:
                prepared = _Prepared(load_persona(path))
            except ConfigurationError as exc:
                raise CaseDataError(str(exc), case_id=case_id, field="expected.persona") from None
            with self._lock:
                prepared = self._by_path.setdefault(path, prepared)
        return prepared

    def _embedder_id(self) -> str | None:
        return getattr(self._embedder, "adapter_id", None)

    def _score_one(self, text: str, vector: np.ndarray | None, prepared: _Prepared) -> Score:
        persona = prepared.persona
        base: dict[str, Any] = {"persona": persona.name, "persona_sha256": persona.sha256}
        if vector is None:
            return Score(0.0, {**base, "reason": "empty response"})
        examples = prepared.examples(self._embedder)  # type: ignore[arg-type]
        cosines = examples @ vector
        best = int(cosines.argmax())
        style = _clamp(float(cosines[best]))
        detected = detect_traits(text)
        matched = [t for t, want in persona.traits.items() if detected[t] == want]
        traits = len(matched) / len(persona.traits) if persona.traits else 1.0
        preferred_found = [w for w, pattern in prepared.preferred if pattern.search(text)]
        avoided_found = [w for w, pattern in prepared.avoided if pattern.search(text)]
        preferred = len(preferred_found) / len(prepared.preferred) if prepared.preferred else 1.0
        lexicon = _clamp(preferred - _AVOIDED_PENALTY * len(avoided_found))
        value = _clamp(STYLE_WEIGHT * style + TRAIT_WEIGHT * traits + LEXICON_WEIGHT * lexicon)
        details = {
            **base,
            "authenticity": value,
            "style_similarity": style,
            "closest_example": best,
            "trait_match": traits,
            "traits_declared": dict(persona.traits),
            "traits_detected": {k: detected[k] for k in ("formality", "tone", "verbosity")},
            "traits_matched": matched,
            "trait_evidence": detected["evidence"],
            "lexicon": lexicon,
            "preferred_found": preferred_found,
            "avoided_found": avoided_found,
            "embedding_model": self._embedder_id(),
        }
        return Score(value, details)

    def score_items(self, items: Sequence[tuple[str, Case | None]]) -> list[Score]:
        """Score ``(text, case)`` items (cases may name different personas), embedding
        every non-empty text in one call."""
        prepared = [self._prepared(case) for _, case in items]
        live = [i for i, (text, _) in enumerate(items) if text.strip()]
        vectors = self._embed([items[i][0] for i in live]) if live else None
        by_index = {} if vectors is None else {i: vectors[row] for row, i in enumerate(live)}
        return [self._score_one(text, by_index.get(i), prepared[i]) for i, (text, _) in enumerate(items)]

    def score_many(self, texts: Sequence[str], *, prompt: str, case: Case | None = None) -> list[Score]:
        """Score several responses to one case, embedding all non-empty ones in one call."""
        return self.score_items([(text, case) for text in texts])

    def score(self, text: str, *, prompt: str, case: Case | None = None) -> Score:
        """Authenticity of ``text``; details hold every component and its evidence."""
        return self.score_many([text], prompt=prompt, case=case)[0]

    def score_pair(
        self, baseline_text: str, candidate_text: str, *, prompt: str, case: Case | None = None
    ) -> tuple[Score, Score]:
        """Both responses' scores from one embedding call."""
        base, cand = self.score_many([baseline_text, candidate_text], prompt=prompt, case=case)
        return base, cand
