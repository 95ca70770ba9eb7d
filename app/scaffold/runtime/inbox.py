"""The inbox: how a person's answers, approvals and aborts reach a running orchestrator.

Only one process writes a quest (the store's writer lock), so ``scaffold answer`` and
friends do not touch the quest file: they drop a small JSON message here (atomic
write), and the orchestrator applies it on its next turn, or on its next start.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from scaffold.fsutil import write_file
from scaffold.quest.model import Feedback, utcnow

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


def inbox_dir(state_root: Path) -> Path:
    return state_root / "inbox"


def post(state_root: Path, message: InboxMessage) -> Path:
    folder = inbox_dir(state_root)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{message.at.strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:8]}.json"
    final = folder / name
    write_file(final, message.model_dump_json().encode("utf-8"))
    return final


def make(kind: Kind, quest_id: str, **fields: str | None) -> InboxMessage:
    return InboxMessage(kind=kind, quest_id=quest_id, at=utcnow(), **fields)


def feedback(quest_id: str, task_id: str, item: Feedback) -> InboxMessage:
    """Feedback on a task's pull request, for its next round of work."""
    return InboxMessage(
        kind="feedback", quest_id=quest_id, task_id=task_id, by=item.by, at=utcnow(), feedback=item
    )


def pending(state_root: Path) -> list[tuple[Path, InboxMessage | None, str]]:
    """Messages in arrival order; a malformed one is returned with its reason, not dropped."""
    folder = inbox_dir(state_root)
    if not folder.is_dir():
        return []
    out: list[tuple[Path, InboxMessage | None, str]] = []
    for path in sorted(folder.glob("*.json")):
        try:
            out.append((path, InboxMessage.model_validate(json.loads(path.read_text("utf-8"))), ""))
        except (OSError, ValueError, ValidationError) as exc:
            out.append((path, None, str(exc).splitlines()[0]))
    return out


def done(path: Path) -> None:
    path.unlink(missing_ok=True)
