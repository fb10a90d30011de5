"""The one place that knows what a secret looks like.

Two different questions, two different tools:

* **Is this request parameter or header a secret?** :func:`is_secret_key` answers
  by *name* (``api_key``, ``Authorization``, ``Ocp-Apim-Subscription-Key``,
  ``access_token``... but not ``max_tokens`` or ``token_count``).
  :func:`redact_request` drops such entries from model parameters, extra headers,
  extra query parameters and run information before they are stored or logged.
  Names are only a guide for *requests*: a judge's ``details`` are data, and a
  detail called ``token_count`` or ``tokenizer`` is kept (:func:`mask_value`).
* **Does this text hold a credential?** :func:`mask_secrets` answers by *shape*,
  wherever the text comes from (notes, error messages, log lines, details):
  OpenAI ``sk-...`` (``sk-proj-``, ``sk-svcacct-``), Anthropic ``sk-ant-...``,
  Hugging Face ``hf_...``, GitHub ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_...`` and
  ``github_pat_...``, Google ``AIza...``, Slack ``xox[abprs]-...``, AWS access key
  ids (``AKIA...``/``ASIA...``), JSON Web Tokens, ``Bearer <token>``, and
  ``name: value`` / ``name=value`` pairs (quoted or not, JSON included) whose name
  is a secret header or parameter. Each is replaced by :data:`REDACTED`; a
  ``Bearer``'s scheme word, a pair's name, separator and quotes are kept, so
  masked JSON text stays JSON.

Masking is cheap on text without any marker (a handful of substring tests, no
regular expression runs), so it is applied to every stored note, every error
message (:class:`~llm_connect.errors.LLMConnectError` masks its own message) and
every record logged through a logger from :func:`get_logger`.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "REDACTED",
    "SECRET_KEY_MARKERS",
    "SecretMaskingFilter",
    "get_logger",
    "is_secret_key",
    "mask_secrets",
    "mask_value",
    "redact_request",
    "secret_values",
]

REDACTED = "[REDACTED]"
"""What a masked credential is replaced with."""

#: A parameter or header name containing any of these (case-insensitive, ``-`` read
#: as ``_``) names a secret. Token-like names (``access_token``, ``id_token``) and
#: ``...key`` names (``Ocp-Apim-Subscription-Key``) follow narrower rules, see
#: :func:`is_secret_key`.
SECRET_KEY_MARKERS: tuple[str, ...] = (
    "api_key",
    "apikey",
    "authorization",
    "password",
    "passwd",
    "secret",
    "credential",
    "cookie",
)

# Names that are secrets as a whole word.
_SECRET_NAMES = frozenset({"auth", "key", "token", "pwd", "x_auth", "passphrase"})

# A name ending in "key" is a secret when the word before "key" is one of these
# (x_api_key, ocp_apim_subscription_key, secret_key, private_key, access_key...).
# "prompt_cache_key" and "idempotency_key" are not secrets.
_KEY_QUALIFIERS = (
    "api",
    "subscription",
    "secret",
    "private",
    "access",
    "auth",
    "session",
    "signing",
    "master",
)

# A name ending in "token" is a secret (access_token, auth_token, id_token,
# refresh_token, x_auth_token, accesstoken, token) unless the word before it says
# it is a vocabulary or pagination token.
_TOKEN_NOT_SECRET = (
    "eos",
    "bos",
    "pad",
    "unk",
    "sep",
    "cls",
    "mask",
    "stop",
    "start",
    "end",
    "eot",
    "special",
    "page",
    "next",
    "continuation",
    "max",
)


def _normalise(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def is_secret_key(name: str) -> bool:
    """Whether a request parameter or header called ``name`` carries a secret.

    Case-, ``-``/``_``-insensitive. Secrets: ``api_key``/``apikey``/``x-api-key``,
    ``api-key`` (Azure), ``x-goog-api-key``, ``Ocp-Apim-Subscription-Key``,
    ``authorization``, ``proxy-authorization``, ``password``, ``secret``,
    ``client_secret``, ``credential(s)``, ``cookie``, token-like names
    (``token``, ``access_token``, ``auth_token``, ``id_token``, ``refresh_token``)
    and ``key``. Not secrets: ``max_tokens``, ``max_completion_tokens``,
    ``top_logprobs``, ``logit_bias``, ``token_count``, ``tokenizer``,
    ``eos_token``, ``prompt_cache_key``, ``idempotency_key``.

    Only for request parameters and headers: judge details are never filtered by name.
    """
    low = _normalise(name)
    if not low:
        return False
    if low in _SECRET_NAMES:
        return True
    if any(marker in low for marker in SECRET_KEY_MARKERS):
        return True
    if low.endswith("token"):
        head = low[: -len("token")].rstrip("_")
        return not any(head.endswith(word) for word in _TOKEN_NOT_SECRET)
    if low.endswith("key"):
        head = low[: -len("key")].rstrip("_")
        return any(head.endswith(word) for word in _KEY_QUALIFIERS)
    return False


# -- text ---------------------------------------------------------------------

# Credential formats, by shape. Each pattern starts with a literal (the regex engine
# then scans fast; the "not preceded by" checks come after that literal) and runs
# only when its literal occurs in the text (see _mask_formats). Patterns are
# compiled on first use: importing llm_connect stays cheap.
_SOURCES: dict[str, str] = {
    # OpenAI sk-, sk-proj-, sk-svcacct-; Anthropic sk-ant-
    "sk": r"sk-(?<![A-Za-z0-9_-]sk-)[A-Za-z0-9_-]{12,}",
    "hf": r"hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}",  # Hugging Face
    "gh": r"gh(?<![A-Za-z0-9_]gh)[pousr]_[A-Za-z0-9]{30,}",  # GitHub classic tokens
    "gh_pat": r"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{22,}",  # GitHub fine-grained
    "google": r"AIza(?<![A-Za-z0-9_-]AIza)[0-9A-Za-z_-]{35,}",  # Google API keys
    "slack": r"xox(?<![A-Za-z0-9]xox)[abprs]-[A-Za-z0-9-]{10,}",  # Slack
    "aws": r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[0-9A-Z]{16}(?![0-9A-Za-z])",  # AWS access key ids
    "jwt": r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
    # Bearer <token68>, kept as "Bearer [REDACTED]". The token must hold a digit, an
    # upper-case letter or punctuation ("bearer instruments" is prose, not a credential).
    "bearer": r"(?P<scheme>\b(?i:bearer)[ \t]+)(?=[A-Za-z0-9_.~+/=-]*[0-9A-Z_.~+/=-])[A-Za-z0-9_.~+/=-]{8,}",
    # ``name: value`` / ``name=value`` pairs: the END of a name (a secret-ish word
    # directly followed by a separator) and the value; _pair_masked reads the whole
    # name backwards and asks is_secret_key. Run on lower-cased text ("pairs",
    # much faster than IGNORECASE), or with IGNORECASE ("pairs_i") when lower()
    # changed the text's length.
    "pairs": (
        r"(?P<word>key|token|secret|passw(?:or)?d|pwd|passphrase|auth(?:orization)?|credentials?|cookie)"
        r"(?P<sep>(?P<nq>\\?[\"'])?[ \t]*(?P<op>[:=])[ \t]*)"
        r"(?:"
        r"\"(?P<dq>(?:[^\"\\\n]|\\.)+)\""  # "value" (JSON, with escapes)
        r"|'(?P<sq>(?:[^'\\\n]|\\.)+)'"  # 'value' (Python reprs)
        r"|\\\"(?P<eq>(?:[^\"\\\n]|\\[^\"\n])+)\\\""  # \"value\" (JSON inside a JSON string)
        r"|(?P<bare>(?:(?:bearer|basic|token|digest)[ \t]+)?[^\s\"',;&<>(){}\[\]\\]{6,})"
        r")"
    ),
}
_SOURCES["pairs_i"] = "(?i)" + _SOURCES["pairs"]


@functools.cache
def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(_SOURCES[name])


def _mask_formats(text: str) -> str:
    if "sk-" in text:
        text = _pattern("sk").sub(REDACTED, text)
    if "_" in text:
        if "hf_" in text:
            text = _pattern("hf").sub(REDACTED, text)
        if "ghp_" in text or "gho_" in text or "ghu_" in text or "ghs_" in text or "ghr_" in text:
            text = _pattern("gh").sub(REDACTED, text)
        if "github_pat_" in text:
            text = _pattern("gh_pat").sub(REDACTED, text)
    if "AIza" in text:
        text = _pattern("google").sub(REDACTED, text)
    if "xox" in text:
        text = _pattern("slack").sub(REDACTED, text)
    if "AKIA" in text or "ASIA" in text:
        text = _pattern("aws").sub(REDACTED, text)
    if "eyJ" in text:
        text = _pattern("jwt").sub(REDACTED, text)
    return text


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
# Bare words that name a secret only in a clear key/value setting (``token=...``
# in a query string, a quoted ``"token": ...``), never in prose ("the first token: ...").
_PROSE_WORDS = frozenset({"key", "token", "auth"})


def _pair_masked(match: re.Match[str], text: str) -> str | None:
    """The masked form of a pair match (positions index ``text``), ``None`` to keep it."""
    start = match.start()
    while start > 0 and text[start - 1] in _NAME_CHARS:
        start -= 1
    name = text[start : match.end("word")]
    if not is_secret_key(name):
        return None
    quote = match.group("nq")  # the quote closing the name, when the name is quoted
    quoted_name = quote is not None and start > 0 and text[start - 1] == quote[-1]
    if not quoted_name:
        quote = None
    if _normalise(name) in _PROSE_WORDS and match.group("op") == ":" and not quoted_name:
        return None
    head = text[match.start() : match.end("sep")]
    if match.group("dq") is not None:
        return f'{head}"{REDACTED}"'
    if match.group("sq") is not None:
        return f"{head}'{REDACTED}'"
    if match.group("eq") is not None:
        return f'{head}\\"{REDACTED}\\"'
    if quote is not None:  # a JSON key with a number (or other bare value): keep the text JSON
        return f"{head}{quote}{REDACTED}{quote}"
    return head + REDACTED


def _mask_pairs(text: str, low: str) -> str:
    matches = _pattern("pairs").finditer(low) if len(low) == len(text) else _pattern("pairs_i").finditer(text)
    parts: list[str] = []
    last = 0
    for match in matches:
        masked = _pair_masked(match, text)
        if masked is not None:
            parts.append(text[last : match.start()])
            parts.append(masked)
            last = match.end()
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def _mask_bearer(match: re.Match[str]) -> str:
    return match.group("scheme") + REDACTED


def mask_secrets(text: str) -> str:
    """``text`` with every credential-looking value replaced by ``[REDACTED]``.

    See the module docstring for the formats. Each pattern runs only when its
    marker occurs in the text (``sk-``, ``hf_``, ``AIza``, ``bearer``, ``key``,
    ``token``...), so text without any marker costs a few substring tests.
    Idempotent: masking masked text changes nothing.
    """
    low = text.lower()
    # Spelled out: a loop over the markers costs more than the tests themselves.
    if (
        "key" in low
        or "token" in low
        or "secret" in low
        or "pass" in low
        or "pwd" in low
        or "auth" in low
        or "credential" in low
        or "cookie" in low
    ):
        text = _mask_pairs(text, low)
    if (
        "sk-" in text
        or "_" in text
        or "AIza" in text
        or "xox" in text
        or "AKIA" in text
        or "ASIA" in text
        or "eyJ" in text
    ):
        text = _mask_formats(text)
    if "bearer" in low:
        text = _pattern("bearer").sub(_mask_bearer, text)
    return text


# -- values ---------------------------------------------------------------------


def mask_value(value: Any) -> Any:
    """``value`` (JSON-like) with every string in it passed through :func:`mask_secrets`.

    No key is dropped or renamed (judge details: ``token_count`` and ``tokenizer``
    survive); tuples become lists; other scalars are returned as they are.
    """
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {str(k): mask_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_value(v) for v in value]
    return value


def redact_request(value: Any) -> Any:
    """``value`` without secret-named entries, with credential-looking strings masked.

    For request-side data: model parameters, ``extra_headers``, ``extra_query``,
    ``extra_body``, a run's recorded options. Mapping entries whose key
    :func:`is_secret_key` are dropped at every depth; every remaining string is
    passed through :func:`mask_secrets`. Tuples become lists.
    """
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {str(k): redact_request(v) for k, v in value.items() if not is_secret_key(str(k))}
    if isinstance(value, (list, tuple)):
        return [redact_request(v) for v in value]
    return value


_SCHEME = re.compile(r"(?i)^(?:bearer|basic|token|digest)[ \t]+")


def secret_values(value: Any) -> list[str]:
    """The string values under secret-named keys anywhere in ``value`` (request-side data).

    An ``Authorization: Bearer X`` value gives both the whole value and ``X``, so
    an error message that echoes only the token still has it replaced. Used to
    tell the SDK error boundary what to replace.
    """
    found: list[str] = []

    def walk(node: Any, secret: bool) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, secret or is_secret_key(str(k)))
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v, secret)
        elif secret and isinstance(node, (str, bytes, int)) and not isinstance(node, bool):
            text = node.decode("utf-8", "replace") if isinstance(node, bytes) else str(node)
            text = text.strip()
            if text:
                found.append(text)
                bare = _SCHEME.sub("", text)
                if bare != text and bare:
                    found.append(bare)

    walk(value, False)
    return found


# -- logging -----------------------------------------------------------------------


class SecretMaskingFilter(logging.Filter):
    """A logging filter that masks credentials in a record's message and traceback.

    It never drops a record. The formatted message (``msg % args``) is masked and,
    when it changed, stored back as ``msg`` with no ``args``; an exception's
    traceback is formatted and masked into ``exc_text`` (what formatters print).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask ``record`` in place; always ``True``."""
        try:
            message = record.getMessage()
        except Exception:  # a bad format string is logging's problem, not ours
            return True
        masked = mask_secrets(message)
        if masked != message:
            record.msg = masked
            record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = mask_secrets(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = mask_secrets(record.exc_text)
        if record.stack_info:
            record.stack_info = mask_secrets(record.stack_info)
        return True


_FILTER = SecretMaskingFilter()


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with the secret-masking filter attached (once).

    A filter attached to a logger only sees records logged through that very
    logger (not its children's), so every llm-connect module takes its logger
    from here; the package's own ``llm_connect`` logger gets the filter when this
    module is imported (it is, by :mod:`llm_connect.errors`).
    """
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


def _install(names: Iterable[str]) -> None:
    for name in names:
        get_logger(name)


# The package logger, and any llm_connect.* logger created before this import.
_install(
    ["llm_connect"]
    + [
        n
        for n, lg in list(logging.Logger.manager.loggerDict.items())
        if n.startswith("llm_connect.") and isinstance(lg, logging.Logger)
    ]
)
