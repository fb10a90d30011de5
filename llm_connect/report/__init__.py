"""Reports: one self-contained HTML file of the evidence, and a local read-only viewer.

:func:`write_report` / :func:`render_report` turn the grades of a selection
(run ids, tasks, a start time) into one HTML file with inline CSS, JavaScript
and SVG: the routing decision per task with its reason, every candidate x
judge figure from the evidence module (``llm_connect.routing``), cost-quality
charts, score distributions, calibrations and stability analyses when the
ledger holds them, and a case browser with the two answers side by side and
a word-level diff. :func:`serve` serves the same page from the ledger on
127.0.0.1, paging cases from SQL; with ``label=True`` it adds a Label page that
stores human labels (:func:`label_queue` orders its cases; :func:`write_label_sheet` writes
them as a file people fill in instead). The report itself never writes to the ledger.
:func:`require_plot` says, before anything runs, that matplotlib (the ``[plot]`` extra) is
missing.
``contracts/report.md`` states the surface and its invariants.
"""

from __future__ import annotations

from llm_connect.report._charts import require_plot
from llm_connect.report._label_queue import QueueItem, label_queue
from llm_connect.report._label_sheet import write_label_sheet
from llm_connect.report._page import ReportInfo, render_report, write_report
from llm_connect.report._server import ReportServer, serve

__all__ = [
    "QueueItem",
    "ReportInfo",
    "ReportServer",
    "label_queue",
    "render_report",
    "require_plot",
    "serve",
    "write_label_sheet",
    "write_report",
]
