"""Suites from production traffic: import traces and request logs, sample them fairly.

``llm-connect suite import`` turns the calls an application made in production
into a suite: each call becomes a case holding the conversation (messages,
tools, tool choice), the run settings and the source's tags and metadata, with
the answer production got recorded under ``responses.production`` (text, tool
calls, the served model, usage, latency and cost where the source has them). So
``llm-connect grade suite.jsonl --baseline recorded:production --candidate
openai:M`` grades a candidate against what users actually got, calling only the
candidate.

Readers (one per format, :data:`FORMATS`):

* ``otlp-json`` — OpenTelemetry Collector file-exporter lines, GenAI semantic
  conventions (:mod:`llm_connect.traffic._otlp`);
* ``openai-log`` — OpenAI-style request/response logs and LiteLLM's standard
  logging payload (:mod:`llm_connect.traffic._logs`);
* ``langfuse`` — Langfuse observation or trace exports (the same module).

``llm-connect watch`` follows the same files as they grow (:class:`Follower`, by byte offset,
rotation and truncation included) and grades a sampled share of new calls in shadow.

Then: :mod:`~llm_connect.traffic._redact` (``--redact``),
:mod:`~llm_connect.traffic._sample` (seeded, stratified reservoir samples), and
:func:`import_traffic`, which streams: memory is bounded by the sample size and
the OTLP join window, plus about 60 bytes per distinct conversation for
duplicate detection. Nothing is sent anywhere.

Example::

    from llm_connect.traffic import ImportOptions, import_traffic

    report = import_traffic(["traces.jsonl"], "suite.jsonl", ImportOptions(sample=500, seed=1))
    print(report.written, report.skipped, report.dropped)
"""

from __future__ import annotations

from llm_connect.traffic._call import Answer, Skip, TrafficCall
from llm_connect.traffic._follow import (
    FilePosition,
    Followed,
    Follower,
    Poll,
    call_id,
    call_task,
    sampled,
    watch_case,
)
from llm_connect.traffic._import import FORMATS, detect_format, import_traffic
from llm_connect.traffic._importer import ImportOptions, ImportReport, meta_path
from llm_connect.traffic._otlp import DEFAULT_JOIN_WINDOW, OtlpReader
from llm_connect.traffic._redact import Redactor, luhn_ok
from llm_connect.traffic._sample import Sampler, Stratum

__all__ = [
    "DEFAULT_JOIN_WINDOW",
    "FORMATS",
    "Answer",
    "FilePosition",
    "Followed",
    "Follower",
    "ImportOptions",
    "ImportReport",
    "OtlpReader",
    "Poll",
    "Redactor",
    "Sampler",
    "Skip",
    "Stratum",
    "TrafficCall",
    "call_id",
    "call_task",
    "detect_format",
    "import_traffic",
    "luhn_ok",
    "meta_path",
    "sampled",
    "watch_case",
]
