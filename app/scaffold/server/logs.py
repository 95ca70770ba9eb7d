"""JSON logs, one object per line, with secrets masked in every record.

    configure_json_logging(logging.INFO, extra_secrets=[settings.webhook_secret])
    _log.info("handled", extra={"delivery": d.id, "event": d.event, "ms": 3.2})

prints ``{"ts": "...", "level": "info", "logger": "...", "msg": "handled",
"delivery": "...", "event": "...", "ms": 3.2}``. :func:`redact` masks GitHub tokens
(``ghp_``, ``ghs_``, ``gho_``, ``ghu_``, ``ghr_``, ``github_pat_``), PEM private key
blocks, ``Bearer``/``token`` credentials (8+ characters with a digit, or 20+), JWTs, and the given secrets (those of at
least 4 characters: shorter ones would mask ordinary words).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, TextIO

MASK = "***"
MIN_SECRET_LEN = 4

_PATTERNS = (
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*\Z)",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    # A credential after "Bearer"/"token": 8+ characters with a digit, or 20+ of any.
    r"(?i:\b(?P<scheme>bearer|token)(?P<sep>\s+|\s*[:=]\s*))"
    r"(?:(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}|[A-Za-z0-9._~+/=-]{20,})",
)

# The attributes every LogRecord has; anything else came in through ``extra``.
_RESERVED = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


@lru_cache(maxsize=16)
def _pattern(extra: tuple[str, ...]) -> re.Pattern[str]:
    secrets = sorted((s for s in extra if len(s) >= MIN_SECRET_LEN), key=len, reverse=True)
    parts = [*_PATTERNS, *(re.escape(s) for s in secrets)]
    return re.compile("|".join(parts), re.DOTALL)


def _mask(match: re.Match[str]) -> str:
    scheme = match.group("scheme")
    return f"{scheme}{match.group('sep')}{MASK}" if scheme else MASK


def redact(text: str, extra_secrets: Sequence[str] = ()) -> str:
    """``text`` with anything that looks like a credential replaced by ``***``."""
    return _pattern(tuple(extra_secrets)).sub(_mask, text)


class RedactingFilter(logging.Filter):
    """Masks secrets in a record's message, its string extras and its traceback."""

    def __init__(self, extra_secrets: Sequence[str] = ()) -> None:
        super().__init__()
        self.extra_secrets = tuple(extra_secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self.extra_secrets
        record.msg = redact(record.getMessage(), secrets)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, secrets)
        record.exc_info = None
        for key, value in vars(record).items():
            if key not in _RESERVED and isinstance(value, str):
                setattr(record, key, redact(value, secrets))
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED:
                entry[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_json_logging(
    level: int | str = logging.INFO,
    *,
    extra_secrets: Sequence[str] = (),
    stream: TextIO | None = None,
) -> logging.Handler:
    """Send every log record to ``stream`` (stderr) as redacted JSON lines; returns the handler."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactingFilter(extra_secrets))
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_scaffold_json", False):
            root.removeHandler(old)
    handler._scaffold_json = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    return handler
