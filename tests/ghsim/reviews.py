"""Inline review comments: where one sits on a pull request's diff, worked out from the real
``git diff`` of the pull request as GitHub does (``line``/``side``, ``position``, ``diff_hunk``),
and where it sits after later pushes (or that it is outdated)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .gitrepo import BareRepo
from .state import ReviewComment

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")

# GitHub's own words for a comment it cannot place (its create-review answers them as
# they are; its create-review-comment as the messages of validation errors).
LINE_NOT_IN_DIFF = "Pull request review thread line must be part of the diff"
HUNK_BLANK = "Pull request review thread diff hunk can't be blank"
START_NOT_IN_HUNK = (
    "Pull request review thread start line must be part of the same hunk as the line."
)
START_AFTER_END = "Pull request review thread start line must precede the end line."
SIDES = ("LEFT", "RIGHT")


class AnchorError(ValueError):
    """A comment that cannot be placed on the diff: GitHub's reasons, in its words."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__(" and ".join(reasons))
        self.reasons = reasons


@dataclass(frozen=True)
class Row:
    """One line of a file's diff: ``position`` counts from the line below the first hunk
    header (later headers count too, as GitHub's ``position`` does)."""

    text: str
    position: int
    hunk: int  # the index of this row's hunk header
    old: int | None  # its number in the old file (context or deletion)
    new: int | None  # its number in the new file (context or addition)

    def on(self, side: str) -> int | None:
        if side == "RIGHT":
            return self.new if self.text[:1] in ("+", " ") else None
        return self.old if self.text[:1] in ("-", " ") else None


def file_diff(git: BareRepo, base: str, head: str, path: str) -> list[Row]:
    """The rows of ``git diff base...head -- path`` (from their merge base, as a pull
    request's "Files changed" shows it); empty when the file is not in the diff."""
    start = git.merge_base(base, head) or base
    text = git.run(
        "diff", "--no-renames", "--no-color", "--no-ext-diff", "-U3", start, head, "--", path
    ).stdout.decode(errors="replace")
    rows: list[Row] = []
    position = old = new = hunk = 0
    started = False
    for raw in text.split("\n"):
        found = _HUNK.match(raw)
        if found:
            if started:
                position += 1
            started = True
            old, new = int(found[1]), int(found[3])
            hunk = len(rows)
            rows.append(Row(raw, position, hunk, None, None))
            continue
        if not started or not raw:
            continue
        position += 1
        kind = raw[0]
        if kind == "+":
            rows.append(Row(raw, position, hunk, None, new))
            new += 1
        elif kind == "-":
            rows.append(Row(raw, position, hunk, old, None))
            old += 1
        elif kind == " ":
            rows.append(Row(raw, position, hunk, old, new))
            old += 1
            new += 1
        else:  # "\ No newline at end of file": a line of the diff, of neither file
            rows.append(Row(raw, position, hunk, None, None))
    return rows


def _find(rows: list[Row], line: int, side: str) -> int | None:
    for index, row in enumerate(rows):
        if row.on(side) == line:
            return index
    return None


@dataclass(frozen=True)
class Anchor:
    line: int
    side: str
    start_line: int | None
    start_side: str | None
    position: int
    diff_hunk: str


def anchor(
    rows: list[Row],
    *,
    line: int | None,
    side: str = "RIGHT",
    start_line: int | None = None,
    start_side: str | None = None,
    position: int | None = None,
) -> Anchor:
    """Where a new comment goes: the diff hunk up to and including its line (GitHub's
    ``diff_hunk``), or AnchorError with GitHub's reasons."""
    if line is None and position is not None:  # the deprecated way: a row of the diff
        row = next((r for r in rows if r.position == position and r.text[:1] != "@"), None)
        if row is None:
            raise AnchorError([LINE_NOT_IN_DIFF, HUNK_BLANK])
        side = "RIGHT" if row.new is not None else "LEFT"
        line = row.new if row.new is not None else row.old
    if line is None:
        raise AnchorError([LINE_NOT_IN_DIFF, HUNK_BLANK])
    index = _find(rows, line, side)
    if index is None:
        raise AnchorError([LINE_NOT_IN_DIFF, HUNK_BLANK])
    row = rows[index]
    if start_line is not None:
        start_side = start_side if start_side in SIDES else side
        first = _find(rows, start_line, start_side)
        if first is None or rows[first].hunk != row.hunk:
            raise AnchorError([START_NOT_IN_HUNK])
        if first >= index:
            raise AnchorError([START_AFTER_END])
    else:
        start_side = None
    hunk = "\n".join(r.text for r in rows[row.hunk : index + 1])
    return Anchor(line, side, start_line, start_side, row.position, hunk)


def _map_line(git: BareRepo, old: str, new: str, path: str, line: int) -> int | None:
    """``line`` of ``path`` at ``old`` as the same line at ``new``; None when it changed."""
    if old == new:
        return line
    text = git.run(
        "diff", "--no-renames", "--no-color", "--no-ext-diff", "-U0", old, new, "--", path
    ).stdout.decode(errors="replace")
    offset = 0
    for raw in text.split("\n"):
        found = _HUNK.match(raw)
        if not found:
            continue
        start = int(found[1])
        count = 1 if found[2] is None else int(found[2])
        added = 1 if found[4] is None else int(found[4])
        if count == 0:  # lines inserted after ``start``
            if line > start:
                offset += added
                continue
            break
        if line < start:
            break
        if line < start + count:
            return None  # the line itself was changed or removed
        offset += added - count
    return line + offset


@dataclass(frozen=True)
class Place:
    """Where a comment is on the pull request as it is now (None: outdated)."""

    commit_id: str
    line: int | None
    start_line: int | None
    position: int | None


def current_place(git: BareRepo, base: str, head: str, comment: ReviewComment) -> Place:
    """GitHub moves a comment along with later pushes while its lines stay as they were
    (``commit_id`` becomes the new head, ``line``/``position`` follow); once they change,
    the comment is outdated (``line`` and ``position`` null, ``commit_id`` left as it was)."""
    original = comment.original_commit_id
    outdated = Place(original, None, None, None)
    if head == original:
        return Place(
            original, comment.original_line, comment.original_start_line, comment.original_position
        )
    if not git.object_exists(head) or not git.object_exists(original):
        return outdated
    if comment.side == "RIGHT":
        line = _map_line(git, original, head, comment.path, comment.original_line)
    else:  # a line of the old side: it moves with the merge base
        was = git.merge_base(base, original) or base
        now = git.merge_base(base, head) or base
        line = _map_line(git, was, now, comment.path, comment.original_line)
    start: int | None = None
    if comment.original_start_line is not None:
        start_side = comment.start_side or comment.side
        if start_side == "RIGHT":
            start = _map_line(git, original, head, comment.path, comment.original_start_line)
        else:
            was = git.merge_base(base, original) or base
            now = git.merge_base(base, head) or base
            start = _map_line(git, was, now, comment.path, comment.original_start_line)
        if start is None:
            return outdated
    if line is None:
        return outdated
    rows = file_diff(git, base, head, comment.path)
    index = _find(rows, line, comment.side)
    if index is None:
        return outdated
    return Place(head, line, start, rows[index].position)


def thread_top(comments: dict[int, ReviewComment], comment_id: int) -> ReviewComment:
    """The comment a thread starts with (a reply to a reply belongs to the same thread)."""
    comment = comments[comment_id]
    while comment.in_reply_to_id is not None and comment.in_reply_to_id in comments:
        comment = comments[comment.in_reply_to_id]
    return comment


def comment_spec(item: Any) -> dict[str, Any]:
    """A review comment asked for by a test or a create-review call, checked for shape."""
    if not isinstance(item, dict) or not isinstance(item.get("path"), str):
        raise AnchorError(["path is missing"])
    if not isinstance(item.get("body"), str):
        raise AnchorError(["body is missing"])
    for key in ("line", "start_line", "position"):
        value = item.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise AnchorError([f"{key} is not a number"])
    for key in ("side", "start_side"):
        value = item.get(key)
        if value is not None and value not in (*SIDES, "side"):
            raise AnchorError([f"{key} is not LEFT or RIGHT"])
    return dict(item)
