"""Personal data in prompts and answers, masked with stable placeholders (``--redact``).

What is masked, in this order (so a card number is not read as a phone number):

* e-mail addresses -> ``[EMAIL_1]``;
* card numbers: 13 to 19 digits, optionally grouped by spaces or dashes, that
  pass the Luhn check -> ``[CARD_1]`` (a digit run that fails it is left alone);
* IP addresses: IPv4 (each part 0..255) and IPv6 (full or ``::``-compressed) -> ``[IP_1]``;
* phone numbers: ``+`` and 8 to 15 digits, or 8 to 15 digits in at least three
  groups separated by spaces, dots, dashes or a bracketed area code
  (``(555) 123-4567``, ``030 1234 5678``); ISO dates (``2024-01-15``) are not phones.

A :class:`Redactor` is made per conversation: the same value gets the same
placeholder everywhere in it (the prompt, earlier turns, the production answer),
numbered in order of first appearance per kind, so a case still reads sensibly
("[EMAIL_1] wrote to [EMAIL_2]; reply to [EMAIL_1]").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from llm_connect._secrets import is_secret_key, mask_secrets

__all__ = ["Redactor", "luhn_ok", "mask_all", "mask_request"]

_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")
_CARD = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
_IPV4 = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w.]|\.\d)"
)
_IPV6 = re.compile(
    r"(?<![\w:])(?:(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,7}:(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,6})?"
    r"|::(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,6})?)(?![\w:])"
)
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d[\d ().-]{6,20}\d"
    r"|\(\d{2,5}\)[ .-]?\d{2,5}(?:[ .-]\d{2,5})+"
    r"|\d{2,5}[ .-]\d{2,5}(?:[ .-]\d{2,5})+)(?![\w])"
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{2}[./-]\d{2}[./-]\d{4}")


def luhn_ok(digits: str) -> bool:
    """Whether ``digits`` (digits only) passes the Luhn check."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


class Redactor:
    """Masks personal data in the texts of one conversation (see the module docstring)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], str] = {}
        self._counts: dict[str, int] = {}
        self.masked: dict[str, int] = {}
        """How many values of each kind were replaced (occurrences)."""

    def _placeholder(self, kind: str, value: str) -> str:
        key = (kind, value)
        found = self._seen.get(key)
        if found is None:
            n = self._counts.get(kind, 0) + 1
            self._counts[kind] = n
            found = self._seen[key] = f"[{kind}_{n}]"
        self.masked[kind] = self.masked.get(kind, 0) + 1
        return found

    def text(self, text: str) -> str:
        """``text`` with every e-mail address, card number, IP address and phone number replaced."""
        if "@" in text:
            text = _EMAIL.sub(lambda m: self._placeholder("EMAIL", m.group(0).lower()), text)
        if not any(c.isdigit() for c in text) and "::" not in text:
            return text
        text = _CARD.sub(self._card, text)
        text = _IPV4.sub(lambda m: self._placeholder("IP", m.group(0)), text)
        if ":" in text:
            text = _IPV6.sub(self._ipv6, text)
        return _PHONE.sub(self._phone, text)

    def _card(self, match: re.Match[str]) -> str:
        digits = re.sub(r"[ -]", "", match.group(0))
        return self._placeholder("CARD", digits) if luhn_ok(digits) else match.group(0)

    def _ipv6(self, match: re.Match[str]) -> str:
        value = match.group(0)
        if value.count(":") < 2 or not any(c.isdigit() or c in "abcdefABCDEF" for c in value):
            return value  # "a::" in prose, a C++ scope
        return self._placeholder("IP", value.lower())

    def _phone(self, match: re.Match[str]) -> str:
        value = match.group(0)
        digits = re.sub(r"\D", "", value)
        if not 8 <= len(digits) <= 15 or _DATE.fullmatch(value.strip()):
            return value
        return self._placeholder("PHONE", ("+" if value.startswith("+") else "") + digits)

    def value(self, value: Any) -> Any:
        """Every string in a JSON-like ``value`` through :meth:`text` (keys kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


_SECRET_KEYS: dict[str, bool] = {}
_SHORT: dict[str, str] = {}
""":func:`mask_secrets` of short strings (roles, models, attribute values) that repeat on every call."""


def _mask(text: str) -> str:
    """:func:`mask_secrets`, remembered for strings of up to 64 characters (at most 4,096 of them)."""
    if len(text) > 64:
        return mask_secrets(text)
    masked = _SHORT.get(text)
    if masked is None:
        if len(_SHORT) >= 4096:
            _SHORT.clear()
        masked = _SHORT[text] = mask_secrets(text)
    return masked


def mask_request(value: Any) -> Any:
    """:func:`llm_connect._secrets.redact_request` (credentials out of metadata), key tests remembered.

    Span attributes repeat the same few dozen keys on every call; asking
    ``is_secret_key`` once per name keeps masking off the import's hot path.
    """
    t = type(value)
    if t is str:
        return _mask(value)
    if t is dict or isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            key = k if type(k) is str else str(k)
            secret = _SECRET_KEYS.get(key)
            if secret is None:
                secret = is_secret_key(key)
                if len(_SECRET_KEYS) < 10_000:  # bounded: keys are names, not data
                    _SECRET_KEYS[key] = secret
            if not secret:
                out[key] = _mask(v) if type(v) is str else mask_request(v)
        return out
    if t is list or isinstance(value, (list, tuple)):
        return [mask_request(v) for v in value]
    return value


def mask_all(value: Any) -> Any:
    """:func:`llm_connect._secrets.mask_value` (every string masked, keys kept), faster on plain JSON."""
    t = type(value)
    if t is str:
        return _mask(value)
    if t is dict or isinstance(value, Mapping):
        return {
            (k if type(k) is str else str(k)): (_mask(v) if type(v) is str else mask_all(v))
            for k, v in value.items()
        }
    if t is list or isinstance(value, (list, tuple)):
        return [mask_all(v) for v in value]
    return value
