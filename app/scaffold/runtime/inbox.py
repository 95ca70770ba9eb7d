"""The inbox: how a person's answers, approvals and aborts reach a running orchestrator.

Only one process writes a quest (the store's writer lock), so ``scaffold answer`` and
friends do not touch the quest file: they drop a small JSON message here (atomic
write), and the orchestrator applies it on its next turn, or on its next start
(:func:`consume`: an answer resumes the session, an abort stops the quest, an approval,
a rejection, a retry or feedback becomes the task's event).
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from scaffold.core import quest_flow as qf
from scaffold.core import review
from scaffold.core.events import Event
from scaffold.core.states import ABORTABLE, EventName, Lifecycle
from scaffold.errors import ScaffoldError, UnknownQuestion
from scaffold.fsutil import write_file
from scaffold.ids import PLAN_KEY
from scaffold.quest.model import Feedback, QuestPhase, utcnow

if TYPE_CHECKING:
    from scaffold.runtime.orchestrator import Orchestrator

Kind = Literal["answer", "approve", "reject", "abort", "retry", "feedback"]


class InboxMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Kind
    quest_id: str
    question_id: str | None = None
    task_id: str | None = None
    text: str = ""
    by: str = "cli"
    at: datetime
    # ``feedback``: a reviewer's requested changes, a `/scaffold fix`, or a failed check.
    feedback: Feedback | None = None


def post(state_root: Path, message: InboxMessage) -> Path:
    folder = state_root / "inbox"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{message.at.strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:8]}.json"
    write_file(folder / name, message.model_dump_json().encode("utf-8"))
    return folder / name


def make(kind: Kind, quest_id: str, **fields: str | None) -> InboxMessage:
    return InboxMessage(kind=kind, quest_id=quest_id, at=utcnow(), **fields)


def feedback(quest_id: str, task_id: str, item: Feedback) -> InboxMessage:
    """Feedback on a task's pull request, for its next round of work."""
    return InboxMessage(
        kind="feedback", quest_id=quest_id, task_id=task_id, by=item.by, at=utcnow(), feedback=item
    )


def pending(state_root: Path) -> list[tuple[Path, InboxMessage | None, str]]:
    """Messages in arrival order; a malformed one is returned with its reason, not dropped."""
    out: list[tuple[Path, InboxMessage | None, str]] = []
    for path in sorted((state_root / "inbox").glob("*.json")):
        try:
            out.append((path, InboxMessage.model_validate(json.loads(path.read_text("utf-8"))), ""))
        except (OSError, ValueError, ValidationError) as exc:
            out.append((path, None, str(exc).splitlines()[0]))
    return out


def consume(orch: Orchestrator) -> None:
    for path, msg, problem in pending(orch.state_root):
        if msg is None:
            orch.out.warn(f"inbox: {path.name}: {problem}; moved aside")
            path.rename(path.with_suffix(".bad"))
            continue
        if msg.quest_id != orch.quest.id or msg.task_id in orch.publishing:
            continue  # another quest's, or one that waits for its pull request
        try:
            _apply_message(orch, msg)
        except ScaffoldError as exc:
            orch.out.warn(f"inbox: {msg.kind}: {exc}")
        path.unlink(missing_ok=True)


def _apply_message(orch: Orchestrator, msg: InboxMessage) -> None:
    now = orch.clock()
    if msg.kind == "answer":
        assert msg.question_id is not None
        q = orch.quest.questions.get(msg.question_id)
        if q is None or q.answer is not None:
            raise UnknownQuestion(msg.question_id)
        step = qf.answer_question(orch.quest, msg.question_id, msg.text, msg.by, orch.limits, now)
        orch.commit(step.quest, step.entries)
        key = q.task_id or PLAN_KEY
        orch.out.line(f"{key}: answer to {msg.question_id} received; resuming the session")
        if step.effects:
            orch.start_job(key, step.effects)
    elif msg.kind == "abort":
        step = qf.stop_quest(orch.quest, msg.text or f"aborted by {msg.by}", now)
        orch.commit(step.quest, step.entries)
        for task in list(orch.quest.tasks.values()):
            if task.state is Lifecycle.READY or task.state in ABORTABLE:
                orch.apply(task.id, Event(EventName.ABORT_SIGNAL, detail="aborted"))
        if orch.quest.phase in (QuestPhase.REQUIREMENTS, QuestPhase.PLANNING):
            job = orch.jobs.get(PLAN_KEY)
            if job is not None:
                job.cancel()
            orch.apply(PLAN_KEY, Event(EventName.ABORT_SIGNAL, detail="aborted"))
    elif msg.kind == "feedback":
        _take_feedback(orch, msg, now)
    elif msg.kind == "approve" and orch.merging(msg.task_id):
        # A fresh approval (of a head that moved after the first one): the merge that
        # waits for it looks again now.
        orch.merges_look_again()
    else:
        assert msg.task_id is not None
        name = {
            "approve": EventName.PR_APPROVED,
            "reject": EventName.PR_REJECTED,
            "retry": EventName.RETRY_REQUESTED,
        }[msg.kind]
        orch.apply(msg.task_id, Event(name, at=now, detail=msg.text or msg.by))


def _take_feedback(orch: Orchestrator, msg: InboxMessage, now: datetime) -> None:
    """A reviewer's or CI's feedback: a round now, or kept for the next one."""
    task = orch.quest.tasks.get(msg.task_id or "")
    if task is None or msg.feedback is None:
        raise ScaffoldError(f"feedback for an unknown task {msg.task_id!r}")
    if not review.fresh(task, [msg.feedback]):
        orch.out.line(f"{task.id}: feedback {msg.feedback.key} was taken already")
        return
    name = EventName.CI_FAILED if msg.feedback.kind == "ci" else EventName.CHANGES_REQUESTED
    orch.apply(task.id, Event(name, at=now, feedback=(msg.feedback,)))
