"""``scaffold quest show <id>``: a quest's story, from the state branch (and the local
journal when this machine ran it more recently than the branch says)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from scaffold.errors import ScaffoldError, UsageError
from scaffold.quest.model import HistoryEntry, Quest, TaskRecord
from scaffold.runtime.session import quest_store, state_branch
from scaffold.state.branch import StateBranch
from scaffold.state.document import HistoryDigest

SHOWN_ENTRIES = 60


def _entry_line(e: HistoryEntry) -> str:
    when = e.at.strftime("%Y-%m-%d %H:%M:%S")
    what = e.event
    if e.source or e.target:
        what = f"{e.source or '-'} -> {e.target or '-'} ({e.event})"
    who = e.task_id or ("quest" if e.kind == "quest" else "-")
    return f"  {when}  {who:<9} {what}"


def _load(repo: Path, quest_id: str) -> tuple[Quest, HistoryDigest, StateBranch]:
    branch = state_branch(repo)
    doc = branch.read_quest(quest_id)
    store = quest_store(repo)
    local: Quest | None = None
    if store.exists(quest_id):
        with contextlib.suppress(ScaffoldError):
            local = store.read(quest_id)
    digest = HistoryDigest(doc.history if doc is not None else None)
    if local is not None and (doc is None or local.seq >= doc.seq):
        digest.add(store.history(quest_id, since_seq=digest.last_seq))
        return local, digest, branch
    if doc is None:
        raise UsageError(
            f"no quest {quest_id!r} here or on {branch.branch} "
            f"(fetch it first: git fetch origin {branch.branch})"
        )
    return doc.quest, digest, branch


def _people_lines(quest: Quest) -> list[str]:
    lines = [f"quest {quest.id}: {quest.phase.value}, ${quest.cost_usd:.2f}"]
    if quest.source.kind == "github" and quest.source.repo:
        lines[0] += f", {quest.source.repo}#{quest.source.issue_number}"
    lines.append(f"started {quest.started_at.isoformat(timespec='seconds')}")
    if quest.stop_reason:
        lines.append(f"stopped: {quest.stop_reason}")
    if quest.request:
        lines += ["", "request:", *(f"  {line}" for line in quest.request.splitlines())]
    if quest.requirements.contexts:
        lines += ["", f"requirements ({'locked' if quest.requirements.locked else 'draft'}):"]
        lines += [f"  {c.id}: {c.description}" for c in quest.requirements.contexts]
    if quest.questions:
        lines += ["", "questions:"]
        for q in quest.questions.values():
            lines.append(f"  {q.id} ({q.task_id or 'planning'}, {q.role.value}): {q.question}")
            if q.answer is not None:
                lines.append(f"    answered by {q.answered_by or 'a person'}: {q.answer}")
            else:
                lines.append("    not answered yet")
    if quest.tasks:
        lines += ["", "tasks:"]
        for t in quest.tasks.values():
            state = t.outcome or t.state.value
            pr = f"  PR #{t.pr.number}" if t.pr and t.pr.number else ""
            lines.append(f"  {t.id:<9} {state:<14} {t.title}{pr}")
            lines += _round_lines(t)
    return lines


def _round_lines(task: TaskRecord) -> list[str]:
    """The task's review rounds: who asked, when, which comments, and the fix's commit."""
    lines: list[str] = []
    for r in task.rounds:
        who = ", ".join(
            f"@{f.by}" if f.kind != "ci" else f"check {f.check.name if f.check else '?'}"
            for f in r.feedback
        )
        when = r.started_at.isoformat(timespec="seconds") if r.started_at else "?"
        fixed = f"fixed in {r.commit[:12]}" if r.commit else "running"
        lines.append(f"    round {r.number} ({r.kind}) from {who} at {when}: {fixed}")
        for f in r.feedback:
            if f.body:
                lines.append(f"      {f.key}: {f.body.splitlines()[0][:100]}")
            for c in f.comments:
                at = f"{c.path}:{c.line}" if c.line else c.path
                lines.append(f"      {at}: {c.body.splitlines()[0][:100] if c.body else ''}")
    if task.feedback:
        lines.append(f"    waiting for the next round: {', '.join(f.key for f in task.feedback)}")
    return lines


def quest_timeline(repo: Path, quest_id: str) -> str:
    quest, digest, branch = _load(repo, quest_id)
    lines = _people_lines(quest)
    history = digest.state()
    recent = list(history.recent)[-SHOWN_ENTRIES:]
    hidden = history.older.entries + len(history.recent) - len(recent)
    lines += ["", "history:"]
    if hidden:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(history.older.events.items()))
        lines.append(f"  ({hidden} earlier entries{': ' + counts if counts else ''})")
    lines += [_entry_line(e) for e in recent]
    commits = branch.log(quest_id, limit=30)
    if commits:
        lines += ["", f"state commits on {branch.branch} (newest first):"]
        lines += [f"  {date}  {sha[:10]}  {subject}" for sha, date, subject in commits]
    return "\n".join(lines)
