"""calibrate(): read paired grades from the ledger, compute the figures, store the verdict.

Pairing
-------
Two grades are of the same pair when they have the same
``(prompt_sha256, baseline_text_sha256, candidate_text_sha256)``; the ledger
keeps these digests even with ``store_text=False``, so pairing never needs the
texts. When a judge graded the same pair more than once, its most recent grade
(highest row id) counts. Pairs are ordered by key before any statistic is
computed, so the report does not depend on the order grades were stored in.

Which graders ask an LLM
------------------------
Whether a grader asks an LLM (so it cannot be the only reference, and gets
the self-preference probe) comes from what its judge declared: the grade's
``asks_llm`` flag and the ``asks_llm`` of its stored ``judge_spec``, plus the
judge object's own attribute when it is given. Only grades stored before
judges declared the flag (no flag in their spec) fall back to guessing from
the grader id (:func:`~llm_connect.grading.judges.is_llm_grader_id`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from llm_connect.calibration._human import HUMAN, HumanReference, human_cases
from llm_connect.calibration._human_stats import LENGTH_MARGIN, human_agreement
from llm_connect.calibration._probes import (
    SCALES,
    LengthProbe,
    PositionProbe,
    SelfPreferenceProbe,
    length_probe,
    length_ratio,
    position_probe,
    self_preference_probe,
)
from llm_connect.calibration._report import (
    CalibrationReport,
    CalibrationThresholds,
    evaluate,
    judge_human,
    judge_reference,
)
from llm_connect.calibration._stats import DEFAULT_BOOTSTRAP, DEFAULT_SEED, MIN_PAIRS, judge_agreement
from llm_connect.errors import CalibrationError, ConfigurationError, LLMConnectError
from llm_connect.grading.judges import (
    is_llm_grader_id,
    judge_asks_llm,
    parse_judge_spec,
)
from llm_connect.types import RunConfig

if TYPE_CHECKING:
    from llm_connect.grading import Judge
    from llm_connect.ledger import GradeRow, QualityLedger

__all__ = [
    "PROBES",
    "PairKey",
    "calibrate",
    "grades_ask_llm",
    "pair_key",
    "resolve_grader",
]

PROBES = ("length", "position", "self_preference")
"""Bias probes :func:`calibrate` knows. ``position`` needs the judge itself (it calls the LLM)."""
DEFAULT_PROBES = ("length", "self_preference")
"""Probes run when none are named: the ones that need no model call."""

PairKey = tuple[str, str, str]


def pair_key(row: GradeRow) -> PairKey:
    """``(prompt_sha256, baseline_text_sha256, candidate_text_sha256)`` of a stored grade."""
    return (row.prompt_sha256, row.baseline_text_sha256, row.candidate_text_sha256)


def _since(value: datetime | str | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigurationError(f"since: not an ISO 8601 date or time: {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _spec_of(row: GradeRow) -> dict[str, Any] | None:
    spec = row.details.get("judge_spec") if isinstance(row.details, Mapping) else None
    if isinstance(spec, Mapping) and isinstance(spec.get("name"), str):
        return {"name": spec["name"], "args": dict(spec.get("args") or {})}
    return None


def grades_ask_llm(grader_id: str, rows: Iterable[GradeRow]) -> bool:
    """Whether the judge that gave ``rows`` (grades by ``grader_id``) asks an LLM.

    True when any grade says so (``asks_llm`` on the grade, or ``"asks_llm": true``
    in its ``judge_spec``). When no grade's spec carries the flag at all (grades
    stored before judges declared it), the grader id decides
    (:func:`~llm_connect.grading.judges.is_llm_grader_id`).
    """
    declared = False
    for row in rows:
        if getattr(row, "asks_llm", False) is True:
            return True
        spec = row.details.get("judge_spec") if isinstance(row.details, Mapping) else None
        flag = spec.get("asks_llm") if isinstance(spec, Mapping) else None
        if flag is True:
            return True
        declared = declared or flag is False
    return False if declared else is_llm_grader_id(grader_id)


def resolve_grader(
    ledger: QualityLedger,
    text: str,
    *,
    task: str | None = None,
    since: datetime | str | None = None,
) -> tuple[str, dict[str, Any] | None]:
    """The grader id (and stored judge spec) that ``text`` names in the ledger.

    ``text`` is a grader id with grades in the ledger (``embedding:all-MiniLM-L6-v2``)
    or a judge spec (``embedding``, ``llm:openai:gpt-4o-mini``): a stored
    grade's ``details["judge_spec"]`` matches when it has the same name and
    holds every argument the spec gives. An exact spec match wins; several
    different grader ids matching equally raise :class:`CalibrationError`, as
    does no match at all.
    """
    since_dt = _since(since)
    where = f" for task {task!r}" if task else ""
    if ledger.count(grader_id=text, task=task, since=since_dt) > 0:
        row = next(iter(ledger.results(grader_id=text, task=task, since=since_dt, limit=1)))
        return text, _spec_of(row)
    try:
        wanted = parse_judge_spec(text)
    except ConfigurationError as exc:
        raise CalibrationError(
            f"no grades by {text!r} in the ledger{where}, and it is no judge spec: {exc}"
        ) from None
    grader_ids = sorted({s.grader_id for s in ledger.summary(task=task, since=since_dt)})
    exact: list[tuple[str, dict[str, Any]]] = []
    partial: list[tuple[str, dict[str, Any]]] = []
    for gid in grader_ids:
        first = next(iter(ledger.results(grader_id=gid, task=task, since=since_dt, limit=1)), None)
        spec = None if first is None else _spec_of(first)
        if spec is None or spec["name"] != wanted["name"]:
            continue
        if spec["args"] == wanted["args"]:
            exact.append((gid, spec))
        elif all(spec["args"].get(k) == v for k, v in wanted["args"].items()):
            partial.append((gid, spec))
    for found in (exact, partial):
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(gid for gid, _ in found)
            raise CalibrationError(
                f"{text!r} matches several graders in the ledger{where}: {names}; give one"
            )
    known = ", ".join(grader_ids) or "none"
    raise CalibrationError(f"no grades by {text!r} in the ledger{where} (graders present: {known})")


def _load(
    ledger: QualityLedger, grader_ids: Sequence[str], *, task: str | None, since: datetime | None
) -> dict[str, dict[PairKey, GradeRow]]:
    out: dict[str, dict[PairKey, GradeRow]] = {g: {} for g in grader_ids}
    for row in ledger.results(grader_id=list(grader_ids), task=task, since=since):
        out[row.grader_id][pair_key(row)] = row  # oldest first: the latest grade wins
    return out


def _lengths(row: GradeRow) -> tuple[float, float, str] | None:
    if row.baseline_text is not None and row.candidate_text is not None:
        return float(len(row.baseline_text)), float(len(row.candidate_text)), "characters"
    if row.baseline_completion_tokens is not None and row.candidate_completion_tokens is not None:
        return (
            float(row.baseline_completion_tokens),
            float(row.candidate_completion_tokens),
            "completion_tokens",
        )
    return None


def _ratios(rows: Mapping[PairKey, GradeRow], keys: Iterable[PairKey], unit: str) -> dict[PairKey, float]:
    out = {}
    for key in keys:
        got = _lengths(rows[key])
        if got is not None and got[2] == unit:
            out[key] = length_ratio(got[1], got[0])
    return out


def _run_length_probe(
    graded: Mapping[str, Mapping[PairKey, GradeRow]],
    judge: str,
    references: Sequence[str],
    *,
    margin: float,
    min_pairs: int,
    n_boot: int,
    seed: int,
) -> LengthProbe:
    jrows = graded[judge]
    keys = sorted(jrows)
    unit = "characters"
    ratios = _ratios(jrows, keys, unit)
    if len(ratios) < min_pairs:
        token_ratios = _ratios(jrows, keys, "completion_tokens")
        if len(token_ratios) > len(ratios):
            unit, ratios = "completion_tokens", token_ratios
    jkeys = sorted(ratios)
    refs: dict[str, tuple[list[float], list[float]]] = {}
    for ref in references:
        rrows = graded[ref]
        rratios = _ratios(rrows, sorted(rrows), unit)
        rk = sorted(rratios)
        refs[ref] = ([rrows[k].quality_score for k in rk], [rratios[k] for k in rk])
    return length_probe(
        [jrows[k].quality_score for k in jkeys],
        [ratios[k] for k in jkeys],
        refs,
        unit=unit,
        margin=margin,
        min_pairs=min_pairs,
        n_boot=n_boot,
        seed=seed,
    )


def _judge_model(judge: str, spec: Mapping[str, Any] | None) -> str:
    model = (spec or {}).get("args", {}).get("model") if spec else None
    return str(model) if model else judge


def _run_self_preference(
    graded: Mapping[str, Mapping[PairKey, GradeRow]],
    judge: str,
    judge_spec: Mapping[str, Any] | None,
    references: Sequence[str],
    *,
    margin: float,
    n_boot: int,
    seed: int,
) -> SelfPreferenceProbe:
    jrows = graded[judge]
    keys = sorted(jrows)
    refs = {
        ref: [graded[ref][k].quality_score if k in graded[ref] else None for k in keys] for ref in references
    }
    return self_preference_probe(
        _judge_model(judge, judge_spec),
        [jrows[k].quality_score for k in keys],
        [jrows[k].candidate_model for k in keys],
        refs,
        margin=margin,
        n_boot=n_boot,
        seed=seed,
    )


def _run_config(row: GradeRow) -> RunConfig:
    return RunConfig() if row.run_config is None else RunConfig.from_dict(row.run_config)


def _swap_scores(
    judge_obj: Judge, rows: Sequence[GradeRow], *, concurrency: int
) -> tuple[list[float], list[float], int, list[str]]:
    """Grade each row's pair with baseline and candidate swapped; (original, swapped, errors, messages)."""

    def one(row: GradeRow) -> float:
        result = judge_obj.judge(
            row.candidate_response,
            row.baseline_response,
            prompt=row.prompt or "",
            run_config=_run_config(row),
        )
        return result.quality_score

    originals: list[float] = []
    swapped: list[float] = []
    errors: list[str] = []
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = [pool.submit(one, row) for row in rows]
        for row, fut in zip(rows, futures, strict=True):
            try:
                score = fut.result()
            except LLMConnectError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            originals.append(row.quality_score)
            swapped.append(score)
    return originals, swapped, len(errors), errors


def _run_position(
    judge_obj: Judge,
    graded: Mapping[str, Mapping[PairKey, GradeRow]],
    judge: str,
    *,
    sample: int,
    threshold: float,
    scale: str,
    min_consistency: float,
    min_pairs: int,
    concurrency: int,
    n_boot: int,
    seed: int,
) -> tuple[PositionProbe, list[str]]:
    jrows = graded[judge]
    keys = [
        k for k in sorted(jrows) if jrows[k].baseline_text is not None and jrows[k].candidate_text is not None
    ]
    if len(keys) > sample:
        chosen = np.sort(np.random.default_rng(seed).choice(len(keys), size=sample, replace=False))
        keys = [keys[int(i)] for i in chosen]
    originals, swapped, n_errors, messages = _swap_scores(
        judge_obj, [jrows[k] for k in keys], concurrency=concurrency
    )
    probe = position_probe(
        originals,
        swapped,
        threshold=threshold,
        scale=scale,
        min_consistency=min_consistency,
        min_pairs=min_pairs,
        errors=n_errors,
        n_boot=n_boot,
        seed=seed,
    )
    if not keys and probe.reason:
        probe = replace(probe, reason=probe.reason + " (the ledger holds no texts for the judge's pairs)")
    return probe, messages


def _human(
    ledger: QualityLedger,
    judge_rows: Iterable[GradeRow],
    thresholds: CalibrationThresholds,
    *,
    task: str | None,
    threshold: float,
    n_boot: int,
    seed: int,
    min_pairs: int,
) -> HumanReference:
    """The judge's stored grades against the labels the ledger holds for ``task`` (all when ``None``)."""
    from llm_connect.ledger import LabelStore

    cases, labelled, unmatched = human_cases(judge_rows, LabelStore(ledger.engine).case_labels(task=task))
    margin = thresholds.max_human_length_difference
    figures = human_agreement(
        cases,
        threshold=threshold,
        margin=LENGTH_MARGIN if margin is None else margin,
        n_boot=n_boot,
        seed=seed,
        min_pairs=min_pairs,
    )
    return judge_human(figures, thresholds, labelled_cases=labelled, unmatched=unmatched)


def calibrate(
    ledger: QualityLedger,
    *,
    judge: str,
    against: Sequence[str],
    task: str | None = None,
    since: datetime | str | None = None,
    threshold: float = 0.5,
    thresholds: CalibrationThresholds | None = None,
    probes: Sequence[str] | None = None,
    judge_adapter: Judge | None = None,
    sample: int = 50,
    scale: str = "relative",
    length_margin: float | None = None,
    self_preference_margin: float | None = None,
    concurrency: int = 8,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    min_pairs: int = MIN_PAIRS,
    record: bool = True,
) -> CalibrationReport:
    """Calibrate ``judge`` against the reference judges ``against`` from the grades in ``ledger``.

    ``judge`` and each reference are grader ids or judge specs (see
    :func:`resolve_grader`); the reference ``"human"`` is people's labels in the
    ledger (``llm-connect labels import``): the judge's stored grades of the labelled
    cases against the annotators' majority (:mod:`llm_connect.calibration._human`),
    for any judge, LLM or not. Where it reaches a verdict it alone decides the
    calibration (``contracts/calibration.md``). Grades are paired by prompt and both response
    digests; per reference the report holds n, Pearson, Spearman, Kendall's
    tau-b, mean absolute difference, Cohen's kappa and the confusion matrix at
    ``threshold`` (pass means ``score >= threshold``), each with a 95%
    percentile-bootstrap interval (``n_boot`` resamples, ``seed``), or
    "insufficient data" below ``min_pairs`` pairs.

    ``probes`` picks the bias probes (default: length and self-preference,
    plus position when ``judge_adapter`` is given). The position probe calls
    ``judge_adapter`` — the judge under test, e.g. an
    :class:`~llm_connect.grading.LLMJudge` — on ``sample`` stored pairs with
    baseline and candidate swapped, ``concurrency`` at a time; ``scale`` says
    how its scores mirror (``"relative"`` or ``"symmetric"``).

    The verdict follows ``thresholds``; with ``record`` (default) the report
    is stored with ``ledger.record_calibration`` and carries its id.
    Raises :class:`CalibrationError` for no references, only references that
    ask an LLM (:func:`grades_ask_llm`), a reference equal to the judge, or a
    name with no grades; :class:`ConfigurationError` for a bad option. The
    self-preference probe runs only for a judge that asks an LLM.
    """
    thresholds = thresholds or CalibrationThresholds()
    if not against:
        raise CalibrationError("calibrate needs at least one reference judge (against=[...])")
    if not 0.0 <= threshold <= 1.0:
        raise ConfigurationError(f"threshold must lie in 0..1, not {threshold!r}")
    if scale not in SCALES:
        raise ConfigurationError(f"scale must be one of {', '.join(SCALES)}, not {scale!r}")
    if sample < 1:
        raise ConfigurationError(f"sample must be at least 1, not {sample!r}")
    if probes is None:
        wanted = set(DEFAULT_PROBES) | ({"position"} if judge_adapter is not None else set())
    else:
        unknown = set(probes) - set(PROBES)
        if unknown:
            raise ConfigurationError(
                f"unknown probe(s) {', '.join(sorted(unknown))} (known: {', '.join(PROBES)})"
            )
        wanted = set(probes)
    if "position" in wanted and judge_adapter is None:
        raise CalibrationError(
            "the position probe needs the judge itself: pass judge_adapter=<the LLM judge>"
        )

    since_dt = _since(since)
    wants_human = HUMAN in against
    judge_id, judge_spec = resolve_grader(ledger, judge, task=task, since=since_dt)
    if judge_adapter is not None and judge_adapter.grader_id != judge_id:
        raise CalibrationError(
            f"judge_adapter grades as {judge_adapter.grader_id!r}, not as the judge under test {judge_id!r}"
        )
    refs: list[tuple[str, dict[str, Any] | None]] = []
    for text in (a for a in against if a != HUMAN):
        ref_id, ref_spec = resolve_grader(ledger, text, task=task, since=since_dt)
        if ref_id == judge_id:
            raise CalibrationError(f"reference {text!r} is the judge under test ({judge_id!r})")
        if ref_id not in [r for r, _ in refs]:
            refs.append((ref_id, ref_spec))
    ref_ids = [r for r, _ in refs]
    graded = _load(ledger, [judge_id, *ref_ids], task=task, since=since_dt)
    if not wants_human and all(grades_ask_llm(r, graded[r].values()) for r in ref_ids):
        raise CalibrationError(
            f"calibrate {judge_id!r} against people (human) or at least one non-LLM judge (embedding, vrty, "
            "exact, ...): "
            f"{', '.join(ref_ids)} all ask an LLM"
        )
    jrows = graded[judge_id]
    judge_is_llm = grades_ask_llm(judge_id, jrows.values()) or (
        judge_adapter is not None and judge_asks_llm(judge_adapter)
    )

    results = []
    scores: dict[str, tuple[tuple[float, float], ...]] = {}
    for ref_id, ref_spec in refs:
        common = sorted(set(jrows) & set(graded[ref_id]))
        x = [jrows[k].quality_score for k in common]
        y = [graded[ref_id][k].quality_score for k in common]
        agr = judge_agreement(x, y, threshold=threshold, n_boot=n_boot, seed=seed, min_pairs=min_pairs)
        results.append(judge_reference(ref_id, agr, thresholds, ref_spec))
        scores[ref_id] = tuple(zip(x, y, strict=True))

    notes: list[str] = []
    length = position = self_pref = None
    if "length" in wanted:
        margin = length_margin
        if margin is None:
            margin = thresholds.max_length_excess if thresholds.max_length_excess is not None else 0.2
        length = _run_length_probe(
            graded, judge_id, ref_ids, margin=margin, min_pairs=min_pairs, n_boot=n_boot, seed=seed
        )
    if "self_preference" in wanted:
        if judge_is_llm:
            margin = self_preference_margin
            if margin is None:
                margin = thresholds.max_self_preference if thresholds.max_self_preference is not None else 0.1
            self_pref = _run_self_preference(
                graded, judge_id, judge_spec, ref_ids, margin=margin, n_boot=n_boot, seed=seed
            )
        else:
            notes.append(f"self-preference probe skipped: {judge_id!r} is not an LLM judge")
    if "position" in wanted and judge_adapter is not None:
        position, messages = _run_position(
            judge_adapter,
            graded,
            judge_id,
            sample=sample,
            threshold=threshold,
            scale=scale,
            min_consistency=thresholds.min_position_consistency,
            min_pairs=min_pairs,
            concurrency=concurrency,
            n_boot=n_boot,
            seed=seed,
        )
        if messages:
            notes.append(f"position probe: {len(messages)} swapped grading(s) failed, first: {messages[0]}")

    human = None
    if wants_human:
        human = _human(
            ledger, jrows.values(), thresholds, task=task, threshold=threshold, n_boot=n_boot, seed=seed,
            min_pairs=min_pairs,
        )  # fmt: skip
    verdict, passed = evaluate(
        results, thresholds, position=position, length=length, self_preference=self_pref, human=human
    )
    flagged = any(p is not None and p.flagged for p in (position, length, self_pref))
    if human is not None and human.decides and (results or flagged):
        others, _ = evaluate(results, thresholds, position=position, length=length, self_preference=self_pref)
        if others != verdict:
            notes.append(f"human labels decide; without them the verdict would be: {others}")
    report = CalibrationReport(
        judge=judge_id,
        references=tuple(results),
        task=task,
        since=None if since_dt is None else since_dt.isoformat(),
        threshold=float(threshold),
        thresholds=thresholds,
        verdict=verdict,
        passed=passed,
        n_bootstrap=n_boot,
        seed=seed,
        position=position,
        length=length,
        self_preference=self_pref,
        judge_spec=judge_spec,
        human=human,
        n_judge_grades=len(jrows),
        notes=tuple(notes),
        scores=scores,
    )
    if record:
        figures = report.to_dict()
        del figures["calibration_id"]  # the row's own id, known once stored
        json.dumps(figures, allow_nan=False)  # strict JSON, or fail loudly before writing
        cal_id = ledger.record_calibration(
            judge_grader_id=judge_id,
            references=[*ref_ids, HUMAN] if human is not None else ref_ids,
            task=task,
            figures=figures,
            verdict=verdict,
            passed=passed,
        )
        report = replace(report, calibration_id=cal_id)
    return report
