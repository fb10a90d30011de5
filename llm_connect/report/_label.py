"""The labelling page of ``llm-connect view``: a blind pair of answers, keys 1 / 2 / 3, writes to the ledger.

Routes (only when the server was started with labelling on; ``view --no-label``
has none of them):

- ``GET /label``: the page (no case data in it; it asks the next route).
- ``GET /api/label/next?annotator=NAME[&task=T][&candidate=C][&skip=REF,...]``:
  ``{"case": {...} | null, "left": N, "chosen_left": M}``. A case holds an opaque
  ``ref``, its task and case id, the ``system_prompt`` both sides were asked with (``null``
  when none, or when the conversation holds its own system message), the prompt (or
  conversation), ``answers``: two
  ``{"text", "tools"}`` in the case's blind order, and ``chosen``: whether the label
  sampler chose it (served first; ``chosen_left`` of them wait for a label, anyone's).
  Model names and the order never reach the page.
- ``POST /api/label`` with JSON ``{"ref", "choice": "first" | "tie" | "second",
  "annotator", "note"?, "replace"?, "token"?}``: one :class:`~llm_connect.values.HumanLabel`
  through :meth:`QualityLedger.record_labels`. The server maps ``first`` /
  ``second`` to ``candidate`` / ``baseline`` from the order it drew itself. With
  ``"replace": true`` (the page's "change my last label", key ``u``) the annotator's own
  label of the case is overwritten; without it a different label is refused (409).
  A write meets the ledger's patience like every other (``view --db-patience``): a database
  restart holds the request until it is back; a fault past it (away too long, a full disk, a
  read-only ledger) answers 503 with the cause in plain words; the page keeps the case to label again.

Writes are refused with 403 unless the request's ``Origin`` is the server's own
(``http://127.0.0.1:PORT`` or ``http://localhost:PORT``; a missing Origin is
refused too), its ``Host`` names the server, and it carries the per-start token
(header ``X-LLM-Connect-Token`` or the body's ``token``, compared in constant
time). The token is in the URL the CLI prints: ``http://127.0.0.1:PORT/label?token=...``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode

from llm_connect.errors import ConfigurationError, LabelConflictError, LabelError, LedgerFaultError
from llm_connect.ledger import when_writable
from llm_connect.report._label_queue import (
    BLIND_SEED,
    LabelCase,
    QueueItem,
    Ranked,
    candidate_first,
    chosen_waiting,
    grades_mark,
    label_queue,
    load_case,
    queue_size,
    queue_total,
    ranked_cases,
)
from llm_connect.values import HumanLabel

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = ["CHOICES", "LOOPBACK", "MAX_BODY", "TOKEN_HEADER", "Headers", "LabelDesk", "render_label_page"]

TOKEN_HEADER = "X-LLM-Connect-Token"
"""The request header that may carry the write token (else the JSON body's ``token``)."""

CHOICES = ("first", "tie", "second")
"""What the page sends: keys 1, 2 and 3."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")
"""The only hosts a labelling server listens on."""

MAX_BODY = 64 * 1024
"""Bytes of a write's body at most (413 above)."""

MAX_NOTE = 4000
"""Characters of a note at most."""

_MAX_REFS = 20_000
_MAX_SKIP = 200
_RANKED = 500
"""Entries by disagreement read at least, when the page reads them."""
_KEPT_FILTERS = 64
"""(task, candidate) filters whose count and order the page keeps at most."""


class Headers(Protocol):
    """What a write's handler reads of the request headers (``http.client`` messages, dicts)."""

    def get(self, name: str, /) -> str | None:
        """The header's value, or ``None``."""


@dataclass(frozen=True)
class _Shown:
    """What the server remembers of a case it sent: enough to un-blind a label."""

    item: QueueItem
    run_id: str | None
    candidate_first: bool


class LabelDesk:
    """The labelling routes' state: the token, the blind order's seed and the cases sent.

    ``ledger``: where labels go; ``port``: the server's port (its own origins);
    ``token``: the write token (default: 32 random bytes, URL-safe); ``seed``: the blind
    order's seed (:func:`~llm_connect.report._label_queue.candidate_first`).
    """

    def __init__(
        self, ledger: QualityLedger, *, port: int, token: str | None = None, seed: str = BLIND_SEED
    ) -> None:
        self.ledger = ledger
        self.token = token or secrets.token_urlsafe(32)
        self.seed = seed
        self.port = port
        self._secret = secrets.token_bytes(32)
        self._shown: OrderedDict[str, _Shown] = OrderedDict()
        self._lock = threading.Lock()
        # Per (task, candidate) filter: the grades' mark (newest id, count) and the queue's total then. The
        # total is a count over every graded case (about 0.1-0.4 s at 100,000 on SQLite); it
        # changes only with new grades, while the page asks after every label.
        self._totals: OrderedDict[tuple[str | None, str | None], tuple[tuple[int, int], int]] = OrderedDict()
        # Likewise the first entries by disagreement (the queue's order after the sampler's cases:
        # 0.3-0.5 s at 100,000 on SQLite), read again after a new grade or when more are needed.
        self._ranks: OrderedDict[tuple[str | None, str | None], tuple[tuple[int, int], list[Any], bool]] = (
            OrderedDict()
        )

    # -- what the server says about itself --------------------------------------

    @property
    def origins(self) -> frozenset[str]:
        """The ``Origin`` values the server accepts on a write (its own, by every loopback name)."""
        return frozenset(f"http://{h}:{self.port}" for h in ("127.0.0.1", "localhost", "[::1]"))

    def url(self, base: str) -> str:
        """The label page's URL with the token, from the server's ``http://host:port/``."""
        return f"{base}label?{urlencode({'token': self.token})}"

    # -- reading -----------------------------------------------------------------

    def _ref(self, item: QueueItem) -> str:
        key = "\x00".join((item.task, item.baseline, item.candidate, item.case_id)).encode("utf-8")
        return hmac.new(self._secret, key, hashlib.sha256).hexdigest()[:32]

    def _remember(self, ref: str, shown: _Shown) -> None:
        with self._lock:
            self._shown[ref] = shown
            self._shown.move_to_end(ref)
            while len(self._shown) > _MAX_REFS:
                self._shown.popitem(last=False)

    def next_case(self, query: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        """``GET /api/label/next``: the annotator's next blind case, and how many are left."""
        annotator = _text(query, "annotator")
        if not annotator:
            raise ConfigurationError("annotator is required: who is labelling?")
        task, candidate = _text(query, "task") or None, _text(query, "candidate") or None
        skip = {r for r in (_text(query, "skip") or "").split(",") if r}
        if len(skip) > _MAX_SKIP:
            raise ConfigurationError(f"skip names {len(skip)} cases (at most {_MAX_SKIP})")
        with self._lock:
            skipped = {self._shown[r].item for r in skip if r in self._shown}
        mark = grades_mark(self.ledger)  # what the kept count and order were read at
        items = label_queue(
            self.ledger,
            task=task,
            candidate=candidate,
            annotator=annotator,
            limit=1 + len(skipped),
            ranked=self._ranked(task, candidate, mark),
        )
        left = queue_size(
            self.ledger,
            task=task,
            candidate=candidate,
            annotator=annotator,
            total=self._total(task, candidate, mark),
        )
        waiting = chosen_waiting(self.ledger, task=task, candidate=candidate)
        for item in items:
            if item in skipped:
                continue
            case = load_case(self.ledger, item)
            if case is not None:
                return {"case": self._blind(case), "left": left, "chosen_left": waiting}
        return {"case": None, "left": left, "chosen_left": waiting}

    def _total(self, task: str | None, candidate: str | None, mark: tuple[int, int]) -> int:
        """:func:`queue_total` of the filters, counted again only after a new grade (``mark``:
        :func:`grades_mark` now)."""
        with self._lock:
            kept = self._totals.get((task, candidate))
        if kept is not None and kept[0] == mark:
            return kept[1]
        total = queue_total(self.ledger, task=task, candidate=candidate)
        with self._lock:
            _keep(self._totals, (task, candidate), (mark, total))
        return total

    def _ranked(self, task: str | None, candidate: str | None, mark: tuple[int, int]) -> Ranked:
        """:func:`ranked_cases` of the filters, read again only after a new grade (``mark``:
        :func:`grades_mark` now) or when a deeper list is needed (then at least twice as deep as
        the one kept)."""

        def first(depth: int) -> list[Any]:
            with self._lock:
                kept = self._ranks.get((task, candidate))
            if kept is not None and kept[0] == mark and (len(kept[1]) >= depth or kept[2]):
                return kept[1][:depth]
            ask = max(depth, _RANKED, 2 * len(kept[1]) if kept is not None and kept[0] == mark else 0)
            rows = ranked_cases(self.ledger, task=task, candidate=candidate, depth=ask)
            with self._lock:
                _keep(self._ranks, (task, candidate), (mark, rows, len(rows) < ask))
            return rows[:depth]

        return first

    def _blind(self, case: LabelCase) -> dict[str, Any]:
        item = case.item
        first = candidate_first(item.task, item.case_id, item.candidate, seed=self.seed)
        ref = self._ref(item)
        self._remember(ref, _Shown(item, case.run_id, first))
        cand = {"text": case.candidate_text, "tools": case.candidate_tools}
        base = {"text": case.baseline_text, "tools": case.baseline_tools}
        return {
            "ref": ref,
            "task": item.task,
            "case_id": item.case_id,
            "system_prompt": case.system_prompt,
            "prompt": case.prompt,
            "messages": case.messages,
            "answers": [cand, base] if first else [base, cand],
            "chosen": item.chosen,
        }

    # -- writing -----------------------------------------------------------------

    def refusal(self, headers: Headers, host: str) -> str | None:
        """Why a write with these headers is refused before its body is read (``None``: not refused).

        ``host``: the ``Host`` header. The Origin must be one of :attr:`origins` (a missing
        one is refused: browsers send it on every POST) and the Host must name this server.
        """
        origin = headers.get("Origin")
        if not origin:
            return "a write needs an Origin header"
        if origin not in self.origins:
            return f"Origin {origin!r} is not this server's"
        if host not in {o.split("//", 1)[1] for o in self.origins}:
            return f"Host {host!r} is not this server's"
        return None

    def token_ok(self, given: Any) -> bool:
        """Whether ``given`` is the write token (constant-time compare)."""
        if not isinstance(given, str) or not given:
            return False
        return hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))

    def write(self, headers: Headers, body: bytes) -> tuple[int, dict[str, Any]]:
        """``POST /api/label`` after :meth:`refusal` passed: ``(HTTP status, JSON answer)``.

        403 without the right token (header or body); 400 for a body that is not a JSON
        object, an unknown choice, no annotator, a note too long; 410 for a ref this server
        never sent (restart: load the next case); 409 when the annotator already stored a
        different label for the case and ``replace`` is not true. 200 ``{"saved": true,
        "written": 0|1, "replaced": 0|1}`` otherwise: the answer never says which side was the
        candidate.
        """
        data: Any = None
        try:
            data = json.loads(body.decode("utf-8")) if body else None
        except (UnicodeDecodeError, ValueError):
            data = None
        token = headers.get(TOKEN_HEADER) or (data.get("token") if isinstance(data, dict) else None)
        if not self.token_ok(token):
            return 403, {"error": "a write needs this server's token (open the URL llm-connect view printed)"}
        if not isinstance(data, dict):
            return 400, {"error": "the body must be a JSON object"}
        choice, annotator, note = data.get("choice"), data.get("annotator"), data.get("note")
        if choice not in CHOICES:
            return 400, {"error": f"choice must be one of {', '.join(CHOICES)}"}
        if not isinstance(annotator, str) or not annotator.strip():
            return 400, {"error": "annotator is required"}
        if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE):
            return 400, {"error": f"note must be text of at most {MAX_NOTE} characters"}
        replace = data.get("replace", False)
        if not isinstance(replace, bool):
            return 400, {"error": "replace must be true or false"}
        with self._lock:
            shown = self._shown.get(str(data.get("ref")))
        if shown is None:
            return 410, {"error": "this case was not sent by this server (it restarted?): load the next one"}
        label = HumanLabel(
            task=shown.item.task,
            case_id=shown.item.case_id,
            candidate=shown.item.candidate,
            annotator=annotator.strip(),
            preference=_preference(choice, candidate_first=shown.candidate_first),
            note=(note or "").strip() or None,
            run_id=shown.run_id,
        )
        try:
            done = self.ledger.record_labels([label], replace=replace)
        except LabelConflictError:
            return 409, {"error": "you labelled this case differently before (labels import --replace)"}
        except LabelError as exc:
            return 400, {"error": str(exc)}
        except LedgerFaultError as exc:  # after the patience: nothing stored, the page keeps the case
            return 503, {"error": f"{exc}; choose again {when_writable(exc.cause)}",
                         "cause": exc.cause}  # fmt: skip
        return 200, {"saved": True, "written": done.written, "replaced": done.replaced}


def _keep(kept: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """``kept[key] = value``, the oldest of more than :data:`_KEPT_FILTERS` keys dropped."""
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > _KEPT_FILTERS:
        kept.popitem(last=False)


def _preference(choice: str, *, candidate_first: bool) -> str:
    """``first`` / ``second`` / ``tie`` as the page says it, to ``candidate`` / ``baseline`` / ``tie``."""
    if choice == "tie":
        return "tie"
    return "candidate" if (choice == "first") == candidate_first else "baseline"


def _text(query: Mapping[str, Sequence[str]], name: str) -> str:
    values = query.get(name)
    return values[-1].strip() if values else ""


def render_label_page(ledger: QualityLedger, query: Mapping[str, Sequence[str]]) -> str:
    """The label page: the filters' choices from the ledger's totals, CSS and JS inline, no case data."""
    from markupsafe import Markup

    from llm_connect._version import __version__
    from llm_connect.report._page import _asset, _environment

    totals = ledger.grade_totals()
    tasks = sorted({t.task for t in totals})
    candidates = sorted({t.candidate_model for t in totals})
    task, candidate = _text(query, "task"), _text(query, "candidate")
    return (
        _environment()
        .get_template("label.html.j2")
        .render(
            version=__version__,
            css=Markup(_asset("label.css")),
            js=Markup(_asset("label.js")),
            tasks=tasks,
            candidates=candidates,
            task=task if task in tasks else "",
            candidate=candidate if candidate in candidates else "",
        )
    )
