"""Find the frontmatter of a task file and the exact lines each key occupies.

Scaffold edits Backlog.md files in place: it swaps the few lines it changes
(``status:``, ``updated_date:``) and keeps every other byte, including keys the
tool does not know. That needs the text offsets of each top-level key, which a
YAML loader does not give; this module finds them with a small line scanner.
The YAML itself is parsed with ruamel.yaml (round-trip mode) elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scaffold.errors import BacklogError

BOM = "\ufeff"
_FENCE = re.compile(r"^---[^\S\n]*$", re.M)
_KEY_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]|$)")


@dataclass(frozen=True, slots=True)
class Document:
    """A task file split into its parts; all offsets index ``text``.

    ``text`` is the file with CRLF turned into LF and without a leading BOM;
    ``crlf`` and ``bom`` say how to turn it back into the file's bytes.
    """

    text: str
    crlf: bool
    bom: bool
    yaml_start: int
    yaml_end: int
    body_start: int

    @property
    def yaml(self) -> str:
        return self.text[self.yaml_start : self.yaml_end]

    @property
    def body(self) -> str:
        return self.text[self.body_start :]

    def render(self, text: str) -> str:
        """Turn an edited LF ``text`` back into file content with the original conventions."""
        out = text.replace("\n", "\r\n") if self.crlf else text
        return (BOM if self.bom else "") + out


def split_document(raw: str, path: str) -> Document:
    """Locate the ``---`` fenced frontmatter; refuse a file that has none."""
    bom = raw.startswith(BOM)
    text = raw[1:] if bom else raw
    crlf = "\r\n" in text
    if crlf:
        text = text.replace("\r\n", "\n")
    opening = _FENCE.match(text)
    if opening is None or opening.end() == len(text):
        raise BacklogError(path, "no frontmatter: the file must start with a '---' line")
    yaml_start = opening.end() + 1
    closing = _FENCE.search(text, yaml_start)
    if closing is None:
        raise BacklogError(path, "frontmatter is not closed: no second '---' line")
    body_start = min(closing.end() + 1, len(text))
    return Document(text, crlf, bom, yaml_start, closing.start(), body_start)


def key_spans(yaml_text: str) -> dict[str, tuple[int, int]]:
    """Offsets ``(start, end)`` in ``yaml_text`` of each top-level key's lines.

    A key owns its own line and the indented (or ``- `` list) lines after it;
    trailing blank lines stay outside, so replacing a span keeps them.
    Only the first occurrence of a key is returned.
    """
    spans: dict[str, tuple[int, int]] = {}
    current: str | None = None
    start = 0
    last_content_end = 0
    pos = 0
    for line in yaml_text.splitlines(keepends=True):
        bare = line.rstrip("\n")
        match = _KEY_LINE.match(bare)
        continuation = bare.startswith((" ", "\t", "-")) and not match
        if current is not None and not continuation and bare.strip() != "":
            spans.setdefault(current, (start, last_content_end))
            current = None
        if match:
            current = match.group(1)
            start = pos
            last_content_end = pos + len(line)
        elif current is not None and bare.strip() != "":
            last_content_end = pos + len(line)
        pos += len(line)
    if current is not None:
        spans.setdefault(current, (start, last_content_end))
    return spans
