"""``scaffold review``: request changes on a task's pull request with the local forge.

The same round a reviewer on GitHub starts: the body, and inline comments on lines of
the task's diff (``--comment PATH:LINE:TEXT``, with the diff hunk each points at), go to
the task's builder, whose fix is checked as the first round was and committed to the
same branch. Feedback given while a round runs waits for the next one.
"""

from __future__ import annotations

import getpass
import re
import uuid
from pathlib import Path

import click

from scaffold.errors import ScaffoldError, UnknownTask, UsageError
from scaffold.git.runner import SAFE_LOCAL, run_git
from scaffold.ids import normalize_task_id
from scaffold.quest.model import Feedback, ReviewComment, utcnow
from scaffold.runtime import inbox
from scaffold.runtime.session import find_repo, read_all_quests, state_root
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


@click.command()
@click.option(
    "--repo",
    "repo_path",
    type=click.Path(file_okay=False),
    default=None,
    help="The git repository (default: the one around the current directory).",
)
@click.argument("task_id")
@click.option("--request-changes", "text", default=None, help="What to change (the review body).")
@click.option(
    "--file",
    "text_file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Read the review body from this file.",
)
@click.option(
    "--comment",
    "comments",
    multiple=True,
    metavar="PATH:LINE:TEXT",
    help="An inline comment on a line of the task's diff (repeatable).",
)
def review(
    repo_path: str | None,
    task_id: str,
    text: str | None,
    text_file: str | None,
    comments: tuple[str, ...],
) -> None:
    """Request changes on a task's pull request: its agent resumes with them."""
    repo = find_repo(Path(repo_path) if repo_path else Path.cwd())
    if text is not None and text_file is not None:
        raise UsageError("give the review as --request-changes TEXT or --file FILE, not both")
    body = text if text is not None else ""
    if text_file is not None:
        try:
            body = Path(text_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {text_file}: {exc}") from None
    if not body.strip() and not comments:
        raise UsageError("say what to change: --request-changes TEXT, --file FILE or --comment")
    tid = normalize_task_id(task_id)
    quest = next((q for q in read_all_quests(repo) if tid in q.tasks), None)
    if quest is None:
        raise UnknownTask(tid)
    task = quest.tasks[tid]
    if task.outcome == "merged":
        raise UsageError(f"{tid} is Done (its pull request was merged); nothing to review")
    if task.state.value not in TAKES_FEEDBACK or task.pr is None or not task.branch:
        raise UsageError(f"{tid} has no open pull request to review (it is {task.state.value})")
    head = run_git([*SAFE_LOCAL, "rev-parse", f"refs/heads/{task.branch}"], cwd=repo).stdout.strip()
    inline: list[ReviewComment] = []
    for spec in comments:
        path, line, note = _parse_comment(spec)
        hunk = diff_hunk(repo, task.pr.base, head, path, line)
        if hunk is None:
            raise UsageError(f"{path}:{line} is not a line the pull request of {tid} changes")
        inline.append(
            ReviewComment(
                path=path, line=line, side="RIGHT", diff_hunk=hunk, commit_id=head, body=clean(note)
            )
        )
    by = _who()
    item = Feedback(
        key=f"cli:{uuid.uuid4().hex[:12]}",
        kind="review",
        by=by,
        at=utcnow(),
        body=clean(body),
        comments=tuple(inline),
    )
    try:
        inbox.post(state_root(repo), inbox.feedback(quest.id, tid, item))
    except OSError as exc:
        raise ScaffoldError(f"cannot record the review: {exc}") from None
    click.echo(
        f"changes requested on {tid} ({len(inline)} inline comment(s)); "
        "`scaffold run` sends them to its agent"
    )


def _who() -> str:
    try:
        return getpass.getuser() or "cli"
    except (KeyError, OSError):
        return "cli"
