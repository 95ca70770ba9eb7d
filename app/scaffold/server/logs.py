"""JSON logs, one object per line (``ts``, ``level``, ``logger``, ``msg`` and the
record's extras), with secrets masked in every record by :func:`scaffold.sanitize.redact`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from scaffold.sanitize import redact

# The attributes every LogRecord has; anything else came in through ``extra``.
_RESERVED = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


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
        if record.exc_text:  # formatted (and redacted) by RedactingFilter
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
