"""Issue and comment text is data: strip what a person cannot see, redact secrets.

A request or an answer reaches an agent as text. What a reader of the issue does not
see must not reach the agent either: HTML comments, zero-width and bidirectional
control characters, image alt text and link titles (places where instructions hide).
Anything that looks like a credential is masked before it is stored or shown.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

_HTML_COMMENT = re.compile(r"<!--.*?(-->|$)", re.DOTALL)
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")
_LINK_TITLE = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\s+\"[^\"]*\"\)")
_HTML_IMG_ALT = re.compile(r"(<img\b[^>]*?)\s(?:alt|title)\s*=\s*(\"[^\"]*\"|'[^']*')", re.I)
_DETAILS_HIDDEN = re.compile(r"<[^>]+\bhidden\b[^>]*>.*?</[^>]+>", re.I | re.DOTALL)
# Zero-width, bidi controls, word joiner, BOM, and other invisible format characters.
_INVISIBLE = {"Cf"}
_KEEP = {"\n", "\t"}

_SECRET_PATTERNS = (
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{16,}\b"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S),
    re.compile(r"(?i)\b(bearer|token)\s+[A-Za-z0-9._\-]{20,}"),
    re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{10,}\b"),
    re.compile(r"\bx-access-token:[^@\s]+"),
)
MASK = "[redacted]"


def strip_hidden(text: str) -> str:
    """The text as a reader sees it: no comments, no invisible characters, no alt text."""
    out = _HTML_COMMENT.sub("", text)
    out = _DETAILS_HIDDEN.sub("", out)
    out = _IMAGE.sub(lambda m: f"![]({m.group(1)})", out)
    out = _LINK_TITLE.sub(lambda m: f"[{m.group(1)}]({m.group(2)})", out)
    while True:
        cleaned = _HTML_IMG_ALT.sub(r"\1", out)
        if cleaned == out:
            break
        out = cleaned
    return "".join(
        ch for ch in out if ch in _KEEP or unicodedata.category(ch) not in _INVISIBLE
    ).strip()


def redact(text: str, extra_secrets: Sequence[str] = ()) -> str:
    """Mask anything that looks like a credential, and the given secrets."""
    out = text
    for secret in extra_secrets:
        if secret and len(secret) >= 6:
            out = out.replace(secret, MASK)
    for pattern in _SECRET_PATTERNS:
        out = pattern.sub(MASK, out)
    return out


def clean(text: str | None, limit: int = 20_000) -> str:
    """Issue text ready to become part of a request: visible, redacted, bounded."""
    visible = redact(strip_hidden(text or ""))
    if len(visible) > limit:
        visible = visible[:limit] + "\n[truncated]"
    return visible
