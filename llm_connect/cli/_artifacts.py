"""Files ``llm-connect grade`` writes besides its output: ``--junit`` XML and the ``--report`` HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_connect.cli._common import echo_err, fail

__all__ = ["check_output_path", "write_artifacts"]


def check_output_path(path: Path | None, option: str) -> None:
    """Refuse (exit 2, before any model call) an output path whose folder does not exist."""
    if path is None:
        return
    if path.is_dir():
        fail(f"{option} {path}: is a directory, not a file")
    if not path.parent.exists():
        fail(f"{option} {path}: the folder {str(path.parent)!r} does not exist")


def write_artifacts(
    *,
    junit: Path | None,
    report_path: Path | None,
    stats: list[Any],
    report: Any,
    ledger: Any,
    policy: Any,
    gate: Any = None,
) -> None:
    """Write the JUnit XML and the HTML report of the run just made (each only when asked).

    The report decides under ``policy`` (the run's ``RoutingPolicy``), as the run's routing did.
    A failure to write one is reported on stderr and does not lose the run's grades
    (they are committed already) nor stop the other file.
    """
    if junit is not None:
        from llm_connect.cli._junit import write_junit

        try:
            write_junit(junit, stats, failures=report.failures, elapsed_s=report.elapsed_s, gate=gate)
        except OSError as exc:
            echo_err(f"--junit {junit}: cannot write ({exc.strerror or exc})")
    if report_path is not None and report.run_id is not None:
        from llm_connect.report import write_report

        try:
            info = write_report(
                ledger,
                report_path,
                run_ids=[str(report.run_id)],
                policy=policy,
                gate=None
                if gate is None
                else {"outcome": gate.outcome, "min_quality": gate.min_quality, "lines": gate.lines()},
            )
        except Exception as exc:  # the grades are committed: the report is a view of them
            echo_err(f"--report {report_path}: not written ({type(exc).__name__}: {exc})")
        else:
            echo_err(f"report: {info.path} ({info.bytes:,} bytes)")
