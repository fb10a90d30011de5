"""``llm-connect view``: the report page served from the ledger on 127.0.0.1, with a labelling page.

``GET /`` is the page (figures from the running totals, as in a static report);
``GET /api/cases`` pages grades straight from SQL with the case browser's
filters. The report answers GET and HEAD only; any other method is 405, and the
report writes nothing to the ledger: every statement is a SELECT. Started with
``label=True`` (``llm-connect view`` without ``--no-label``), the server also
serves the labelling page ``GET /label``, ``GET /api/label/next`` and its one
write, ``POST /api/label`` (token and Origin checked; ``_label``); without it,
nothing at all is written.

Query parameters of ``/api/cases``: ``task``, ``candidate``, ``judge`` (exact
values), ``min`` / ``max`` (score range, inclusive), ``failures=1`` (scores
below the judge's threshold, ``RoutingPolicy.threshold``), ``q`` (case-insensitive
text in the prompt, answers, notes or case id), ``sort`` (``score-asc`` | ``score-desc``), ``offset``,
``limit`` (at most 500). Answer: ``{"total": N, "offset": o, "rows": [...]}``
with the rows of :func:`llm_connect.report._cases.case_row`.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import SplitResult, parse_qs, urlsplit

from llm_connect.errors import ConfigurationError, LedgerFaultError, LLMConnectError
from llm_connect.report._cases import case_row
from llm_connect.values import PREFERENCE_JUDGES, RoutingPolicy

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger
    from llm_connect.report._label import LabelDesk

__all__ = ["MAX_PAGE", "ReportServer", "page_cases", "serve"]

MAX_PAGE = 500
"""Rows per ``/api/cases`` answer at most."""

_SELECT = (
    "id, created_at, run_id, case_id, task, grader_id, quality_score, notes, prompt, baseline_model, "
    "candidate_model, baseline_text, candidate_text, baseline_served_model, candidate_served_model, "
    "baseline_tool_calls, candidate_tool_calls, baseline_cost_usd, candidate_cost_usd, "
    "baseline_latency_ms, candidate_latency_ms, metadata"
)
_SEARCHED = ("prompt", "baseline_text", "candidate_text", "notes", "case_id")
_SORTS = {"score-asc": "quality_score ASC, id ASC", "score-desc": "quality_score DESC, id DESC"}


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def page_cases(
    ledger: QualityLedger,
    *,
    task: str | None = None,
    candidate: str | None = None,
    judge: str | None = None,
    lo: float = 0.0,
    hi: float = 1.0,
    failures: bool = False,
    q: str | None = None,
    sort: str = "score-asc",
    offset: int = 0,
    limit: int = 100,
    min_quality: float | RoutingPolicy = 0.9,
) -> tuple[int, list[dict[str, Any]]]:
    """``(matching grades, one page of case rows)`` from SQL, ordered by score then id.

    Without a score range, failures-only or a search, the count comes from the
    running totals (``grade_stats``) instead of counting grades, and a shallow
    page is read group by group from the routing index (:func:`_page_by_group`)
    instead of sorting every grade.
    """
    from sqlalchemy import text

    if sort not in _SORTS:
        raise ConfigurationError(f"sort must be one of {', '.join(_SORTS)}, not {sort!r}")
    if offset < 0 or not 1 <= limit <= MAX_PAGE:
        raise ConfigurationError(f"offset must be >= 0 and limit in 1..{MAX_PAGE}")
    where: list[str] = []
    params: dict[str, Any] = {}
    for column, value in (("task", task), ("candidate_model", candidate), ("grader_id", judge)):
        if value:
            where.append(f"{column} = :{column}")
            params[column] = value
    narrowed = lo > 0.0 or hi < 1.0 or failures or bool(q)
    if lo > 0.0:
        where.append("quality_score >= :lo")
        params["lo"] = float(lo)
    if hi < 1.0:
        where.append("quality_score <= :hi")
        params["hi"] = float(hi)
    threshold = min_quality.threshold if isinstance(min_quality, RoutingPolicy) else None
    if failures and threshold is not None and threshold(PREFERENCE_JUDGES[0]) != threshold(""):
        # a preference judge's own threshold (a win rate) differs from the others'
        prefixes = " OR ".join(f"grader_id LIKE :pref{i}" for i in range(len(PREFERENCE_JUDGES)))
        where.append(f"quality_score < CASE WHEN {prefixes} THEN :minq_pref ELSE :minq END")
        params.update({f"pref{i}": f"{p}%" for i, p in enumerate(PREFERENCE_JUDGES)})
        params["minq_pref"], params["minq"] = threshold(PREFERENCE_JUDGES[0]), threshold("")
    elif failures:
        where.append("quality_score < :minq")
        params["minq"] = float(threshold("") if threshold is not None else cast(float, min_quality))
    if q:
        where.append("(" + " OR ".join(f"LOWER({c}) LIKE :q ESCAPE '\\'" for c in _SEARCHED) + ")")
        params["q"] = _like(q)
    clause = (" WHERE " + " AND ".join(where)) if where else ""
    groups: list[tuple[str, str, str, str, int]] = []
    total = -1
    if not narrowed:
        groups = [
            (t.task, t.baseline_model, t.grader_id, t.candidate_model, t.n)
            for t in ledger.grade_totals(
                task=task or None, candidate_model=candidate or None, grader_id=judge or None
            )
        ]
        total = sum(g[4] for g in groups)
    records: Sequence[Any]
    with ledger.engine.connect() as conn:
        if not narrowed and _by_group(groups, offset + limit, total):
            records = _page_by_group(conn, groups, sort=sort, offset=offset, limit=limit)
        else:
            sql = f"SELECT {_SELECT} FROM grades{clause} ORDER BY {_SORTS[sort]} LIMIT :limit OFFSET :offset"
            records = conn.execute(text(sql), {**params, "limit": limit, "offset": offset}).mappings().all()
        if narrowed:
            total = int(conn.execute(text(f"SELECT COUNT(*) FROM grades{clause}"), params).scalar_one())
        conn.rollback()
    return total, [case_row(dict(r), min_quality=threshold or cast(float, min_quality)) for r in records]


GROUP_SHARE = 8
"""Page by group when the groups' leading grades read are at most 1/``GROUP_SHARE`` of the grades."""
MAX_GROUPS = 256
"""Page by group only up to this many (task, baseline, judge, candidate) groups (a query each)."""


def _by_group(groups: Sequence[tuple[str, str, str, str, int]], depth: int, total: int) -> bool:
    """Whether reading each group's first ``depth`` grades beats sorting every grade."""
    if not groups or len(groups) > MAX_GROUPS:
        return False
    return sum(min(depth, g[4]) for g in groups) * GROUP_SHARE <= total


def _page_by_group(
    conn: Any, groups: Sequence[tuple[str, str, str, str, int]], *, sort: str, offset: int, limit: int
) -> list[Any]:
    """One page of the unfiltered ordering, read group by group from ``ix_grades_routing``.

    Within one (task, baseline, judge, candidate) the routing index is ordered by
    score, so each group's first ``offset + limit`` grades in the page's order
    are a short index range read (the id breaks ties); the page is the slice of
    their merge, exactly the ``ORDER BY quality_score, id`` of every grade, and
    only its rows are read in full. The groups are the running totals', as is
    the count of the unfiltered page.
    """
    from sqlalchemy import text

    depth = offset + limit
    keyed = (
        "SELECT id, quality_score FROM grades WHERE task = :task AND baseline_model = :base "
        f"AND grader_id = :judge AND candidate_model = :cand ORDER BY {_SORTS[sort]} LIMIT :depth"
    )
    found: list[tuple[float, int]] = []
    statement = text(keyed)
    for task, base, judge, cand, _ in groups:
        found.extend(
            (float(score), int(i))
            for i, score in conn.execute(
                statement, {"task": task, "base": base, "judge": judge, "cand": cand, "depth": depth}
            )
        )
    found.sort(reverse=sort == "score-desc")
    ids = [i for _, i in found[offset:depth]]
    if not ids:
        return []
    marks = ", ".join(f":i{k}" for k in range(len(ids)))
    rows = conn.execute(
        text(f"SELECT {_SELECT} FROM grades WHERE id IN ({marks})"), {f"i{k}": i for k, i in enumerate(ids)}
    )
    by_id = {r["id"]: r for r in rows.mappings()}
    return [by_id[i] for i in ids if i in by_id]


def _one(query: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _number(query: Mapping[str, Sequence[str]], name: str, default: float) -> float:
    raw = _one(query, name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, not {raw!r}") from None


class ReportServer(ThreadingHTTPServer):
    """A started HTTP server of one ledger's report (``url``; ``shutdown()`` stops it)."""

    daemon_threads = True

    def __init__(
        self,
        ledger: QualityLedger,
        host: str,
        port: int,
        *,
        policy: RoutingPolicy,
        quiet: bool,
        label: bool = False,
    ) -> None:
        super().__init__((host, port), _Handler)
        self.ledger = ledger
        self.policy = policy
        """The policy every decision on the page is made under (``Router.evaluate``)."""
        self.quiet = quiet
        self._page: tuple[Any, bytes] | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.labels: LabelDesk | None = None
        if label:
            from llm_connect.report._label import LabelDesk

            self.labels = LabelDesk(ledger, port=int(self.server_address[1]))

    @property
    def label_url(self) -> str | None:
        """``http://127.0.0.1:PORT/label?token=...`` (with the write token), or ``None`` without labelling."""
        return None if self.labels is None else self.labels.url(self.url)

    @property
    def url(self) -> str:
        """``http://host:port/`` of the page."""
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}/"

    def page(self) -> bytes:
        """The page, rendered again only when the ledger's totals, calibrations or stability changed."""
        from llm_connect.report._page import render_view_page

        totals = self.ledger.grade_totals()
        version = (
            tuple(
                (t.task, t.baseline_model, t.grader_id, t.candidate_model, t.n, t.sum_quality) for t in totals
            ),
            tuple((c.id, c.passed) for c in self.ledger.calibrations()),
            tuple(s.id for s in self.ledger.stability_runs(limit=1)),
            _labels_version(self.ledger),
            _checks_version(self.ledger),
        )
        with self._lock:
            if self._page is not None and self._page[0] == version:
                return self._page[1]
            body = render_view_page(
                self.ledger, policy=self.policy, label_link=self.labels is not None
            ).encode("utf-8")
            self._page = (version, body)
            return body

    def label_page(self, query: Mapping[str, Sequence[str]]) -> bytes:
        """The label page (``GET /label``; only with labelling on)."""
        from llm_connect.report._label import render_label_page

        return render_label_page(self.ledger, query).encode("utf-8")

    def start(self) -> ReportServer:
        """Serve in a daemon thread; returns ``self``."""
        self._thread = threading.Thread(target=self.serve_forever, name="llm-connect-view", daemon=True)
        self._thread.start()
        return self

    def shutdown(self) -> None:
        """Stop serving and close the socket (the ledger stays open)."""
        if self._thread is not None:
            super().shutdown()
            self._thread.join()
            self._thread = None
        self.server_close()


_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'"
)


_JSON, _HTML = "application/json; charset=utf-8", "text/html; charset=utf-8"


def _encode(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8")


class _Handler(BaseHTTPRequestHandler):
    server: ReportServer
    server_version = "llm-connect-view"
    _allow = "GET, HEAD"
    """The methods a 405 reply names (``Allow``): the report's, or ``POST`` on ``/api/label``."""

    def log_message(self, format: str, *args: Any) -> None:
        if not self.server.quiet:
            sys.stderr.write(f"{self.address_string()} {format % args}\n")

    def _send(self, status: int, body: bytes, content_type: str, head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", _CSP)
        if status == 405:
            self.send_header("Allow", self._allow)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, status: int, data: Any, head: bool) -> None:
        self._send(status, _encode(data), _JSON, head)

    def _get(self, head: bool) -> None:
        from llm_connect.ledger import patiently

        parts = urlsplit(self.path)
        try:
            # Reads run again while the database is away (a restart), up to the ledger's patience.
            status, body, content_type = patiently(
                self.server.ledger.engine, f"answering GET {parts.path}", lambda: self._answer(parts)
            )
            self._send(status, body, content_type, head)
        except ConfigurationError as exc:
            self._json(400, {"error": str(exc)}, head)
        except LedgerFaultError as exc:  # away past the patience, or a fault: say so, try later
            self._json(503, {"error": str(exc), "cause": exc.cause}, head)
        except LLMConnectError as exc:
            self._json(500, {"error": str(exc)}, head)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _answer(self, parts: SplitResult) -> tuple[int, bytes, str]:
        """``(status, body, content type)`` of a GET, computed before anything is sent."""
        if parts.path in ("/", "/index.html"):
            return 200, self.server.page(), _HTML
        if parts.path == "/api/cases":
            return 200, _encode(self._cases(parse_qs(parts.query))), _JSON
        if self.server.labels is not None and parts.path == "/label":
            return 200, self.server.label_page(parse_qs(parts.query)), _HTML
        if self.server.labels is not None and parts.path == "/api/label/next":
            return 200, _encode(self.server.labels.next_case(parse_qs(parts.query))), _JSON
        return 404, _encode({"error": f"not found: {parts.path}"}), _JSON

    def _cases(self, query: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        minq = self.server.policy
        offset = int(_number(query, "offset", 0))
        limit = int(_number(query, "limit", 100))
        total, rows = page_cases(
            self.server.ledger,
            task=_one(query, "task"),
            candidate=_one(query, "candidate"),
            judge=_one(query, "judge"),
            lo=_number(query, "min", 0.0),
            hi=_number(query, "max", 1.0),
            failures=_one(query, "failures") in ("1", "true", "on", "yes"),
            q=(_one(query, "q") or "").strip() or None,
            sort=_one(query, "sort") or "score-asc",
            offset=offset,
            limit=limit,
            min_quality=minq,
        )
        return {"total": total, "offset": offset, "rows": rows}

    def do_GET(self) -> None:
        self._get(head=False)

    def do_HEAD(self) -> None:
        self._get(head=True)

    def _refuse(self) -> None:
        path = urlsplit(self.path).path
        write = "labels are written with POST /api/label and the Label page's token"
        if self.server.labels is None:
            why = "the report answers GET and HEAD only, and labelling is off: nothing is written"
        elif path == "/api/label":
            why, self._allow = write, "POST"
        else:
            why = f"the report answers GET and HEAD only; {write}"
        self._json(405, {"error": f"{self.command} {path} is not allowed: {why}"}, False)

    def do_POST(self) -> None:
        from llm_connect.report._label import MAX_BODY

        desk = self.server.labels
        if desk is None or urlsplit(self.path).path != "/api/label":
            self._refuse()
            return
        try:
            try:
                size = max(0, int(self.headers.get("Content-Length") or 0))
            except ValueError:
                self._json(400, {"error": "Content-Length must be a number"}, False)
                return
            # Read what was sent (up to a bound) before any answer, so closing never resets the reply.
            body = self.rfile.read(min(size, 16 * MAX_BODY))
            refused = desk.refusal(self.headers, self.headers.get("Host", ""))
            if refused is not None:
                self._json(403, {"error": refused}, False)
            elif size > MAX_BODY:
                self._json(413, {"error": f"a write's body is at most {MAX_BODY} bytes"}, False)
            else:
                self._json(*desk.write(self.headers, body), False)
        except LLMConnectError as exc:
            self._json(500, {"error": str(exc)}, False)
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse


# The people's side of the page (their estimates, a decision on what they would say) changes
# with every label and sampling decision, not only with grades: a label's row changes in place
# when replaced, so the sums over ids and contents count as well as the rows.
def _checks_version(ledger: Any) -> tuple[Any, ...]:
    """The judge checks' state: a new check or anchor set renders the page again."""
    from llm_connect.ledger import AnchorStore

    return AnchorStore(ledger.engine).version()


def _labels_version(ledger: QualityLedger) -> tuple[Any, ...]:
    """What the page's people figures depend on beyond the grades: the labels and the sampling."""
    from llm_connect.ledger import LabelStore, SamplingStore

    return (*LabelStore(ledger.engine).version(), SamplingStore(ledger.engine).version())


def serve(
    ledger: QualityLedger,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    policy: RoutingPolicy | None = None,
    quiet: bool = True,
    warm: bool = False,
    label: bool = False,
    **settings: Any,
) -> ReportServer:
    """Start serving ``ledger``'s report on ``host:port`` (``port=0``: a free port) in a daemon
    thread; returns the started :class:`ReportServer` (``.url``, ``.shutdown()``).

    ``warm=True`` renders the page once before returning (matplotlib's import and the
    figures), so the first request is answered at once.

    Every decision on the page is ``Router.evaluate`` under ``policy`` (a
    :class:`~llm_connect.routing.RoutingPolicy`); keyword settings (``min_quality=0.8``,
    ``target="human"``, ...) replace those fields of it, validated before the server starts.

    ``label=True`` adds the labelling page and its one write route (``_label``): only on a
    loopback host (127.0.0.1, localhost, ::1; else ``ConfigurationError``), writes only with
    the per-start token in :attr:`ReportServer.label_url` and the server's own Origin.
    """
    from llm_connect.report._label import LOOPBACK

    chosen = RoutingPolicy.of(policy, **settings)

    if label and host not in LOOPBACK:
        raise ConfigurationError(
            f"the labelling page listens on 127.0.0.1 only, not on {host}: serve read-only (--no-label) there"
        )
    try:
        server = ReportServer(
            ledger,
            host,
            port,
            policy=chosen,
            quiet=quiet,
            label=label,
        )
    except OSError as exc:
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    if warm:
        try:
            server.page()
        except BaseException:
            server.server_close()
            raise
    return server.start()
