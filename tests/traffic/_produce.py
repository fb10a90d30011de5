"""Real producers of OTLP JSON: the OpenTelemetry SDK and the OpenAI instrumentation around real
``openai`` SDK calls, exported by the SDK's OTLP JSON file exporters (the Collector's file-exporter
line format: one ``resourceSpans`` / ``resourceLogs`` export per line).

Run in a subprocess (the instrumentation reads its settings from the environment once, and patches
the SDK process-wide)::

    python -m tests.traffic._produce MODE BASE_URL TRACES_FILE LOGS_FILE

MODE ``legacy``: the v1.30 conventions, per-message log events (``gen_ai.user.message``,
``gen_ai.choice``), content capture ``true``. ``span_only`` / ``event_only``: the latest
experimental conventions, content on the span's attributes / on the
``gen_ai.client.inference.operation.details`` event.
"""

from __future__ import annotations

import contextlib
import os
import sys

CALLS = [
    {
        "messages": [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "What colour is the sky?"},
        ],
        "temperature": 0.2,
        "max_tokens": 50,
    },
    {
        "messages": [{"role": "user", "content": "Refund order 42"}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "refund",
                    "parameters": {"type": "object", "properties": {"order": {"type": "integer"}}},
                },
            }
        ],
        "tool_choice": "auto",
    },
    {
        "messages": [
            {"role": "user", "content": "Refund order 7"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call_7",
                        "type": "function",
                        "function": {"name": "refund", "arguments": '{"order": 7}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_7", "content": "refunded"},
        ],
    },
]
"""The calls made, in order (then one that fails: the server is unreachable)."""


def main(mode: str, base_url: str, traces: str, logs: str) -> None:
    if mode == "legacy":
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
    else:
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = mode
    import openai
    from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
    from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": "shop-assistant"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(traces)))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(FileLogExporter(logs)))
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    client = openai.OpenAI(base_url=base_url, api_key="sk-test-not-a-secret-0000000000", max_retries=0)
    for call in CALLS:
        client.chat.completions.create(model="gpt-test", **call)  # type: ignore[call-overload]
    dead = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0, timeout=2)
    with contextlib.suppress(openai.APIConnectionError):
        dead.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "lost"}])
    tracer_provider.shutdown()
    logger_provider.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:5])
