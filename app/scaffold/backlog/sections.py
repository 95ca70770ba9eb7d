"""Locate the known ``## `` sections in a Backlog.md task body.

Backlog.md writes each section between HTML-comment markers
(``<!-- SECTION:NOTES:BEGIN -->`` ... ``<!-- SECTION:NOTES:END -->``) but also
reads hand-written sections without markers, where a section runs until the
next *known* heading (an unknown ``## Context`` heading stays inside the
section before it, as in the tool). Reader and writer share these offsets so a
write only ever touches the section it changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

# Canonical order, as the tool lays a fully populated task out.
DESCRIPTION = "description"
ACCEPTANCE_CRITERIA = "acceptance_criteria"
DEFINITION_OF_DONE = "definition_of_done"
PLAN = "implementation_plan"
NOTES = "implementation_notes"
COMMENTS = "comments"
FINAL_SUMMARY = "final_summary"
# Each section's heading and marker name.
_SECTIONS = {
    DESCRIPTION: ("Description", "SECTION:DESCRIPTION"),
    ACCEPTANCE_CRITERIA: ("Acceptance Criteria", "AC"),
    DEFINITION_OF_DONE: ("Definition of Done", "DOD"),
    PLAN: ("Implementation Plan", "SECTION:PLAN"),
    NOTES: ("Implementation Notes", "SECTION:NOTES"),
    COMMENTS: ("Comments", "COMMENTS"),
    FINAL_SUMMARY: ("Final Summary", "SECTION:FINAL_SUMMARY"),
}
ORDER = tuple(_SECTIONS)
TITLES = {key: title for key, (title, _) in _SECTIONS.items()}
# Headings that end a section written without markers (the tool's list).
_KNOWN_TITLES = (
    *TITLES.values(),
    "Acceptance Criteria (Optional)",
    "Implementation Plan (Optional)",
    "Implementation Notes (Optional)",
    "Notes",
    "Notes & Comments (Optional)",
)
# Checklist sections put the BEGIN marker right under the heading, the others leave a blank line.
_CHECKLISTS = frozenset({ACCEPTANCE_CRITERIA, DEFINITION_OF_DONE})

_ITEM = re.compile(r"^- \[([ xX])\] (.*)$")
_NUMBERED = re.compile(r"^#(\d+) (.*)$")


@dataclass(frozen=True, slots=True)
class Span:
    """Where one section sits in the body: the whole section and its inner content."""

    key: str
    start: int
    end: int
    content_start: int
    content_end: int
    marked: bool


class ChecklistItem(NamedTuple):
    """One ``- [ ] #1 text`` line of the acceptance criteria or definition of done."""

    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose: ``(index, checked, text)``
    checked: bool
    text: str


def begin_marker(key: str) -> str:
    return f"<!-- {_SECTIONS[key][1]}:BEGIN -->"


def end_marker(key: str) -> str:
    return f"<!-- {_SECTIONS[key][1]}:END -->"


def _marked_regex(key: str) -> re.Pattern[str]:
    return re.compile(
        rf"(?:^|(?<=\n))## {re.escape(TITLES[key])}[ \t]*\n(?:[ \t]*\n)*"
        rf"{re.escape(begin_marker(key))}[ \t]*\n(.*?){re.escape(end_marker(key))}",
        re.S | re.I,
    )


def _legacy_regex(key: str, strict: bool) -> re.Pattern[str]:
    title = TITLES[key]
    others = "|".join(re.escape(t) for t in _KNOWN_TITLES if t.lower() != title.lower())
    stop = r"\n+## " if strict else rf"\n+## (?:{others})(?:\s|$)"
    return re.compile(
        rf"(?:^|(?<=\n))## {re.escape(title)}[ \t]*\n(.*?)(?={stop}|\n*\Z)",
        re.S | re.I,
    )


def find_sections(body: str, *, strict: bool = False) -> dict[str, Span]:
    """The first occurrence of each known section, marked sections taking precedence.

    A section without markers runs to the next known heading, as the tool
    reads it; with ``strict`` it stops at any ``## `` heading, which is how a
    writer bounds the section it rewrites so unknown sections stay outside.
    """
    found: dict[str, Span] = {}
    for key in ORDER:
        match = _marked_regex(key).search(body)
        if match:
            found[key] = Span(key, match.start(), match.end(), match.start(1), match.end(1), True)
    marked = list(found.values())
    for key in ORDER:
        if key in found:
            continue
        for match in _legacy_regex(key, strict).finditer(body):
            if any(s.start <= match.start() < s.end for s in marked):
                continue
            found[key] = Span(key, match.start(), match.end(), match.start(1), match.end(1), False)
            break
    return found


def parse_checklist(content: str | None) -> list[ChecklistItem]:
    """``- [x] #2 text`` lines; items without ``#n`` are numbered by position."""
    items: list[ChecklistItem] = []
    if not content:
        return items
    for line in content.splitlines():
        match = _ITEM.match(line.strip())
        if not match:
            continue
        checked = match.group(1) in "xX"
        text = match.group(2).strip()
        numbered = _NUMBERED.match(text)
        if numbered:
            items.append(ChecklistItem(int(numbered.group(1)), checked, numbered.group(2).strip()))
        else:
            items.append(ChecklistItem(len(items) + 1, checked, text))
    return items


def build_block(key: str, content: str) -> str:
    """A whole marked section as the tool writes it, without a trailing newline."""
    inner = f"{content}\n" if content else ""
    gap = "\n" if key in _CHECKLISTS else "\n\n"
    return f"## {TITLES[key]}{gap}{begin_marker(key)}\n{inner}{end_marker(key)}"


def insert_block(body: str, key: str, block: str) -> str:
    """Insert a new section where the tool would put it, leaving the rest of ``body`` as is.

    It goes after the present section that comes last among those canonically
    before it; failing that, before the first section canonically after it;
    failing that, at the end of the body.
    """
    spans = find_sections(body)
    rank = ORDER.index(key)
    before = [s for s in spans.values() if ORDER.index(s.key) < rank]
    if before:
        anchor = max(before, key=lambda s: ORDER.index(s.key))
        tail = body[anchor.end :]
        return body[: anchor.end] + "\n\n" + block + (tail if tail else "\n")
    after = [s for s in spans.values() if ORDER.index(s.key) > rank]
    if after:
        first = min(after, key=lambda s: s.start)
        return body[: first.start] + block + "\n\n" + body[first.start :]
    if body.strip() == "":
        return "\n" + block + "\n"
    end = len(body.rstrip())
    tail = body[end:]
    return body[:end] + "\n\n" + block + (tail if tail else "\n")
