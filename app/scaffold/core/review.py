"""The review loop, pure: what a round of work on an open pull request is made of.

A reviewer who requests changes (with inline comments), a writer's ``/scaffold fix``, or a
merge-blocking check that failed on the head is *feedback*. Feedback that arrives while the
task is at work waits in the task's record; when the task is back at its pull request the
waiting feedback becomes one *round*: the builder (or, for a failed check alone,
Spiritmender) resumes its session with the feedback as data, and the fix goes through the
same checks as the first round before it is pushed to the same pull request.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scaffold.quest.model import Feedback, ReviewComment, ReviewRound, TaskRecord

# Who feedback scaffold raises itself is by (a branch that needs a merge).
SCAFFOLD = "(scaffold)"  # never a login
# The keys of taken feedback a task remembers (the oldest are forgotten first).
SEEN_KEEP = 200
# Rounds a task's record keeps (older ones are still in the journal and the state branch log).
ROUNDS_KEEP = 12


def fresh(task: TaskRecord, items: Iterable[Feedback]) -> tuple[Feedback, ...]:
    """``items`` minus what the task took already or is keeping for its next round."""
    known = set(task.seen_feedback) | {f.key for f in task.feedback}
    out: list[Feedback] = []
    for item in items:
        if item.key not in known:
            known.add(item.key)
            out.append(item)
    return tuple(out)


def waiting(task: TaskRecord, items: Iterable[Feedback]) -> tuple[Feedback, ...]:
    """The task's waiting feedback with ``items`` added (each once)."""
    return (*task.feedback, *fresh(task, items))


def round_kind(items: Sequence[Feedback]) -> str:
    """A round is a reviewer's when any of its feedback is; else it fixes CI."""
    return "review" if any(f.kind != "ci" for f in items) else "ci"


def remember(task: TaskRecord, items: Sequence[Feedback]) -> tuple[str, ...]:
    keys = [*task.seen_feedback, *(f.key for f in items if f.key not in task.seen_feedback)]
    return tuple(keys[-SEEN_KEEP:])


def current_round(task: TaskRecord) -> ReviewRound | None:
    """The newest round while it is not answered yet."""
    if task.rounds and task.rounds[-1].answered_at is None:
        return task.rounds[-1]
    return None


def reviewers(items: Iterable[Feedback]) -> tuple[str, ...]:
    """Who asked for the round's changes (people, in order; never CI)."""
    out: list[str] = []
    for item in items:
        if item.kind != "ci" and item.by != SCAFFOLD and item.by not in out:
            out.append(item.by)
    return tuple(out)


def _comment_text(c: ReviewComment) -> str:
    where = c.path
    if c.line is not None:
        span = f"{c.start_line}-{c.line}" if c.start_line and c.start_line != c.line else c.line
        where += f", line {span}"
        if c.side:
            where += f" ({'new' if c.side == 'RIGHT' else 'old'} side)"
    head = f"- comment {c.id}" if c.id is not None else "- comment"
    lines = [f"{head} on {where}" + (f", made on commit {c.commit_id}" if c.commit_id else "")]
    if c.diff_hunk:
        lines.append("  the diff it points at:")
        lines += [f"    {line}" for line in c.diff_hunk.splitlines()]
    lines.append("  says:")
    lines += [f"    {line}" for line in (c.body or "(empty)").splitlines()]
    return "\n".join(lines)


def _check_text(f: Feedback) -> str:
    c = f.check
    assert c is not None
    lines = [f"The check `{c.name}` concluded {c.conclusion} on commit {c.head_sha}."]
    if c.url:
        lines.append(f"Details: {c.url}")
    for label, text in (("Title", c.title), ("Summary", c.summary), ("Text", c.text)):
        if text:
            lines.append(f"{label}:\n{text}")
    if c.annotations:
        lines.append("Annotations:\n" + "\n".join(f"- {a}" for a in c.annotations))
    if c.log_tail:
        lines.append("The end of the job's log:\n" + c.log_tail)
    return "\n".join(lines)


def describe(items: Sequence[Feedback]) -> str:
    """The round's feedback as the agent reads it (the prompt fences it as data)."""
    parts: list[str] = []
    for f in items:
        if f.kind == "ci":
            parts.append(_check_text(f))
            continue
        what = "asks for changes" if f.kind == "review" else "asks scaffold to fix"
        head = f"@{f.by} {what}" + (f" ({f.url})" if f.url else "") + ":"
        block = [head, f.body or "(no text beside the inline comments)"]
        if f.comments:
            block.append("Inline comments:")
            block += [_comment_text(c) for c in f.comments]
        parts.append("\n".join(block))
    return "\n\n".join(parts)


def headline(task: TaskRecord, max_rounds: int, max_ci_fixes: int) -> str | None:
    """One line for a person: the task's round, e.g. ``changes requested by @ann, round 2
    of 5`` or ``fixing CI `test (3.12)`, 1 of 2``; None before any round."""
    if not task.rounds:
        return None
    last = task.rounds[-1]
    running = last.answered_at is None
    if last.kind == "ci":
        names = ", ".join(f"`{f.check.name}`" for f in last.feedback if f.check is not None)
        verb = "fixing CI" if running else "fixed CI"
        return f"{verb} {names}, {task.ci_fixes} of {max_ci_fixes}"
    who = ", ".join(f"@{r}" for r in reviewers(last.feedback))
    text = f"changes requested by {who}, round {task.review_rounds} of {max_rounds}"
    if not running and last.commit:
        text += f", fixed in {last.commit[:12]}"
    if task.feedback:
        text += f"; {len(task.feedback)} more waiting"
    return text
