"""``scaffold review``: request changes on a task's pull request with the local forge.

As a reviewer on GitHub does: the body and inline comments on lines of the task's diff
(``--comment PATH:LINE:TEXT``) go to the task's builder in its next round.
"""

from __future__ import annotations

import getpass
import re
import uuid
from collections.abc import Sequence
from pathlib import Path

from scaffold.errors import ScaffoldError, UsageError
from scaffold.git.runner import SAFE_LOCAL, run_git
from scaffold.quest.model import Feedback, ReviewComment, TaskRecord, utcnow
from scaffold.runtime import inbox
from scaffold.runtime.session import state_root
from scaffold.sanitize import clean

# States a task takes feedback in: at its pull request (a round starts), or at work
# (the feedback waits for the next round).
TAKES_FEEDBACK = (
    "PR_Created",
    "Merging",
    "Processing",
    "TestValidation",
    "DiagramCheck",
    "Blocked",
)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def _parse_comment(spec: str) -> tuple[str, int, str]:
    path, sep1, rest = spec.partition(":")
    line, sep2, text = rest.partition(":")
    if not (sep1 and sep2 and path and line.isdigit() and int(line) > 0 and text.strip()):
        raise UsageError(f"--comment takes PATH:LINE:TEXT (a line number from 1), got {spec!r}")
    return path, int(line), text.strip()


def diff_hunk(repo: Path, base: str, head: str, path: str, line: int) -> str | None:
    """The hunk of the task's diff (``base...head``) holding new-side ``line`` of ``path``,
    up to that line, as GitHub shows it with a review comment; None when the line is not
    in the diff."""
    out = run_git(
        [*SAFE_LOCAL, "diff", "--no-ext-diff", "--no-color", f"{base}...{head}", "--", path],
        cwd=repo,
        check=False,
    )
    hunk: list[str] = []
    new_line = 0
    for text in out.stdout.splitlines():
        m = _HUNK.match(text)
        if m:
            hunk, new_line = [text], int(m.group(1))
            continue
        if not hunk:
            continue
        hunk.append(text)
        if text.startswith("-"):
            continue
        if new_line == line:
            return "\n".join(hunk)
        new_line += 1
    return None


def read_body(text: str | None, text_file: str | None) -> str:
    """The review's body: ``--request-changes TEXT`` or the file ``--file FILE`` names."""
    if text is not None and text_file is not None:
        raise UsageError("give the review as --request-changes TEXT or --file FILE, not both")
    if text_file is None:
        return text or ""
    try:
        return Path(text_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {text_file}: {exc}") from None


def request_changes(
    repo: Path, quest_id: str, task: TaskRecord, body: str, comments: Sequence[str]
) -> str:
    """Post the review to the inbox for the task's next round; what to tell the person."""
    if not body.strip() and not comments:
        raise UsageError("say what to change: --request-changes TEXT, --file FILE or --comment")
    if task.pr is None or not task.branch:
        raise UsageError(f"{task.id} has no open pull request to review (it is {task.state.value})")
    head = run_git([*SAFE_LOCAL, "rev-parse", f"refs/heads/{task.branch}"], cwd=repo).stdout.strip()
    inline: list[ReviewComment] = []
    for spec in comments:
        path, line, note = _parse_comment(spec)
        hunk = diff_hunk(repo, task.pr.base, head, path, line)
        if hunk is None:
            raise UsageError(f"{path}:{line} is not a line the pull request of {task.id} changes")
        inline.append(
            ReviewComment(
                path=path, line=line, side="RIGHT", diff_hunk=hunk, commit_id=head, body=clean(note)
            )
        )
    item = Feedback(
        key=f"cli:{uuid.uuid4().hex[:12]}",
        kind="review",
        by=_who(),
        at=utcnow(),
        body=clean(body),
        comments=tuple(inline),
    )
    try:
        inbox.post(state_root(repo), inbox.feedback(quest_id, task.id, item))
    except OSError as exc:
        raise ScaffoldError(f"cannot record the review: {exc}") from None
    return (
        f"changes requested on {task.id} ({len(inline)} inline comment(s)); "
        "`scaffold run` sends them to its agent"
    )


def _who() -> str:
    try:
        return getpass.getuser() or "cli"
    except (KeyError, OSError):
        return "cli"
