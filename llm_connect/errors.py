"""One exception hierarchy for llm-connect.

Every error the library raises on purpose derives from :class:`LLMConnectError`.
Third-party exceptions (the ``openai`` SDK, SQLAlchemy, YAML parsers) are
translated at one boundary each, so callers only ever catch these classes::

    LLMConnectError
    ├── ConfigurationError (ValueError)     bad option, unknown judge or adapter spec
    │   └── TrafficImportError              production traffic could not become a suite
    ├── GradingValidationError (ValueError) a GradingResult field is invalid
    ├── SuiteError (ValueError)             a suite file is malformed (file, line, field)
    ├── AdapterError                        a model call failed
    │   ├── RateLimitError                  429; retryable, carries retry_after
    │   ├── AdapterTimeoutError             the call timed out; retryable
    │   ├── AdapterConnectionError          could not reach the server; retryable
    │   ├── ServerError                     5xx; retryable
    │   ├── AuthenticationError             401/403; never retried
    │   ├── BadRequestError                 other 4xx; never retried
    │   ├── MalformedResponseError          the server answered something unusable
    │   └── RecordingNotFoundError          RecordedAdapter has no response for a prompt
    ├── BudgetExceededError                 a BudgetTracker refused a call
    ├── JudgeError                          a judge could not produce a grade
    │   ├── CaseDataError (ValueError)      a case lacks the data a rule-based judge needs
    │   ├── EmbeddingOutputError (ValueError) an embedder returned unusable vectors
    │   └── JudgeOutputError (ValueError)   an LLM judge's reply held no usable grade
    ├── LedgerError                         the ledger could not be opened or written
    │   ├── LedgerFaultError                the database failed under the work: unreachable past
    │   │                                   the patience, disk full, read-only, permission lost
    │   ├── SchemaVersionError              the database is at an unknown/newer revision
    │   ├── GradeConflictError              a grade's key is stored with different content
    │   ├── RunMismatchError                a shared run id is registered with a different suite
    │   └── LabelError (ValueError)         a human label is invalid or names no graded case
    │       └── LabelConflictError          a different label is stored under the label's key
    ├── ScorerDataError                     a scorer's bundled data file failed its integrity check
    ├── CalibrationError                    a calibration could not be computed
    └── StabilityError                      a stability analysis could not be run or finished
        ├── StabilityInputError (ValueError) a stability input file is malformed (file, field)
        │   ├── InvalidJSONInputError       the input file is not JSON at all
        │   └── ToolDefinitionError         the tools (a tools file or an input's tools) are malformed
        ├── InsufficientRunsError           fewer runs succeeded than the minimum
        └── StabilityEmbeddingError         the embedder failed on the responses

The CLI is the only place an exception becomes an exit code.
Every message is masked when the error is built: a credential (``sk-...``,
``Bearer ...``, ``api_key=...``; see :mod:`llm_connect._secrets`) never reaches
``str(error)``. A failure record keeps an error's whole message (every line),
bounded by :func:`whole_message` at :data:`MAX_ERROR_MESSAGE_CHARS` (helpers
here, outside ``__all__``, which lists the exception classes only).
"""

from __future__ import annotations

from llm_connect._secrets import mask_secrets

__all__ = [
    "AdapterConnectionError",
    "AdapterError",
    "AdapterTimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "BudgetExceededError",
    "CalibrationError",
    "CaseDataError",
    "ConfigurationError",
    "EmbeddingOutputError",
    "GradeConflictError",
    "GradingValidationError",
    "InsufficientRunsError",
    "InvalidJSONInputError",
    "JudgeError",
    "JudgeOutputError",
    "LLMConnectError",
    "LabelConflictError",
    "LabelError",
    "LedgerError",
    "LedgerFaultError",
    "MalformedResponseError",
    "RateLimitError",
    "RecordingNotFoundError",
    "RunMismatchError",
    "SchemaVersionError",
    "ScorerDataError",
    "ServerError",
    "StabilityEmbeddingError",
    "StabilityError",
    "StabilityInputError",
    "SuiteError",
    "ToolDefinitionError",
    "TrafficImportError",
]

#: The most characters of an error message a failure record keeps: the server's whole
#: message (every line of it), credentials masked, cut here with a marker saying so.
MAX_ERROR_MESSAGE_CHARS = 2000


def whole_message(text: str, limit: int = MAX_ERROR_MESSAGE_CHARS) -> str:
    """``text`` whole (all its lines), credentials masked, at most ``limit`` characters.

    Masking comes first (:func:`llm_connect._secrets.mask_secrets`), so a
    credential is never cut in half and left readable. A longer text is cut and
    ends with ``... [cut: N more characters]``, the whole result still within
    ``limit``. Surrounding whitespace is dropped.
    """
    masked = mask_secrets(text).strip()
    if len(masked) <= limit:
        return masked
    marker = f" ... [cut: {len(masked) - limit} more characters]"
    while True:  # the marker's own length changes how much is cut
        keep = max(0, limit - len(marker))
        cut = len(masked) - keep
        new = f" ... [cut: {cut} more characters]"
        if new == marker:
            return masked[:keep] + marker
        marker = new


RAW_REPLY_CHARS = 600
"""How much of a judge's unusable reply an error quotes."""


class LLMConnectError(Exception):
    """Base class of every error llm-connect raises on purpose.

    Its message never carries a credential: every string argument is passed
    through :func:`llm_connect._secrets.mask_secrets` when the error is built
    (``sk-...``, ``hf_...``, ``Bearer ...``, ``api_key=...`` become
    ``[REDACTED]``), so whatever prints, logs or stores ``str(error)`` is masked.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(mask_secrets(a) if isinstance(a, str) else a for a in args))


class ConfigurationError(LLMConnectError, ValueError):
    """An option, judge name, adapter spec or setting is invalid.

    Raised when the object is built (never per case), so a bad option stops a
    run before any model is called.
    """


class TrafficImportError(ConfigurationError):
    """Production traffic could not become a suite (``llm-connect suite import``): an unknown
    or undetectable format, a skipped record under ``--strict``, nothing left after the
    filters, an unreadable file. Nothing is written when it is raised.
    """


class GradingValidationError(LLMConnectError, ValueError):
    """A :class:`~llm_connect.grading.GradingResult` field failed validation
    (score outside 0..1, NaN, a bool or string score, an empty grader id)."""


class SuiteError(LLMConnectError, ValueError):
    """A suite file is malformed. ``path``, ``line`` and ``field`` name the place."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        where = ""
        if path is not None:
            where = path if line is None else f"{path}:{line}"
        if field is not None:
            where = f"{where} field {field!r}" if where else f"field {field!r}"
        super().__init__(f"{where}: {message}" if where else message)
        self.message = mask_secrets(message)


class AdapterError(LLMConnectError):
    """A model call failed.

    Attributes:
        adapter_id: the adapter that made the call (``openai:gpt-4o-mini``).
        status_code: the HTTP status, when the server answered.
        request_id: the server's request id, when it sent one.
        retryable: whether retrying the same call may succeed.
    """

    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        adapter_id: str | None = None,
        status_code: int | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.adapter_id = adapter_id
        self.status_code = status_code
        self.request_id = request_id


class RateLimitError(AdapterError):
    """The server answered 429. ``retry_after`` holds its Retry-After in seconds."""

    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.retry_after = retry_after


class AdapterTimeoutError(AdapterError):
    """The call did not finish within the run config's ``timeout_s``."""

    retryable = True


class AdapterConnectionError(AdapterError):
    """The server could not be reached (refused, reset, DNS)."""

    retryable = True


class ServerError(AdapterError):
    """The server answered with a 5xx status."""

    retryable = True


class AuthenticationError(AdapterError):
    """The server refused the credentials (401 or 403)."""


class BadRequestError(AdapterError):
    """The server rejected the request (a 4xx other than 401, 403 and 429)."""


class MalformedResponseError(AdapterError):
    """The server answered, but not with a usable completion (bad JSON, no choices)."""


class RecordingNotFoundError(AdapterError, KeyError):
    """A :class:`~llm_connect.adapters.RecordedAdapter` holds no response for a prompt."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class BudgetExceededError(LLMConnectError):
    """A :class:`~llm_connect.types.BudgetTracker` refused a call: its budget is spent."""


class JudgeError(LLMConnectError):
    """A judge could not produce a grade for a pair."""


class CaseDataError(JudgeError, ValueError):
    """A case lacks (or holds malformed) data a rule-based judge needs, and the
    judge's options do not supply it (a ``schema`` judge and no schema anywhere).

    Raised per case, while judging: the rest of the run goes on. ``case_id`` and
    ``field`` (``expected.schema``) name the place.
    """

    def __init__(self, message: str, *, case_id: str | None = None, field: str | None = None) -> None:
        self.case_id = case_id
        self.field = field
        where = f"case {case_id!r}" if case_id is not None else "no case"
        if field is not None:
            where += f" field {field!r}"
        super().__init__(f"{where}: {message}")
        self.message = mask_secrets(message)


class EmbeddingOutputError(JudgeError, ValueError):
    """An embedding adapter returned unusable vectors for a judge: the wrong number,
    vectors of different lengths, or non-finite values."""


class JudgeOutputError(JudgeError, ValueError):
    """An LLM judge's reply held no usable grade. ``raw_reply`` keeps the reply verbatim, and the
    message quotes it (at most :data:`RAW_REPLY_CHARS` characters, credentials masked) unless it
    quotes it already, so a run's failure record and output show what the judge said."""

    def __init__(self, message: str, *, raw_reply: str | None = None) -> None:
        reply = (raw_reply or "").strip()
        if reply and reply[:40] not in message:
            shown = reply if len(reply) <= RAW_REPLY_CHARS else reply[:RAW_REPLY_CHARS] + "..."
            message = f"{message}; the reply was: {shown!r}"
        super().__init__(message)
        self.raw_reply = raw_reply


class LedgerError(LLMConnectError):
    """The ledger could not be opened, migrated, read or written."""


class LedgerFaultError(LedgerError):
    """The ledger's database failed under work already under way, through no fault of the command:
    it stayed unreachable longer than the patience (``--db-patience``), its disk is full, its file
    or file system is read-only, or the permission to write it was lost.

    ``cause`` is one of :data:`FAULT_CAUSES`; ``url`` the database (password masked);
    ``waited_s`` how long it was waited for (``unreachable`` only). The batch engine fills in
    ``journal`` (where answers received but not recorded were kept), ``journaled`` (how many
    finished cases it holds) and ``journal_error`` (why they could not be kept anywhere).
    """

    def __init__(self, message: str, *, cause: str, url: str = "", waited_s: float = 0.0) -> None:
        super().__init__(message)
        self.cause = cause
        self.url = url
        self.waited_s = waited_s
        self.journal: str | None = None
        self.journaled = 0
        self.journal_error: str | None = None


FAULT_CAUSES = ("unreachable", "disk_full", "read_only", "permission")
"""The causes of a :class:`LedgerFaultError`."""


class SchemaVersionError(LedgerError):
    """The database is at a revision this version of llm-connect does not know."""


class GradeConflictError(LedgerError):
    """A grade's key (run, case, grader, candidate model) is already stored with different content.

    Recording the identical grade again is a no-op; a *different* grade under a
    stored key is never dropped silently. ``keys`` lists each conflicting key as
    ``(run_id, case_id, grader_id, candidate_model)``; nothing of the batch was written.
    """

    def __init__(self, message: str, *, keys: tuple[tuple[str, str, str, str], ...] = ()) -> None:
        super().__init__(message)
        self.keys = keys


class RunMismatchError(LedgerError):
    """A shared run's id is already registered with a different suite (another case list).

    Every process of a shared run must grade the same suite; ``run_id`` names the
    run. Use a new run id for another suite.
    """

    def __init__(self, message: str, *, run_id: str = "") -> None:
        super().__init__(message)
        self.run_id = run_id


class LabelError(LedgerError, ValueError):
    """A human label was refused: an unknown preference, a score outside 0..1, a missing field,
    or a (task, case, candidate) the ledger has no grade for. Nothing of its batch was written.

    ``field`` names the label's field; ``index`` its position in the batch given to
    :meth:`~llm_connect.ledger.QualityLedger.record_labels`; ``path`` and ``line`` the place in
    a labels file, when it came from one (``labels.csv line 4 field 'preference': ...``).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
        index: int | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.index = index
        self.message = mask_secrets(message)
        where = " ".join(
            part
            for part in (
                path,
                None if line is None else f"line {line}",
                None if field is None else f"field {field!r}",
            )
            if part
        )
        super().__init__(f"{where}: {message}" if where else message)

    def located(self, path: str | None, line: int | None) -> LabelError:
        """The same error placed at ``line`` of the file ``path``."""
        return LabelError(self.message, path=path, line=line, field=self.field, index=self.index)


class LabelConflictError(LabelError):
    """A different label is already stored under a label's key (task, case, candidate, annotator).

    The identical label again is a no-op; a different one is refused naming both (``replace=True``,
    ``labels import --replace``, overwrites). ``stored`` and ``given`` describe the first conflict,
    ``count`` is how many labels of the batch conflict.
    """

    def __init__(
        self,
        message: str,
        *,
        stored: str = "",
        given: str = "",
        count: int = 1,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
        index: int | None = None,
    ) -> None:
        super().__init__(message, path=path, line=line, field=field, index=index)
        self.stored = stored
        self.given = given
        self.count = count

    def located(self, path: str | None, line: int | None) -> LabelConflictError:
        """The same conflict placed at ``line`` of the file ``path``."""
        return LabelConflictError(
            self.message,
            stored=self.stored,
            given=self.given,
            count=self.count,
            path=path,
            line=line,
            field=self.field,
            index=self.index,
        )


class ScorerDataError(LLMConnectError):
    """A scorer's bundled data file (e.g. VRTY's IDF table) is missing, unreadable
    or fails its pinned SHA-256 check. ``path`` names the file."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class CalibrationError(LLMConnectError):
    """A calibration could not be computed (unknown judge, no references)."""


class StabilityError(LLMConnectError):
    """A stability analysis (:mod:`llm_connect.stability`) could not be run or finished."""


class StabilityInputError(StabilityError, ValueError):
    """A stability input (query, system prompt or tools file) is malformed.

    ``path`` names the file (``None`` for an in-memory input) and ``field`` the
    place inside it (``messages[1].content``); the message reads
    ``query.json: messages[1].content: must be ...``.
    """

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None) -> None:
        self.path = path
        self.field = field
        where = ": ".join(part for part in (path, field) if part)
        super().__init__(f"{where}: {message}" if where else message)
        self.reason = mask_secrets(message)


class InvalidJSONInputError(StabilityInputError):
    """The stability input file is not valid JSON (``field`` is ``line L column C``)."""


class ToolDefinitionError(StabilityInputError):
    """The tools are malformed: a tools file (its JSON included) or an input's ``tools``."""


class InsufficientRunsError(StabilityError):
    """Fewer runs of a stability analysis succeeded than its minimum.

    ``succeeded``, ``failed`` and ``minimum`` are counts; ``errors`` holds one
    ``"ErrorClass: message"`` line per failed run.
    """

    def __init__(
        self, message: str, *, succeeded: int, failed: int, minimum: int, errors: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message)
        self.succeeded = succeeded
        self.failed = failed
        self.minimum = minimum
        self.errors = tuple(mask_secrets(e) for e in errors)


class StabilityEmbeddingError(StabilityError):
    """The embedder could not embed a stability analysis's responses (not installed,
    failed, or returned the wrong number of vectors or non-finite values)."""
