"""Shared (fleet) runs: many worker processes grade one run through one PostgreSQL ledger."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from llm_connect.errors import LedgerError, RunMismatchError
from llm_connect.ledger._engine import Store, read, write

#: The default lease of a claimed case, in seconds (``--lease-s``).
DEFAULT_LEASE_S = 60.0
#: Cases finished within this many seconds make up :attr:`FleetStatus.rate_per_min`.
_RATE_WINDOW_S = 60.0

_WHY = (
    "shared runs need PostgreSQL (postgresql+psycopg://...): SQLite allows one writer at a time "
    "and has no row locks, so workers could neither claim cases side by side nor hold leases"
)

_SUITE_INSERT = text(
    "INSERT INTO run_suites (run_id, suite_digest, n_cases, created_at) "
    "VALUES (:run, :digest, :n, now()) ON CONFLICT (run_id) DO NOTHING RETURNING run_id"
)
_SUITE_READ = text("SELECT suite_digest, n_cases FROM run_suites WHERE run_id = :run")
_CASES_INSERT = text(
    "INSERT INTO run_cases (run_id, case_id, position, task, case_digest, status, attempts, updated_at) "
    "SELECT :run, c.case_id, (c.ord - 1)::int, c.task, c.digest, 'pending', 0, now() "
    "FROM unnest(CAST(:ids AS text[]), CAST(:tasks AS text[]), CAST(:digests AS text[])) "
    "WITH ORDINALITY AS c(case_id, task, digest, ord) "
    "ON CONFLICT (run_id, case_id) DO NOTHING"
)
# Expired leases and pending cases, each read in suite order through ix_run_cases_claim
# (run_id, status, position) and locked with SKIP LOCKED (a case another claimer holds
# is passed over, never waited for), then the first `limit` of both by position.
_CLAIM = text(
    "WITH expired AS ("
    " SELECT case_id, position FROM run_cases"
    " WHERE run_id = :run AND status = 'claimed' AND lease_until < now()"
    " ORDER BY position LIMIT :limit FOR UPDATE SKIP LOCKED"
    "), pending AS ("
    " SELECT case_id, position FROM run_cases"
    " WHERE run_id = :run AND status = 'pending'"
    " ORDER BY position LIMIT :limit FOR UPDATE SKIP LOCKED"
    "), picked AS ("
    " SELECT case_id FROM (SELECT * FROM expired UNION ALL SELECT * FROM pending) AS c"
    " ORDER BY position LIMIT :limit"
    ") "
    "UPDATE run_cases AS rc SET status = 'claimed', worker_id = :worker, "
    "lease_until = now() + make_interval(secs => :lease), attempts = rc.attempts + 1, updated_at = now() "
    "FROM picked WHERE rc.run_id = :run AND rc.case_id = picked.case_id "
    "RETURNING rc.case_id, rc.position"
)
# Read the claim index in order, whatever the statistics say: a run registered a moment ago has
# none yet (autovacuum analyses later), and the planner then picks a bitmap scan that sorts every
# pending case of the run on each claim (~35 ms at 100,000 cases instead of ~1 ms). Without
# bitmap scans the ordered index scan is the cheapest plan. (No JIT for a statement this small.)
_CLAIM_PLAN = text("SET LOCAL enable_bitmapscan = off; SET LOCAL jit = off")
_RENEW = text(
    "UPDATE run_cases SET lease_until = now() + make_interval(secs => :lease), updated_at = now() "
    "WHERE run_id = :run AND case_id = ANY(:ids) AND worker_id = :worker AND status = 'claimed' "
    "RETURNING case_id"
)
_RELEASE = text(
    "UPDATE run_cases SET status = 'pending', worker_id = NULL, lease_until = NULL, updated_at = now() "
    "WHERE run_id = :run AND case_id = ANY(:ids) AND worker_id = :worker AND status = 'claimed'"
)
#: Used by record_outcomes(..., worker_id=...): the cases this worker still holds become done
#: (failed when a failure is their only outcome); the rest of the write is limited to them.
_FINISH = text(
    "UPDATE run_cases SET status = CASE WHEN case_id = ANY(:failed) THEN 'failed' ELSE 'done' END, "
    "lease_until = NULL, updated_at = now() "
    "WHERE run_id = :run AND case_id = ANY(:ids) AND worker_id = :worker AND status = 'claimed' "
    "RETURNING case_id"
)
#: Used when a journal is replayed (another process of the worker that kept it): its cases are
#: finished by this worker when nobody else has them: pending, still claimed by the worker that
#: kept the journal, or with a lapsed lease. A case another worker holds or finished is left.
_ADOPT = text(
    "UPDATE run_cases SET status = CASE WHEN case_id = ANY(:failed) THEN 'failed' ELSE 'done' END, "
    "worker_id = :worker, lease_until = NULL, updated_at = now() "
    "WHERE run_id = :run AND case_id = ANY(:ids) AND (status = 'pending' OR (status = 'claimed' "
    "AND (worker_id = ANY(:previous) OR lease_until < now()))) "
    "RETURNING case_id"
)
_WORKER_UPSERT = text(
    "INSERT INTO fleet_workers (worker_id, run_id, host, pid, started_at, heartbeat_at, calls, failures, "
    "cases_done, stopped_at) VALUES (:worker, :run, :host, :pid, now(), now(), 0, 0, 0, NULL) "
    "ON CONFLICT (worker_id) DO UPDATE SET run_id = excluded.run_id, host = excluded.host, "
    "pid = excluded.pid, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, "
    "calls = 0, failures = 0, cases_done = 0, stopped_at = NULL"
)
_HEARTBEAT = text(
    "UPDATE fleet_workers SET heartbeat_at = now(), calls = :calls, failures = :failures, "
    "cases_done = :done WHERE worker_id = :worker AND run_id = :run"
)
_STOP = text(
    "UPDATE fleet_workers SET stopped_at = now(), heartbeat_at = now() "
    "WHERE worker_id = :worker AND run_id = :run"
)
_STATUS = text(
    "SELECT s.suite_digest, s.n_cases, now() AS as_of, "
    "EXTRACT(EPOCH FROM (now() - s.created_at))::float8 AS age_s, "
    "count(c.case_id) AS total, "
    "count(*) FILTER (WHERE c.status = 'pending') AS pending, "
    "count(*) FILTER (WHERE c.status = 'claimed') AS claimed, "
    "count(*) FILTER (WHERE c.status = 'done') AS done, "
    "count(*) FILTER (WHERE c.status = 'failed') AS failed, "
    "count(*) FILTER (WHERE c.status = 'claimed' AND c.lease_until < now()) AS expired, "
    "count(*) FILTER (WHERE c.status IN ('done', 'failed') "
    "AND c.updated_at >= now() - make_interval(secs => :window)) AS recent "
    "FROM run_suites s LEFT JOIN run_cases c ON c.run_id = s.run_id "
    "WHERE s.run_id = :run GROUP BY s.run_id, s.suite_digest, s.n_cases, s.created_at"
)
_WORKERS = text(
    "SELECT worker_id, host, pid, started_at, heartbeat_at, "
    "(stopped_at IS NULL AND heartbeat_at >= now() - make_interval(secs => :alive)) AS alive, "
    "calls, failures, cases_done, stopped_at "
    "FROM fleet_workers WHERE run_id = :run ORDER BY started_at, worker_id"
)
# One statement: create the bucket full (taking `cost`), or refill it by the time since its
# last grant (capped at burst) and take `cost` only when that many tokens are there. A bucket
# without enough is not touched (the refill is computed from updated_at whenever asked), so the
# CTE returns no row; the outer SELECT then reads the bucket to say how long to wait.
_REFILLED = (
    "LEAST(excluded.burst, b.tokens + "
    "GREATEST(0.0, EXTRACT(EPOCH FROM (now() - b.updated_at))::float8) * excluded.rate_per_s)"
)
_ACQUIRE = text(
    "WITH granted AS ("
    " INSERT INTO rate_buckets AS b (key, tokens, updated_at, rate_per_s, burst)"
    " VALUES (:key, CAST(:burst AS float8) - CAST(:cost AS float8), now(), :rate, :burst)"
    " ON CONFLICT (key) DO UPDATE SET"
    f" tokens = {_REFILLED} - CAST(:cost AS float8),"
    " updated_at = GREATEST(b.updated_at, now()),"
    " rate_per_s = excluded.rate_per_s, burst = excluded.burst"
    f" WHERE {_REFILLED} >= CAST(:cost AS float8)"
    " RETURNING 1"
    ") "
    "SELECT (SELECT count(*) FROM granted) AS granted, b.tokens, "
    "EXTRACT(EPOCH FROM (now() - b.updated_at))::float8 AS idle_s "
    "FROM (SELECT 1) AS one LEFT JOIN rate_buckets AS b ON b.key = :key"
)
_RETURN_RATE = text("UPDATE rate_buckets SET tokens = LEAST(burst, tokens + :amount) WHERE key = :key")


@dataclass(frozen=True)
class FleetWorkerRow:
    """One worker process of a shared run (``fleet_workers``) as :meth:`FleetStore.run_status` reads it."""

    worker_id: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_at: datetime
    alive: bool
    calls: int
    failures: int
    cases_done: int
    stopped_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (timestamps as ISO 8601 text)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


@dataclass(frozen=True)
class FleetStatus:
    """Where a shared run stands (:meth:`FleetStore.run_status`)."""

    run_id: str
    suite_digest: str
    total: int
    pending: int
    claimed: int
    done: int
    failed: int
    expired: int
    workers: tuple[FleetWorkerRow, ...]
    calls: int
    failures: int
    rate_per_min: float
    as_of: datetime

    @property
    def left(self) -> int:
        """Cases not finished yet (pending or claimed)."""
        return self.pending + self.claimed

    @property
    def workers_alive(self) -> int:
        """Workers whose heartbeat is recent and that have not stopped."""
        return sum(1 for w in self.workers if w.alive)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (timestamps as ISO 8601 text)."""
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "workers"}
        head = dict(list(out.items())[:8])  # run_id ... expired
        workers = [w.to_dict() for w in self.workers]
        return {**head, "left": self.left, "workers_alive": self.workers_alive, "workers": workers, **out}


class FleetStore(Store):
    """Coordination of shared runs: case claims with leases, workers, a shared rate limit."""

    def check_shared(self, what: str) -> None:
        """Raise :class:`~llm_connect.errors.LedgerError` naming ``what`` unless on PostgreSQL."""
        if self.engine.dialect.name != "postgresql":
            raise LedgerError(f"{what}: {_WHY}")

    # -- cases -----------------------------------------------------------------

    def register_run_cases(
        self, run_id: str, cases: Sequence[tuple[str, str, str]], *, suite_digest: str
    ) -> int:
        """Register the cases of shared run ``run_id``; returns how many cases the run has."""
        self.check_shared("registering a shared run")
        if not isinstance(run_id, str) or not run_id:
            raise LedgerError(f"run_id must be a non-empty string, not {run_id!r}")
        ids = [c[0] for c in cases]
        dup = next((case_id for case_id, n in Counter(ids).items() if n > 1), None)
        if dup is not None:
            raise LedgerError(f"shared run {run_id!r}: case id {dup!r} appears more than once in the suite")
        if any(not isinstance(i, str) or not i for i in ids):
            raise LedgerError(f"shared run {run_id!r}: every case needs a non-empty string id")

        def run(conn: Connection) -> int:
            params = {"run": run_id, "digest": suite_digest, "n": len(ids)}
            if conn.execute(_SUITE_INSERT, params).first() is None:
                stored = conn.execute(_SUITE_READ, {"run": run_id}).one()
                if stored[0] != suite_digest:
                    raise RunMismatchError(
                        f"run {run_id!r} is already registered as a shared run of another suite "
                        f"(digest {stored[0][:12]}..., {stored[1]} cases; this suite: "
                        f"{suite_digest[:12]}..., {len(ids)} cases): every worker of a run must grade "
                        "the same suite; use a new --run-id for this one",
                        run_id=run_id,
                    )
                return int(stored[1])
            if ids:
                conn.execute(
                    _CASES_INSERT,
                    {
                        "run": run_id,
                        "ids": ids,
                        "tasks": [c[1] for c in cases],
                        "digests": [c[2] for c in cases],
                    },
                )
            return len(ids)

        return write(self.engine, "registering a shared run", run)

    def claim_cases(self, run_id: str, worker_id: str, *, limit: int, lease_s: float) -> list[str]:
        """Claim up to ``limit`` cases of ``run_id`` for ``worker_id``; their ids in suite order."""
        self.check_shared("claiming cases")
        if limit <= 0:
            return []
        params = {"run": run_id, "worker": worker_id, "limit": int(limit), "lease": float(lease_s)}

        def run(conn: Connection) -> list[str]:
            conn.execute(_CLAIM_PLAN)
            return [r[0] for r in sorted(conn.execute(_CLAIM, params).all(), key=lambda r: r[1])]

        return write(self.engine, "claiming cases", run)

    def renew_leases(
        self, run_id: str, worker_id: str, case_ids: Sequence[str], *, lease_s: float
    ) -> list[str]:
        """Extend to ``now() + lease_s`` the leases ``worker_id`` still holds among ``case_ids``."""
        self.check_shared("renewing leases")
        wanted = list(dict.fromkeys(case_ids))
        if not wanted:
            return []
        params = {"run": run_id, "worker": worker_id, "ids": wanted, "lease": float(lease_s)}

        def run(conn: Connection) -> list[str]:
            held = {r[0] for r in conn.execute(_RENEW, params)}
            return [c for c in wanted if c in held]

        return write(self.engine, "renewing leases", run)

    def release_cases(self, run_id: str, worker_id: str, case_ids: Sequence[str]) -> None:
        """Give back the cases ``worker_id`` holds among ``case_ids`` (pending again; a graceful stop)."""
        self.check_shared("releasing cases")
        wanted = list(dict.fromkeys(case_ids))
        if not wanted:
            return
        params = {"run": run_id, "worker": worker_id, "ids": wanted}
        write(self.engine, "releasing cases", lambda conn: conn.execute(_RELEASE, params))

    def finish_cases(
        self,
        conn: Connection,
        run_id: str,
        worker_id: str,
        case_ids: Sequence[str],
        failed: Sequence[str],
        *,
        adopt_from: Sequence[str] = (),
    ) -> set[str]:
        """In ``conn``'s transaction: the cases ``worker_id`` still holds among ``case_ids`` become
        ``done`` (``failed`` for those in ``failed``); returns them. A case another worker took
        over is left as it is (and not returned). ``adopt_from``: a journal is being replayed, kept
        by these workers: their cases are finished too while no other worker has them."""
        if not case_ids:
            return set()
        ids = list(dict.fromkeys(case_ids))
        params = {"run": run_id, "worker": worker_id, "ids": ids, "failed": sorted(failed)}
        if adopt_from:
            previous = sorted({worker_id, *adopt_from})
            return {r[0] for r in conn.execute(_ADOPT, {**params, "previous": previous})}
        return {r[0] for r in conn.execute(_FINISH, params)}

    # -- workers ---------------------------------------------------------------

    def register_worker(self, run_id: str, worker_id: str, *, host: str, pid: int) -> None:
        """Register (or restart) ``worker_id`` of shared run ``run_id``, heartbeat now, counts zero."""
        self.check_shared("registering a worker")
        params = {"run": run_id, "worker": worker_id, "host": host, "pid": int(pid)}
        write(self.engine, "registering a worker", lambda conn: conn.execute(_WORKER_UPSERT, params))

    def heartbeat(self, run_id: str, worker_id: str, *, calls: int, failures: int, cases_done: int) -> None:
        """Mark ``worker_id`` alive now and store its counts (absolute, not increments)."""
        self.check_shared("a worker's heartbeat")
        params = {
            "run": run_id,
            "worker": worker_id,
            "calls": int(calls),
            "failures": int(failures),
            "done": int(cases_done),
        }

        def run(conn: Connection) -> None:
            if conn.execute(_HEARTBEAT, params).rowcount == 0:
                raise LedgerError(
                    f"worker {worker_id!r} is not registered for shared run {run_id!r} "
                    "(call register_worker first)"
                )

        write(self.engine, "a worker's heartbeat", run)

    def stop_worker(self, run_id: str, worker_id: str) -> None:
        """Mark ``worker_id`` stopped (it no longer counts as alive)."""
        self.check_shared("stopping a worker")
        params = {"run": run_id, "worker": worker_id}
        write(self.engine, "stopping a worker", lambda conn: conn.execute(_STOP, params))

    # -- status ----------------------------------------------------------------

    def run_status(self, run_id: str, *, alive_s: float = 2 * DEFAULT_LEASE_S) -> FleetStatus:
        """Where shared run ``run_id`` stands: cases by state, workers, calls, failures, rate."""
        self.check_shared("reading a shared run's status")

        def run(conn: Connection) -> tuple[Any, tuple[FleetWorkerRow, ...]]:
            rec = conn.execute(_STATUS, {"run": run_id, "window": _RATE_WINDOW_S}).mappings().first()
            if rec is None:
                return None, ()
            workers = tuple(
                FleetWorkerRow(**dict(w))
                for w in conn.execute(_WORKERS, {"run": run_id, "alive": float(alive_s)}).mappings()
            )
            return rec, workers

        rec, workers = read(self.engine, "reading a shared run's status", run)
        if rec is None:
            raise LedgerError(
                f"no shared run {run_id!r} in this ledger (its cases are registered by the first "
                "worker of `grade --shared`)"
            )
        window = min(_RATE_WINDOW_S, max(float(rec["age_s"]), 1.0))
        return FleetStatus(
            run_id=run_id,
            suite_digest=rec["suite_digest"],
            **{k: int(rec[k]) for k in ("total", "pending", "claimed", "done", "failed", "expired")},
            workers=workers,
            calls=sum(w.calls for w in workers),
            failures=sum(w.failures for w in workers),
            rate_per_min=float(rec["recent"]) * 60.0 / window,
            as_of=rec["as_of"],
        )

    # -- a rate limit every process shares ----------------------------------------

    def acquire_rate(self, key: str, *, rate_per_s: float, burst: float, cost: float = 1.0) -> float:
        """Take ``cost`` tokens from the shared bucket ``key``: 0.0 when granted, else the seconds
        until enough tokens are there (nothing taken)."""
        self.check_shared("a shared rate limit")
        if not (rate_per_s > 0 and burst > 0):
            raise ValueError(f"rate_per_s and burst must be positive, not {rate_per_s!r} and {burst!r}")
        if not 0 <= cost <= burst:
            raise ValueError(f"cost must lie between 0 and burst ({burst!r}), not {cost!r}")
        params = {"key": key, "rate": float(rate_per_s), "burst": float(burst), "cost": float(cost)}
        granted, tokens, idle_s = read(
            self.engine, "a shared rate limit", lambda conn: tuple(conn.execute(_ACQUIRE, params).one())
        )
        if granted:
            return 0.0
        if tokens is None:  # the bucket was created by a transaction this statement could not see
            return cost / rate_per_s
        have = min(burst, float(tokens) + max(0.0, float(idle_s)) * rate_per_s)
        return max((cost - have) / rate_per_s, 0.001)

    def return_rate(self, key: str, *, amount: float) -> None:
        """Give ``amount`` tokens back to bucket ``key`` (up to its burst), e.g. a token budget
        estimated higher than the call used."""
        self.check_shared("a shared rate limit")
        if amount <= 0:
            return
        params = {"key": key, "amount": float(amount)}
        read(self.engine, "a shared rate limit", lambda conn: conn.execute(_RETURN_RATE, params))
