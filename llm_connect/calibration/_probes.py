"""Bias probes of a judge: position, length and self-preference.

Each probe turns scores into a small, documented, JSON-strict figure with a
``flagged`` verdict. The definitions (also in ``contracts/calibration.md``):

Position
    The LLM judge grades a sample of stored pairs a second time with baseline
    and candidate swapped. ``s`` is the original score (candidate graded
    against baseline), ``s'`` the swapped one (baseline graded against
    candidate). The score ``scale`` says how to compare them:

    * ``"relative"`` (default; :class:`~llm_connect.grading.GradingResult`'s
      meaning, 1.0 = "the graded response is at least as good"): a judge
      without position bias gives at least one orientation a pass, because two
      responses cannot each be worse than the other. A pair is *consistent*
      iff ``max(s, s') >= threshold``; the *shift* of a pair is
      ``max(s, s') - 1`` (0 for an unbiased judge, negative when the judge marks
      down whichever response sits in the candidate slot). A judge that
      favours the candidate slot is indistinguishable from a tie on this scale.
    * ``"symmetric"`` (0.5 = equally good, ``1 - s`` is the grade of the other
      side): the *mirrored* swapped score is ``m = 1 - s'``; a pair is
      consistent iff ``(s >= threshold) == (m >= threshold)``; the shift is
      ``s - m = s + s' - 1`` (positive favours the candidate slot, negative
      the baseline slot).

    The figure is the consistency rate and the mean shift, each with a
    bootstrap interval; flagged when the rate is below the minimum.

Length
    ``ratio = (len(candidate) + 1) / (len(baseline) + 1)`` with lengths in
    characters when texts are stored, else in completion tokens. The figure is
    Spearman's rho of each judge's scores against the ratio, for the judge
    and every reference; ``excess = rho_judge - max(rho_reference)``. Flagged
    when ``excess > margin`` (default 0.2): the judge follows length more than
    the most length-following reference does.

Self-preference
    Family of a model name by :func:`model_family`. Pairs are split by whether
    the candidate model's family equals the judge model's. The figure is the
    judge's mean score in each group and their difference, plus, per
    reference, the difference of the judge-minus-reference residual between
    the groups (which removes genuine quality differences the reference also
    sees). The deciding figure is the smallest residual difference (or the raw
    difference if no reference graded the pairs); flagged when it exceeds the
    margin (default 0.1) and its bootstrap interval lies above 0. Needs at
    least ``min_group`` pairs in each group.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llm_connect.calibration._stats import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_SEED,
    MIN_PAIRS,
    Estimate,
    bootstrap_indices,
    estimate_from_replicates,
    mean_with_ci,
    spearman_with_ci,
)

__all__ = [
    "SCALES",
    "LengthProbe",
    "PositionProbe",
    "SelfPreferenceProbe",
    "length_probe",
    "length_ratio",
    "model_family",
    "position_probe",
    "self_preference_probe",
]

SCALES = ("relative", "symmetric")
"""Score scales the position probe understands (see the module docstring)."""

# (prefix regex on the bare model name, family); first match wins.
_FAMILIES: tuple[tuple[str, str], ...] = (
    (r"(gpt|chatgpt|o[1-9])([-.]|$)|text-davinci|davinci", "gpt"),
    (r"claude", "claude"),
    (r"(meta-)?llama|codellama", "llama"),
    (r"gemini", "gemini"),
    (r"gemma", "gemma"),
    (r"mistral|mixtral|codestral|ministral|magistral|devstral|pixtral", "mistral"),
    (r"qwen|qwq", "qwen"),
    (r"deepseek", "deepseek"),
    (r"phi-?\d", "phi"),
    (r"command", "command"),
    (r"grok", "grok"),
)


def model_family(model: str) -> str:
    """The provider-agnostic family of a model name, for the self-preference probe.

    The provider prefix (``openai:``, ``openrouter/``, ``meta-llama/``) is
    dropped and the rest lower-cased; then the first matching prefix wins:
    ``gpt-*``, ``chatgpt-*``, ``o1``/``o3``/``o4*``, ``davinci`` -> ``gpt``;
    ``claude*`` -> ``claude``; ``llama*``, ``meta-llama*``, ``codellama`` -> ``llama``;
    ``gemini*``; ``gemma*``; ``mistral``/``mixtral``/``codestral``/``ministral``/... ->
    ``mistral``; ``qwen*``/``qwq`` -> ``qwen``; ``deepseek*``; ``phi-N`` -> ``phi``;
    ``command*``; ``grok*``. Any other name's family is its text up to the
    first ``-``, ``_``, ``.``, ``:`` or digit (``"judge-v2"`` -> ``"judge"``).
    """
    name = model.strip().lower()
    name = name.rsplit("/", 1)[-1]
    # "provider:model" (adapter ids) and "llm:provider:model:rubric" (grader ids) -> model part
    parts = [p for p in name.split(":") if p]
    if len(parts) > 1:
        known = {
            "llm",
            "openai",
            "azure",
            "anthropic",
            "google",
            "vertex",
            "ollama",
            "groq",
            "together",
            "openrouter",
            "mistral",
            "bedrock",
            "recorded",
            "litellm",
            "deepseek",
            "fireworks",
            "xai",
        }
        while len(parts) > 1 and parts[0] in known:
            parts = parts[1:]
        name = parts[0]
    for pattern, family in _FAMILIES:
        if re.match(pattern, name):
            return family
    match = re.match(r"[a-z]+", name)
    return match.group(0) if match else name


def length_ratio(candidate_length: float, baseline_length: float) -> float:
    """``(candidate + 1) / (baseline + 1)``: defined for empty responses too."""
    return (float(candidate_length) + 1.0) / (float(baseline_length) + 1.0)


# -- position --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PositionProbe:
    """Consistency of the judge when baseline and candidate swap places."""

    status: str
    """``"ok"``, ``"insufficient data"`` or ``"not run"``."""
    reason: str | None
    n: int
    """Pairs graded both ways."""
    scale: str
    threshold: float
    consistency_rate: Estimate
    mean_shift: Estimate
    inconsistent: int
    """Pairs whose two verdicts contradict each other."""
    min_consistency: float
    flagged: bool
    errors: int = 0
    """Swapped gradings that failed (judge errors); not counted in ``n``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-strict form."""
        return {
            "status": self.status,
            "reason": self.reason,
            "n": self.n,
            "scale": self.scale,
            "threshold": self.threshold,
            "consistency_rate": self.consistency_rate.to_dict(),
            "mean_shift": self.mean_shift.to_dict(),
            "inconsistent": self.inconsistent,
            "min_consistency": self.min_consistency,
            "flagged": self.flagged,
            "errors": self.errors,
        }


def position_probe(
    original: Sequence[float],
    swapped: Sequence[float],
    *,
    threshold: float = 0.5,
    scale: str = "relative",
    min_consistency: float = 0.8,
    min_pairs: int = MIN_PAIRS,
    errors: int = 0,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
) -> PositionProbe:
    """The position figure from original and swapped scores of the same pairs (module docstring)."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, not {scale!r}")
    s = np.asarray(original, dtype=np.float64)
    sw = np.asarray(swapped, dtype=np.float64)
    if s.shape != sw.shape:
        raise ValueError(f"original and swapped scores differ in length ({s.size} vs {sw.size})")
    n = int(s.size)
    if n < max(min_pairs, 1):
        why = f"insufficient data: {n} pairs graded both ways < minimum {min_pairs}"
        none = Estimate.undefined(why)
        return PositionProbe(
            "insufficient data", why, n, scale, threshold, none, none, 0, min_consistency, False, errors
        )
    if scale == "relative":
        best = np.maximum(s, sw)
        consistent = best >= threshold
        shift = best - 1.0
    else:
        mirrored = 1.0 - sw
        consistent = (s >= threshold) == (mirrored >= threshold)
        shift = s - mirrored
    idx = bootstrap_indices(n, n_boot=n_boot, seed=seed)
    rate = estimate_from_replicates(float(consistent.mean()), consistent[idx].mean(axis=1))
    mean_shift = estimate_from_replicates(float(shift.mean()), shift[idx].mean(axis=1))
    assert rate.value is not None
    return PositionProbe(
        status="ok",
        reason=None,
        n=n,
        scale=scale,
        threshold=float(threshold),
        consistency_rate=rate,
        mean_shift=mean_shift,
        inconsistent=int(n - consistent.sum()),
        min_consistency=float(min_consistency),
        flagged=bool(rate.value < min_consistency),
        errors=errors,
    )


# -- length ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LengthProbe:
    """How much each judge's score follows the candidate/baseline length ratio."""

    status: str
    reason: str | None
    n: int
    unit: str
    """``"characters"`` or ``"completion_tokens"``."""
    judge: Estimate
    """Spearman's rho of the judge's score against the length ratio."""
    references: Mapping[str, Estimate]
    """The same figure for each reference judge (by grader id)."""
    excess: float | None
    """``judge - max(references)``; ``None`` when either side is undefined."""
    margin: float
    flagged: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-strict form."""
        return {
            "status": self.status,
            "reason": self.reason,
            "n": self.n,
            "unit": self.unit,
            "judge": self.judge.to_dict(),
            "references": {k: v.to_dict() for k, v in sorted(self.references.items())},
            "excess": self.excess,
            "margin": self.margin,
            "flagged": self.flagged,
        }


def length_probe(
    judge_scores: Sequence[float],
    ratios: Sequence[float],
    references: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    unit: str = "characters",
    margin: float = 0.2,
    min_pairs: int = MIN_PAIRS,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
) -> LengthProbe:
    """The length figure. ``references`` maps grader id -> (scores, ratios) of the pairs it graded."""
    n = len(judge_scores)
    if n < max(min_pairs, 1):
        why = f"insufficient data: {n} pairs with known lengths < minimum {min_pairs}"
        return LengthProbe(
            "insufficient data", why, n, unit, Estimate.undefined(why), {}, None, margin, False
        )
    judge = spearman_with_ci(judge_scores, ratios, n_boot=n_boot, seed=seed)
    refs: dict[str, Estimate] = {}
    for ref_id, (scores, ref_ratios) in references.items():
        if len(scores) < max(min_pairs, 1):
            refs[ref_id] = Estimate.undefined(f"insufficient data: {len(scores)} pairs < minimum {min_pairs}")
        else:
            refs[ref_id] = spearman_with_ci(scores, ref_ratios, n_boot=n_boot, seed=seed)
    defined = [e.value for e in refs.values() if e.value is not None]
    excess = None
    reason = None
    if judge.value is None:
        reason = f"judge's length correlation undefined ({judge.reason})"
    elif not defined:
        reason = "no reference has a defined length correlation to compare with"
    else:
        excess = float(judge.value - max(defined))
    return LengthProbe(
        status="ok",
        reason=reason,
        n=n,
        unit=unit,
        judge=judge,
        references=refs,
        excess=excess,
        margin=float(margin),
        flagged=excess is not None and excess > margin,
    )


# -- self-preference -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SelfPreferenceProbe:
    """Does the judge favour candidates of its own model family?"""

    status: str
    reason: str | None
    judge_family: str
    n_same: int
    n_other: int
    mean_same: Estimate
    mean_other: Estimate
    difference: Estimate
    """``mean_same - mean_other`` of the judge's scores."""
    residual_difference: Mapping[str, Estimate] = field(default_factory=dict)
    """Per reference: the same difference of ``judge - reference`` scores."""
    margin: float = 0.1
    flagged: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-strict form."""
        return {
            "status": self.status,
            "reason": self.reason,
            "judge_family": self.judge_family,
            "n_same": self.n_same,
            "n_other": self.n_other,
            "mean_same": self.mean_same.to_dict(),
            "mean_other": self.mean_other.to_dict(),
            "difference": self.difference.to_dict(),
            "residual_difference": {k: v.to_dict() for k, v in sorted(self.residual_difference.items())},
            "margin": self.margin,
            "flagged": self.flagged,
        }


def _difference(a: np.ndarray, b: np.ndarray, *, n_boot: int, seed: int) -> Estimate:
    """Mean of ``a`` minus mean of ``b`` with a two-sample (stratified) bootstrap interval."""
    ia = bootstrap_indices(a.size, n_boot=n_boot, seed=seed)
    ib = bootstrap_indices(b.size, n_boot=n_boot, seed=seed + 1)
    return estimate_from_replicates(float(a.mean() - b.mean()), a[ia].mean(axis=1) - b[ib].mean(axis=1))


def self_preference_probe(
    judge_model: str,
    judge_scores: Sequence[float],
    candidate_models: Sequence[str],
    references: Mapping[str, Sequence[float | None]] | None = None,
    *,
    margin: float = 0.1,
    min_group: int = 5,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
) -> SelfPreferenceProbe:
    """The self-preference figure.

    ``references`` maps grader id -> that reference's score for each pair
    (``None`` where it did not grade the pair), aligned with ``judge_scores``.
    """
    family = model_family(judge_model)
    scores = np.asarray(judge_scores, dtype=np.float64)
    same = np.array([model_family(m) == family for m in candidate_models], dtype=bool)
    if same.size != scores.size:
        raise ValueError("judge_scores and candidate_models differ in length")
    n_same, n_other = int(same.sum()), int((~same).sum())
    if n_same < min_group or n_other < min_group:
        why = (
            f"insufficient data: {n_same} pairs with a {family!r} candidate and {n_other} with another "
            f"family; each group needs at least {min_group}"
        )
        none = Estimate.undefined(why)
        return SelfPreferenceProbe(
            "insufficient data", why, family, n_same, n_other, none, none, none, {}, float(margin), False
        )
    difference = _difference(scores[same], scores[~same], n_boot=n_boot, seed=seed)
    residuals: dict[str, Estimate] = {}
    for ref_id, ref_scores in (references or {}).items():
        have = np.array([r is not None for r in ref_scores], dtype=bool)
        ref = np.array([r if r is not None else np.nan for r in ref_scores], dtype=np.float64)
        a, b = same & have, ~same & have
        if a.sum() < min_group or b.sum() < min_group:
            residuals[ref_id] = Estimate.undefined(
                f"insufficient data: reference graded {int(a.sum())} same-family and {int(b.sum())} "
                f"other pairs; each group needs at least {min_group}"
            )
            continue
        resid = scores - ref
        residuals[ref_id] = _difference(resid[a], resid[b], n_boot=n_boot, seed=seed)
    defined = [e for e in residuals.values() if e.value is not None]
    deciding = min(defined, key=lambda e: e.value or 0.0) if defined else difference
    return SelfPreferenceProbe(
        status="ok",
        reason=None,
        judge_family=family,
        n_same=n_same,
        n_other=n_other,
        mean_same=mean_with_ci(scores[same], n_boot=n_boot, seed=seed),
        mean_other=mean_with_ci(scores[~same], n_boot=n_boot, seed=seed),
        difference=difference,
        residual_difference=residuals,
        margin=float(margin),
        flagged=_clearly_above(deciding, margin),
    )


def _clearly_above(est: Estimate, margin: float) -> bool:
    """Above the margin, and the 95% interval (when there is one) excludes zero."""
    if est.value is None or est.value <= margin:
        return False
    return est.ci_low is None or est.ci_low > 0.0
