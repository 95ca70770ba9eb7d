"""What the App writes on GitHub (the status comment, questions, the PR body) and how it
reads what people write back (``/scaffold`` commands, answers to questions). Pure.
Hidden markers (``<!-- scaffold:... -->``) let the App find its own comments again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from scaffold.core import review
from scaffold.core.quest_flow import shown_phase
from scaffold.core.states import IN_FLIGHT, Lifecycle
from scaffold.ids import normalize_task_id
from scaffold.quest.model import Quest, Question, TaskRecord

# The check run DiagramCheck reports as (the name a branch protection rule requires).
CHECK_NAME = "scaffold/diagram-check"
STATUS_MARKER = "<!-- scaffold:status {quest} -->"
QUESTION_MARKER = "<!-- scaffold:question {qid} -->"
NOTICE_MARKER = "<!-- scaffold:notice -->"
COMMENT_REACTIONS = "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions"

_STATE_ICON = {
    Lifecycle.IDLE: "⏸️",
    Lifecycle.READY: "🟡",
    Lifecycle.ALLOCATING: "🔧",
    Lifecycle.PROCESSING: "⚙️",
    Lifecycle.TEST_VALIDATION: "🧪",
    Lifecycle.DIAGRAM_CHECK: "🗺️",
    Lifecycle.BLOCKED: "⛔",
    Lifecycle.PR_CREATED: "👀",
    Lifecycle.MERGING: "🔀",
    Lifecycle.CLEANUP: "🧹",
}


def _elapsed(task: TaskRecord, now: datetime) -> str:
    if task.started_at is None:
        return "-"
    end = task.finished_at if task.state is Lifecycle.IDLE and task.finished_at else now
    seconds = max(0, int((end - task.started_at).total_seconds()))
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _task_state(task: TaskRecord) -> str:
    if task.outcome == "merged":
        return "✅ merged"
    if task.outcome == "rejected":
        return "❌ PR closed, back in To Do"
    if task.outcome == "aborted":
        return "⏹️ stopped"
    if task.question_id:
        return f"❓ waiting for an answer ({task.question_id})"
    return f"{_STATE_ICON.get(task.state, '')} {task.state.value}".strip()


def _node(task_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", task_id)


def task_graph(quest: Quest) -> str:
    """The task DAG as a Mermaid flowchart, merged tasks styled as done."""
    lines = ["flowchart LR"]
    for task in quest.tasks.values():
        label = f"{task.id}: {task.title}".replace('"', "'")[:60]
        lines.append(f'  {_node(task.id)}["{label}"]')
    for task in quest.tasks.values():
        for dep in task.dependencies:
            if dep in quest.tasks:
                lines.append(f"  {_node(dep)} --> {_node(task.id)}")
    done = [_node(t.id) for t in quest.tasks.values() if t.outcome == "merged"]
    busy = [_node(t.id) for t in quest.tasks.values() if t.state in IN_FLIGHT]
    if done:
        lines.append("  classDef done fill:#d4f8d4,stroke:#2da44e")
        lines.append(f"  class {','.join(done)} done")
    if busy:
        lines.append("  classDef busy fill:#fff5b1,stroke:#bf8700")
        lines.append(f"  class {','.join(busy)} busy")
    return "\n".join(lines)


def slot_numbers(quest: Quest) -> dict[str, int]:
    """Slot 1..N of the tasks holding a slot now, in the order they started."""
    busy = [t for t in quest.tasks.values() if t.state in IN_FLIGHT and not t.question_id]
    busy.sort(key=lambda t: (t.started_at is None, t.started_at, t.id))
    return {t.id: i for i, t in enumerate(busy, 1)}


def render_status(
    quest: Quest,
    *,
    now: datetime,
    max_cost_usd: float,
    max_hours: float,
    slots: int,
    slot_of: dict[str, int] | None = None,
    max_rounds: int = 5,
    max_ci_fixes: int = 2,
) -> str:
    """The quest's one status comment."""
    slot_of = slot_of or {}
    phase = shown_phase(quest)
    head = f"### 🏗️ scaffold · {quest.id} · {phase}"
    lines = [STATUS_MARKER.format(quest=quest.id), head, ""]
    if quest.stop_reason:
        lines += [f"> ⏹️ Stopped: {quest.stop_reason}", ""]
    if quest.phase.value in ("requirements", "planning"):
        role = quest.planning.role.display if quest.planning.role else "-"
        qid = quest.planning.question_id
        waiting = f", waiting for an answer ({qid})" if qid else ""
        lines += [f"Planning: {role}{waiting}.", ""]
    if quest.tasks:
        lines += [
            "| task | state | role | slot | elapsed | cost | PR |",
            "|---|---|---|---|---|---|---|",
        ]
        for task in quest.tasks.values():
            role = task.role.display if task.role else "-"
            slot = str(slot_of[task.id]) if task.id in slot_of else "-"
            pr = f"#{task.pr.number}" if task.pr and task.pr.number else "-"
            title = task.title.replace("|", "\\|")[:60]
            lines.append(
                f"| {task.id} {title} | {_task_state(task)} | {role} | {slot} | "
                f"{_elapsed(task, now)} | ${task.cost_usd:.2f} | {pr} |"
            )
        rounds = [
            f"- {task.id}: {line}"
            for task in quest.tasks.values()
            if task.outcome is None and (line := review.headline(task, max_rounds, max_ci_fixes))
        ]
        if rounds:
            lines += ["", "Review:", *rounds]
        lines += ["", "```mermaid", task_graph(quest), "```", ""]
    hours = (now - quest.started_at).total_seconds() / 3600
    cost_left = max(0.0, max_cost_usd - quest.cost_usd)
    busy = len(slot_numbers(quest))
    lines.append(
        f"Budget: ${quest.cost_usd:.2f} spent, ${cost_left:.2f} left of ${max_cost_usd:.2f}; "
        f"{hours:.1f} h of {max_hours:g} h; slots busy {busy}/{slots}."
    )
    if quest.cost_by_backend:
        lines.append(f"Spent by agent: {_dollars(quest.cost_by_backend)}.")
    if quest.cost_by_role:
        lines.append(f"Spent by role: {_dollars(quest.cost_by_role)}.")
    pending = quest.pending_questions()
    if pending:
        ids = ", ".join(f"`{q.id}`" for q in pending)
        lines.append(f"Waiting for answers: {ids}.")
    lines += [
        "",
        "<sub>Commands: `/scaffold status`, `/scaffold abort`, "
        "`/scaffold retry <task>`; on a task's pull request also `/scaffold fix <what>`. "
        "Removing the label stops the quest.</sub>",
    ]
    return "\n".join(lines)


def render_question(question: Question, *, several_open: bool) -> str:
    where = question.task_id or "planning"
    how = (
        f"Reply with `/answer {question.id} <your answer>` (several questions are open)."
        if several_open
        else f"Reply to this comment with your answer (or `/answer {question.id} ...`)."
    )
    context = (
        f"\n\n<details><summary>Context</summary>\n\n{question.context}\n\n</details>"
        if (question.context)
        else ""
    )
    return (
        f"{QUESTION_MARKER.format(qid=question.id)}\n"
        f"**❓ Question `{question.id}`** from {question.role.display} ({where}):\n\n"
        f"> {question.question.strip().replace(chr(10), chr(10) + '> ')}{context}\n\n"
        f"{how} Only people with write access can answer."
    )


def render_pr_body(
    quest: Quest,
    task: TaskRecord,
    *,
    issue_number: int | None,
    description: str,
    diagram_paths: Sequence[str],
) -> str:
    lines = [f"## {task.id}: {task.title}", ""]
    if task.last_summary:
        lines += [task.last_summary.strip(), ""]
    if description:
        lines += ["### Task", "", description.strip(), ""]
    if quest.requirements.contexts:
        lines += ["### Requirements it works towards", ""]
        for ctx in quest.requirements.contexts:
            lines.append(f"- **{ctx.id}**: {ctx.description}")
            lines += [f"  - {o.id}: {o.description}" for o in ctx.observables]
        lines.append("")
    lines += ["### Diagrams", ""]
    lines += [f"- [x] `{path}` checked by `scaffold/diagram-check`" for path in diagram_paths]
    lines.append("")
    if task.dependencies:
        lines += [f"Depends on: {', '.join(task.dependencies)}", ""]
    if issue_number is not None:
        lines.append(f"Part of #{issue_number} (quest `{quest.id}`).")
    lines.append(f"Branch `{task.branch}`; Backlog.md: this PR marks {task.id} Done.")
    return "\n".join(lines)


@dataclass(frozen=True)
class Command:
    verb: Literal["status", "abort", "retry", "fix", "help"]
    task_id: str | None = None
    problem: str | None = None
    text: str = ""  # `/scaffold fix <text>`: what to fix


_FIX = re.compile(r"^[ \t]*/scaffold[ \t]+fix\b[ \t]*(.*)", re.M | re.S | re.I)


_COMMAND = re.compile(r"^[ \t]*/scaffold(?=[ \t]|$)(?:[ \t]+(\S+))?(?:[ \t]+(\S+))?[^\n]*$", re.M)
_TASK_ID = re.compile(r"^task-\d+(?:\.\d+)*$", re.I)


def parse_command(body: str) -> Command | None:
    """The first ``/scaffold ...`` line of a comment, or None when there is none."""
    m = _COMMAND.search(body)
    if m is None:
        return None
    if m.group(1) is None:
        return Command("help", problem="say what to do")
    verb = m.group(1).lower()
    arg = m.group(2)
    if verb == "status":
        return Command("status")
    if verb == "abort":
        return Command("abort")
    if verb == "fix":
        fix = _FIX.search(body)
        text = fix.group(1).strip() if fix else ""
        if not text:
            return Command("fix", problem="say what to fix: `/scaffold fix <what to change>`")
        return Command("fix", text=text)
    if verb == "retry":
        if arg is None or not _TASK_ID.match(arg):
            return Command("retry", problem="say which task: `/scaffold retry task-3`")
        return Command("retry", task_id=normalize_task_id(arg))
    return Command("help", problem=f"unknown command {verb!r}")


@dataclass(frozen=True)
class AnswerMatch:
    question_id: str | None
    text: str
    problem: str | None = None


_ANSWER = re.compile(r"^\s*/answer\s+(q-[A-Za-z0-9-]+)\s*:?\s*(.*)$", re.S)
_LEADING_ID = re.compile(r"^\s*(q-[A-Za-z0-9-]+)\s*[:\-–]\s*(.*)$", re.S)
_QUOTE_ID = re.compile(r"`(q-[A-Za-z0-9-]+)`")


def match_answer(body: str, open_ids: Sequence[str]) -> AnswerMatch | None:
    """Which open question a comment answers; None when no question is open.

    ``/answer q-3-1 text`` or ``q-3-1: text`` name the question; a plain reply answers
    the only open question, or one it quotes (a reply to the question comment quotes its
    id); with several open and none named, it is ambiguous.
    """
    if not open_ids:
        return None
    for pattern in (_ANSWER, _LEADING_ID):
        m = pattern.match(body)
        if m:
            qid, text = m.group(1), m.group(2).strip()
            if qid not in open_ids:
                return AnswerMatch(None, text, f"`{qid}` is not an open question")
            if not text:
                return AnswerMatch(None, text, f"the answer to `{qid}` is empty")
            return AnswerMatch(qid, text)
    text = body.strip()
    if not text:
        return None
    quoted = [q for q in _QUOTE_ID.findall(body) if q in open_ids]
    reply = "\n".join(line for line in text.splitlines() if not line.startswith(">")).strip()
    if not reply:
        return None  # only quotes, nothing of its own
    if len(set(quoted)) == 1:
        return AnswerMatch(quoted[0], reply)
    if len(open_ids) == 1:
        return AnswerMatch(open_ids[0], reply)
    return AnswerMatch(None, text, "ambiguous")


def render_ambiguous(open_questions: Sequence[Question]) -> str:
    listing = "\n".join(
        f"- `{q.id}` ({q.task_id or 'planning'}): {q.question}" for q in open_questions
    )
    return (
        f"{NOTICE_MARKER}\nSeveral questions are open, so I could not tell which one this "
        f"answers:\n\n{listing}\n\nPlease reply with `/answer <id> <your answer>`."
    )


def _dollars(totals: dict[str, float]) -> str:
    return ", ".join(f"{name} ${usd:.2f}" for name, usd in sorted(totals.items()))
