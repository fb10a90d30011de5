"""The one exit-code table of the ``llm-connect`` command line.

Every command exits with an :class:`ExitCode`, and a code means the same thing for every
command: 0 ok, 1 a verdict against what was checked, 2 a usage or input error, 3 work left
incomplete (failed calls, or a fault of the ledger's database), 4 a crash, 5 and 6 the two
"neither passed nor failed" verdicts, 130 and 141 the shell's own. A crash or a usage error never
shares a code with a verdict (:data:`VERDICTS` and :data:`ERRORS` are disjoint), so a CI script
written for ``grade`` reads ``stability`` right. Each command's ``--help`` prints this table
(:func:`help_rows`, written by ``_common.FastHelpCommand``), ``contracts/cli.md`` holds the same
table and which codes each command returns (:data:`COMMAND_CODES`), and
``tests/cli/test_exit_codes.py`` compares them.

Standard library only: ``--help`` loads this module.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "COMMAND_CODES",
    "ERRORS",
    "STABILITY_VERDICT_CODES",
    "VERDICTS",
    "ExitCode",
    "help_rows",
    "returns_line",
]


class ExitCode(IntEnum):
    """Every exit code of ``llm-connect``; :attr:`meaning` says what each means."""

    OK = 0
    """Done: the quality gate (if any) or the calibration passed; stability: SAFE."""
    FAILED = 1
    """A verdict against what was checked: the quality gate FAILED (``grade``), the calibration
    failed or has too little data (``calibrate``), DO_NOT_SHIP (``stability``)."""
    USAGE = 2
    """A usage or input error (a bad option, file or name, an unusable database, a missing
    optional extra), found before the work it stops."""
    INCOMPLETE = 3
    """Calls failed after retries and the work is incomplete: cases (``grade``: listed, the rest
    recorded; it outranks a verdict), pairs (``calibrate``), too few successful runs or the
    embedder (``stability``: no verdict). Also, for every command, the ledger's database failed
    under the work (``LedgerFaultError``: unreachable past ``--db-patience``, disk full,
    read-only, permission lost; ``grade``: what was received is kept, with a resume command)."""
    INTERNAL = 4
    """An unexpected error (a bug): one line, ``--debug`` prints the traceback."""
    NOT_SETTLED = 5
    """``grade --min-quality``: the gate is NOT SETTLED (no candidate ruled out, not every one
    proven; 0 with ``--allow-unsettled``)."""
    RISKY = 6
    """``stability``: the verdict RISKY, between SAFE and DO_NOT_SHIP."""
    INTERRUPTED = 130
    """Interrupted (Ctrl-C); finished work is kept (``grade``: committed, with a resume hint)."""
    BROKEN_PIPE = 141
    """The reader of standard output went away (``| head``): 128 + SIGPIPE, no message."""

    @property
    def meaning(self) -> str:
        """One line for ``--help``: what the code means, for every command."""
        return _MEANINGS[self]


_MEANINGS: dict[ExitCode, str] = {  # at most 71 characters: one line a row in 80 columns
    ExitCode.OK: "ok; the quality gate or the calibration passed; stability: SAFE",
    ExitCode.FAILED: "verdict against: gate FAILED, calibration failed, stability DO_NOT_SHIP",
    ExitCode.USAGE: "usage or input error: bad option or file, bad database, missing extra",
    ExitCode.INCOMPLETE: "incomplete: calls failed after retries, or the ledger's database failed",
    ExitCode.INTERNAL: "unexpected error (a bug): one line; --debug prints the traceback",
    ExitCode.NOT_SETTLED: "quality gate NOT SETTLED (grade; 0 with --allow-unsettled)",
    ExitCode.RISKY: "stability verdict RISKY (between SAFE and DO_NOT_SHIP)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C); finished work is kept",
    ExitCode.BROKEN_PIPE: "standard output closed early (| head); no message",
}

VERDICTS: frozenset[ExitCode] = frozenset({ExitCode.FAILED, ExitCode.NOT_SETTLED, ExitCode.RISKY})
"""The codes that are a verdict on what was checked (the run itself finished)."""
ERRORS: frozenset[ExitCode] = frozenset(
    {ExitCode.USAGE, ExitCode.INCOMPLETE, ExitCode.INTERNAL, ExitCode.INTERRUPTED, ExitCode.BROKEN_PIPE}
)
"""The codes that say the command could not finish its work (never a verdict)."""

STABILITY_VERDICT_CODES: dict[str, ExitCode] = {
    "SAFE": ExitCode.OK,
    "RISKY": ExitCode.RISKY,
    "DO_NOT_SHIP": ExitCode.FAILED,
}
"""``stability``'s verdicts. Not Ruvrics' 0/1/2: 2 is a usage error for every command, and the
rejecting verdict is 1 as ``grade``'s FAILED gate is; RISKY, neither a pass nor a rejection,
has its own code as ``grade``'s NOT SETTLED has (any non-zero code still fails a CI step)."""

_EVERY = (ExitCode.OK, ExitCode.USAGE, ExitCode.INTERNAL, ExitCode.INTERRUPTED, ExitCode.BROKEN_PIPE)
# A command that uses the ledger: its database may fail under the work (LedgerFaultError: 3).
_LEDGER = tuple(sorted({*_EVERY, ExitCode.INCOMPLETE}))

COMMAND_CODES: dict[str, tuple[ExitCode, ...]] = {
    "grade": tuple(sorted({*_EVERY, ExitCode.FAILED, ExitCode.INCOMPLETE, ExitCode.NOT_SETTLED})),
    "route": _LEDGER,
    "ledger summary": _LEDGER,
    "ledger show": _LEDGER,
    "ledger failures": _LEDGER,
    "ledger export": _LEDGER,
    "ledger sql": _LEDGER,
    "db upgrade": _LEDGER,
    "db current": _LEDGER,
    "calibrate": tuple(sorted({*_EVERY, ExitCode.FAILED, ExitCode.INCOMPLETE})),
    "stability": tuple(sorted({*_EVERY, ExitCode.FAILED, ExitCode.INCOMPLETE, ExitCode.RISKY})),
    "report": _LEDGER,
    "view": _LEDGER,
    "run status": _LEDGER,
    "labels import": _LEDGER,
    "labels export": _LEDGER,
    "labels status": _LEDGER,
    "labels queue": _LEDGER,
    "suite import": _EVERY,
    "judges list": _LEDGER,
    "judges anchor": _LEDGER,
    "judges accept": _LEDGER,
    "judges bridge": tuple(sorted({*_LEDGER, ExitCode.FAILED})),
    "judges check": tuple(sorted({*_EVERY, ExitCode.FAILED, ExitCode.INCOMPLETE, ExitCode.NOT_SETTLED})),
    "watch": _LEDGER,
}
"""The codes each command (its path under ``llm-connect``) can return."""


def help_rows() -> list[tuple[str, str]]:
    """The table as ``(code, meaning)`` rows, in order, for a help section."""
    return [(str(int(code)), code.meaning) for code in ExitCode]


def returns_line(command: str) -> str | None:
    """``"This command returns 0, 2, 4, 130 or 141."`` for a command path in
    :data:`COMMAND_CODES` (``"ledger show"``); None for another."""
    codes = COMMAND_CODES.get(command)
    if codes is None:
        return None
    numbers = [str(int(code)) for code in codes]
    return f"This command returns {', '.join(numbers[:-1])} or {numbers[-1]}."
