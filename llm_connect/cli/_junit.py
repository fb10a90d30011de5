"""``llm-connect grade --junit FILE``: the run's verdicts as JUnit XML for CI systems.

One ``<testcase>`` per task × candidate × routing judge (the judges that decide
routing and the quality gate, ``--route-on``), named ``TASK / CANDIDATE / JUDGE``
in the suite ``llm-connect``:

* **failure** when the judge rules the candidate out (its upper confidence bound
  is below ``min_quality``): the rule of the quality gate, which turns the exit
  code to 1 when ``--min-quality`` is given;
* **skipped** when the evidence is not settled yet (``undecided``,
  ``insufficient``, ``no grades``), with how many more cases would settle it;
* passed when the candidate is proven on that judge.

With ``--min-quality`` the suite carries the quality gate's outcome as the
property ``gate`` (``passed``, ``failed`` or ``not settled``, the same word as
``--json``'s ``gate``) and ``min_quality``; a CI system that counts skipped
cases as green still sees the gate in the step's exit code (5 when not settled).

Cases that failed after retries add one ``<testcase name="cases">`` with an
``<error>`` listing them, so a CI run shows them too. The XML is built with
:mod:`xml.etree.ElementTree` (it escapes every text and attribute).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

__all__ = ["junit_xml", "write_junit"]

_SUITE = "llm-connect"


def _case(stat: Any, elapsed: float) -> ET.Element:
    ev = stat.evidence
    name = f"{stat.task} / {stat.candidate} / {stat.grader_id}"
    case = ET.Element(
        "testcase", {"classname": f"{_SUITE}.{stat.task}", "name": name, "time": f"{elapsed:.3f}"}
    )
    props = ET.SubElement(case, "properties")
    for key, value in (
        ("verdict", stat.verdict),
        ("cases", ev.n),
        ("grades", ev.n_grades),
        ("mean", ev.mean),
        ("lower_bound", ev.lower_bound),
        ("upper_bound", ev.upper_bound),
        ("method", ev.method),
        ("cost_ratio", stat.cost_ratio),
    ):
        if value is not None:
            ET.SubElement(
                props,
                "property",
                {"name": key, "value": f"{value:.6g}" if isinstance(value, float) else str(value)},
            )
    if stat.verdict == "ruled out":
        ET.SubElement(
            case, "failure", {"message": f"ruled out: {ev.why}", "type": "QualityGate"}
        ).text = ev.why
    elif stat.verdict != "proven":
        from llm_connect.routing import more_cases

        more = more_cases(ev)
        settle = "" if more is None else f" (about {more} more cases would settle it)"
        ET.SubElement(case, "skipped", {"message": f"{stat.verdict}, not settled{settle}: {ev.why}"})
    return case


def junit_xml(
    stats: Sequence[Any], *, failures: Sequence[Any] = (), elapsed_s: float = 0.0, gate: Any = None
) -> bytes:
    """The JUnit XML document (UTF-8 bytes) for ``stats`` (the grade report's rows).

    Only rows whose judge decides routing (``routes``) become test cases; ``gate``
    (a :class:`~llm_connect.routing.GateResult`) adds the suite properties ``gate``
    and ``min_quality``.
    """
    routing = [s for s in stats if s.routes]
    per = elapsed_s / max(1, len(routing))
    cases = [_case(s, per) for s in routing]
    if failures:
        case = ET.Element("testcase", {"classname": _SUITE, "name": "cases", "time": "0.000"})
        lines = [f"{f.case_id} ({f.stage}): {f.error_type}: {f.message}" for f in failures]
        ET.SubElement(
            case, "error", {"message": f"{len(failures)} case(s) failed after retries", "type": "CaseFailure"}
        ).text = "\n".join(lines)
        cases.append(case)
    suite = ET.Element(
        "testsuite",
        {
            "name": _SUITE,
            "tests": str(len(cases)),
            "failures": str(sum(c.find("failure") is not None for c in cases)),
            "errors": str(sum(c.find("error") is not None for c in cases)),
            "skipped": str(sum(c.find("skipped") is not None for c in cases)),
            "time": f"{elapsed_s:.3f}",
        },
    )
    if gate is not None:
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", {"name": "gate", "value": gate.outcome})
        ET.SubElement(props, "property", {"name": "min_quality", "value": f"{gate.min_quality:g}"})
    suite.extend(cases)
    root = ET.Element("testsuites", {"name": _SUITE})
    root.append(suite)
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))


def write_junit(
    path: Path,
    stats: Sequence[Any],
    *,
    failures: Sequence[Any] = (),
    elapsed_s: float = 0.0,
    gate: Any = None,
) -> None:
    """Write :func:`junit_xml` to ``path`` atomically (a temp file in the same folder, renamed)."""
    data = junit_xml(stats, failures=failures, elapsed_s=elapsed_s, gate=gate)
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
