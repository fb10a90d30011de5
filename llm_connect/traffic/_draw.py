"""``--sample N`` without ``--strict``: draw first, build only the cases drawn.

Building a case (decoding the content, masking, checking the ``Conversation``,
redacting) costs several times reading it; a sample of ``N`` from a day of
traces needs ``N`` of them. So each call is first *probed*
(:class:`~llm_connect.traffic._call.Probe`: the key of its conversation's source
text, whether it failed, whether its answer is empty, its models), dropped or
counted as a duplicate by that, and offered to the reservoir as a cheap
reference (an OTLP span's attribute values still encoded, or a call a reader
already decoded). At the end the references drawn are built, in priority order
per stratum; one that cannot become a case (content unreadable, conversation
refused, the same conversation as a case already drawn once masked) is counted
as it would be in a full import and replaced by the next.

What differs from building every case (``--strict`` does that, and so does an
import without ``--sample``): duplicates are first found by the source text of
the conversation (the same JSON text, or for decoded calls the same messages,
tools and tool choice), then among the cases drawn by the conversation's digest;
skips for unreadable content and refused conversations, and the notes (tool
calls without definitions, redacted values, cases without the ``--task-from``
key), count only the references built, not the whole file; a stratum's
population counts calls before their conversation is checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from llm_connect._secrets import is_secret_key, mask_secrets
from llm_connect.traffic._call import Deferred, Probe, Ready, Skip, TrafficCall
from llm_connect.traffic._redact import Redactor, mask_request
from llm_connect.traffic._sample import Sampler

if TYPE_CHECKING:  # pragma: no cover
    from llm_connect.traffic._importer import _Importer

__all__ = ["RESERVED_KEYS", "draw", "spare"]

RESERVED_KEYS = frozenset({"source", "run_settings"})
"""Metadata keys the importer writes itself: stratifying by them builds every case."""


def spare(n: int) -> int:
    """References kept beyond ``n`` per stratum to replace the unusable ones drawn."""
    return max(16, n // 10)


def _stratum(importer: _Importer, item: Deferred, probe: Probe) -> str:
    """The stratum the case of ``item`` would have (``_Importer.stratum`` of the built case)."""
    opts = importer.options
    by = opts.stratify_by
    if by is None:
        return ""
    if by == "task":
        return importer.task(item.metadata(), probe.requested_model, probe.answer_model, note=False)
    if by == "tag":
        return ",".join(sorted(mask_secrets(t) for t in item.tags())) or "(untagged)"
    if is_secret_key(by):  # the case's metadata drops secret-named keys
        return "(none)"
    meta = item.metadata()
    attrs = meta.get("attributes")
    value = meta.get(by, attrs.get(by) if isinstance(attrs, dict) else None)
    if value is None:
        return "(none)"
    value = mask_request(value)
    if opts.redact:
        value = Redactor().value(value)
    return str(value)


def draw(
    items: Iterable[TrafficCall | Skip | Deferred | tuple[Any, ...]], importer: _Importer, sampler: Sampler
) -> list[Any]:
    """The cases of the sample, in stream order (see the module docstring); counts go to the report.

    Raises:
        SampleExhausted: too many drawn references were unusable (build every case instead).
        TrafficImportError: from the importer (``strict`` is not used here).
    """
    r = importer.report
    keep = importer.options.keep_duplicates
    keys: set[int] = set()
    seq = 0
    for item in items:
        if isinstance(item, Skip):
            importer.skip(item)
            continue
        ref: Deferred | None = None
        probe: Probe | Skip | None = None
        if isinstance(item, tuple):  # probed by a worker, and it cannot enter the reservoir
            key_bytes, error, empty, stratum = item
        else:
            ref = Ready(item) if isinstance(item, TrafficCall) else item
            probe = ref.probe()
            if isinstance(probe, Skip):
                importer.skip(probe)
                continue
            key_bytes, error, empty, stratum = probe.key, probe.error, probe.empty, probe.stratum
        r.calls += 1
        if error:
            r.dropped["errored call"] = r.dropped.get("errored call", 0) + 1
            continue
        if empty:
            r.dropped["empty answer"] = r.dropped.get("empty answer", 0) + 1
            continue
        key = int.from_bytes(key_bytes[:8], "big")
        if key in keys:
            if not keep:
                r.duplicates += 1
                continue
        else:
            keys.add(key)
        seq += 1
        r.eligible += 1
        if ref is None:
            sampler.strata[stratum].population += 1
            continue
        if stratum is None:
            assert isinstance(probe, Probe)
            stratum = _stratum(importer, ref, probe)
        sampler.offer(stratum, key_bytes.hex(), seq, ref)
    keys.clear()

    def build(ref: Deferred) -> dict[str, Any] | None:
        call = ref.build()
        if isinstance(call, Skip):
            importer.skip(call)
        elif importer.admit(call, count=False):
            built = importer.build(call)
            if built is not None:
                return built[0]
        r.eligible -= 1
        return None

    chosen, r.warnings = sampler.draw(build)
    return chosen
