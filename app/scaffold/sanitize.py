"""Text from outside is data: strip what a person cannot see, redact secrets.

The one place for both: issue text and answers (the App), a local request and the
prompts built from it, and every log line (``server/logs.py``) go through it.

A request or an answer reaches an agent as text. What a reader of the issue does not
see must not reach the agent either: HTML comments, zero-width and bidirectional
control characters, image alt text and link titles (places where instructions hide).
Anything that looks like a credential is masked before it is stored or shown.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

_HTML_COMMENT = re.compile(r"<!--.*?(-->|$)", re.DOTALL)
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")
_LINK_TITLE = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\s+\"[^\"]*\"\)")
_HTML_IMG_ALT = re.compile(r"(<img\b[^>]*?)\s(?:alt|title)\s*=\s*(\"[^\"]*\"|'[^']*')", re.I)
_DETAILS_HIDDEN = re.compile(r"<[^>]+\bhidden\b[^>]*>.*?</[^>]+>", re.I | re.DOTALL)
# Zero-width, bidi controls, word joiner, BOM, and other invisible format characters.
_INVISIBLE = {"Cf"}
_KEEP = {"\n", "\t"}

MASK = "[redacted]"
# Secrets given by name (a webhook secret...) shorter than this would mask ordinary words.
MIN_SECRET_LEN = 4

_PATTERNS = (
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*\Z)",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bgh[pousr]_[A-Za-z0-9]{16,}",
    r"\bsk-ant-[A-Za-z0-9_\-]{10,}",
    r"\bx-access-token:[^@\s]+",
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    # A credential after "Bearer"/"token": 8+ characters with a digit, or 20+ of any.
    r"(?i:\b(?P<scheme>bearer|token)(?P<sep>\s+|\s*[:=]\s*))"
    r"(?:(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}|[A-Za-z0-9._~+/=-]{20,})",
)


def strip_hidden(text: str) -> str:
    """The text as a reader sees it: no comments, no invisible characters, no alt text."""
    out = _HTML_COMMENT.sub("", text)
    out = _DETAILS_HIDDEN.sub("", out)
    out = _IMAGE.sub(lambda m: f"![]({m.group(1)})", out)
    out = _LINK_TITLE.sub(lambda m: f"[{m.group(1)}]({m.group(2)})", out)
    removed = 1
    while removed:  # one attribute per tag each pass
        out, removed = _HTML_IMG_ALT.subn(r"\1", out)
    return "".join(
        ch for ch in out if ch in _KEEP or unicodedata.category(ch) not in _INVISIBLE
    ).strip()


@lru_cache(maxsize=16)
def _pattern(extra: tuple[str, ...]) -> re.Pattern[str]:
    secrets = sorted((s for s in extra if len(s) >= MIN_SECRET_LEN), key=len, reverse=True)
    parts = [*_PATTERNS, *(re.escape(s) for s in secrets)]
    return re.compile("|".join(parts), re.DOTALL)


def _mask(match: re.Match[str]) -> str:
    scheme = match.group("scheme")
    return f"{scheme}{match.group('sep')}{MASK}" if scheme else MASK


def redact(text: str, extra_secrets: Sequence[str] = ()) -> str:
    """Mask anything that looks like a credential (GitHub and Anthropic tokens, PEM
    private keys, JWTs, ``Bearer``/``token`` values, credentials in git URLs), and the
    given secrets of at least ``MIN_SECRET_LEN`` characters."""
    return _pattern(tuple(extra_secrets)).sub(_mask, text)


def clean(text: str | None, limit: int = 20_000) -> str:
    """Issue text ready to become part of a request: visible, redacted, bounded."""
    visible = redact(strip_hidden(text or ""))
    if len(visible) > limit:
        visible = visible[:limit] + "\n[truncated]"
    return visible
