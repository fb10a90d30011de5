"""Benchmark: the Label page's next case (``label_queue``) with 100,000 graded cases.

The ledger is ``human_decide.py``'s (task ``qa``, one baseline, one judge, every case decided by
the label sampler at rate 0.02); ``--labelled`` of the chosen cases are labelled, the rest wait.
Timed in one process, alternating, ``--rounds`` times each (medians):

* **next case**: ``label_queue(limit=1)`` for a new annotator: the sampler's chosen cases nobody
  has labelled first, in its order, then the rest by judges' disagreement (one statement);
* **next case, page**: the same as the Label page asks for it (``LabelDesk`` keeps the
  disagreement order until a new grade);
* **disagreement only** (the baseline): the same statement without the chosen-first join, as the
  queue was before it (``case_stats`` grouped per case and ordered, ``LIMIT``);
* **left** and **chosen waiting**: the two counts the page shows beside the case; **left** as
  ``queue_size`` counts it (``SELECT DISTINCT`` over ``case_stats``), **left, grouped** as it
  was counted before 2026-11-27 (over the grouped disagreement query), and **left, page** as the
  Label page asks for it after each label (``LabelDesk`` keeps the total until a new grade:
  the newest grade's id, then the annotator's labels).

PostgreSQL tables are analysed after the fill (as autovacuum would), so the planner has
statistics. Prints medians in ms and the ratio next case / disagreement only.

    python scripts/bench/label_queue.py [--cases 100000] [--labelled 0.5] [--rounds 9] [--url URL]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from human_decide import GRADER, grade

from llm_connect.labels import HumanLabel, choose_for_labels
from llm_connect.ledger import QualityLedger
from llm_connect.report._label import LabelDesk
from llm_connect.report._label_queue import _groups_sql, chosen_waiting, grades_mark, label_queue, queue_size


def _disagreement_only(ledger: QualityLedger) -> list[Any]:
    from sqlalchemy import text

    groups, params = _groups_sql("qa", None)
    sql = (
        f"SELECT * FROM ({groups}) q ORDER BY CASE WHEN q.spread >= q.unsure THEN q.spread ELSE q.unsure END "
        "DESC, q.first_id ASC, q.task, q.candidate_model, q.case_key LIMIT 1"
    )
    with ledger.engine.connect() as conn:
        rows = list(conn.execute(text(sql), params))
        conn.rollback()
    return rows


def _left_grouped(ledger: QualityLedger) -> int:
    from sqlalchemy import text

    groups, params = _groups_sql("qa", None)
    with ledger.engine.connect() as conn:
        total = int(conn.execute(text(f"SELECT COUNT(*) FROM ({groups}) q"), params).scalar_one())
        conn.rollback()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--labelled", type=float, default=0.5, help="share of the chosen cases labelled")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--url", default=None, help="ledger URL (default: a new SQLite file)")
    args = parser.parse_args()
    url = args.url or f"sqlite:///{tempfile.mkdtemp()}/queue.db"
    with QualityLedger(url) as ledger:
        grade(ledger, range(args.cases), "small")
        chosen = choose_for_labels(ledger, task="qa", candidate="small", grader_id=GRADER, rate=0.02, seed=1)
        done = chosen[: int(len(chosen) * args.labelled)]
        ledger.record_labels(HumanLabel("qa", c, "small", "ana", score=1.0) for c in done)
        if ledger.dialect == "postgresql":
            from sqlalchemy import text

            with ledger.engine.connect() as conn:
                conn.execute(text("ANALYZE"))
                conn.commit()
        desk = LabelDesk(ledger, port=0)
        assert queue_size(ledger, task="qa", annotator="zed") == _left_grouped(ledger)
        timed: dict[str, Callable[[], Any]] = {
            "next case": lambda: label_queue(ledger, task="qa", annotator="zed", limit=1),
            "next case, page": lambda: label_queue(
                ledger,
                task="qa",
                annotator="zed",
                limit=1,
                ranked=desk._ranked("qa", None, grades_mark(ledger)),
            ),
            "disagreement only": lambda: _disagreement_only(ledger),
            "left": lambda: queue_size(ledger, task="qa", annotator="zed"),
            "left, grouped": lambda: _left_grouped(ledger),
            "left, page": lambda: queue_size(
                ledger, task="qa", annotator="zed", total=desk._total("qa", None, grades_mark(ledger))
            ),
            "chosen waiting": lambda: chosen_waiting(ledger, task="qa"),
        }
        first = label_queue(ledger, task="qa", annotator="zed", limit=1)[0]
        if len(done) < len(chosen):
            assert first.chosen and first.case_id == chosen[len(done)], (
                "the first chosen case waiting comes first"
            )
        else:
            assert not first.chosen
        times: dict[str, list[float]] = {name: [] for name in timed}
        for _ in range(args.rounds):
            for name, fn in timed.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
        print(f"{ledger.dialect}: {args.cases:,} cases, {len(chosen)} chosen, {len(done)} labelled")
        med = {name: statistics.median(t) * 1000 for name, t in times.items()}
        for name, ms in med.items():
            print(f"  {name:<18} {ms:8.1f} ms")
        print(f"  next case / disagreement only: {med['next case'] / med['disagreement only']:.2f}")


if __name__ == "__main__":
    main()
