"""The quest's state file: what the state branch holds for one quest, and its bounds.

One JSON file per quest, ``quests/<id>.json`` while the quest is open and
``quests/done/<id>.json`` once it is finished, so that ``git log -p scaffold/state --
quests/<id>.json`` reads as the quest's story. The file holds the whole
:class:`~scaffold.quest.model.Quest` without its run folders, the forge's link (for the
App: the issue, its comments and the PRs it opened), and a bounded history: the newest
entries whole and counts per event of everything older, so that it stays under
:data:`MAX_BYTES` (each task keeps its newest :data:`SIGNALS_KEPT` signals too).
Pure: bytes in, models out.
"""

from __future__ import annotations

import json
import re
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scaffold.errors import InvalidIdError, StoreError
from scaffold.ids import validate_quest_id
from scaffold.quest.journal import dumps
from scaffold.quest.model import HistoryEntry, Quest, QuestPhase

FORMAT = 1
MAX_BYTES = 64 * 1024
RECENT_KEPT = 200  # newest history entries kept whole (fewer when the file would be too big)
SIGNALS_KEPT = 3
# The review rounds of each task the file keeps (the newest).
ROUNDS_KEPT = 3
OPEN_DIR = "quests"
DONE_DIR = "quests/done"
FINISHED = frozenset({QuestPhase.DONE, QuestPhase.FAILED})


class HistorySummary(BaseModel):
    """What the file no longer holds whole: how many entries, when, and of which events."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    entries: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    last_seq: int = 0
    events: dict[str, int] = Field(default_factory=dict)


class StateHistory(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    older: HistorySummary = HistorySummary()
    recent: tuple[HistoryEntry, ...] = ()


class QuestStateFile(BaseModel):
    """The document at ``quests/[done/]<id>.json`` on the state branch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[1] = 1
    quest: Quest
    # The forge's tie to the quest (App: repository, issue, comments, pull requests).
    link: dict[str, Any] | None = None
    history: StateHistory = StateHistory()

    @property
    def seq(self) -> int:
        return self.quest.seq


def quest_path(quest_id: str, *, finished: bool) -> str:
    folder = DONE_DIR if finished else OPEN_DIR
    return f"{folder}/{validate_quest_id(quest_id)}.json"


def is_finished(quest: Quest) -> bool:
    return quest.phase in FINISHED


def quest_id_of(path: str) -> str | None:
    """The quest id of a state-branch path, or None for anything else."""
    found = re.fullmatch(rf"{OPEN_DIR}/(?:done/)?([^/]+)\.json", path)
    try:
        return validate_quest_id(found.group(1)) if found else None
    except InvalidIdError:
        return None


MAX_EVENT_KINDS = 64


def _folded(older: HistorySummary, events: Counter[str], entry: HistoryEntry) -> HistorySummary:
    """``older`` with ``entry`` counted in (``events``, updated here, are its counts).

    A transition is counted by its event (a fixed set), a note or quest fact by its kind
    (their text is free); past :data:`MAX_EVENT_KINDS` keys, as ``other``. So the
    summary stays small whatever the history held."""
    key = entry.event if entry.kind == "transition" else entry.kind
    if key not in events and len(events) >= MAX_EVENT_KINDS:
        key = "other"
    events[key] += 1
    return HistorySummary(
        entries=older.entries + 1,
        first_at=older.first_at or entry.at,
        last_at=entry.at,
        last_seq=entry.seq,
        events=dict(events),
    )


class HistoryDigest:
    """The bounded history of one quest: the newest entries and a summary of the rest."""

    def __init__(self, history: StateHistory | None = None) -> None:
        """Starting from ``history``, as a state file holds it."""
        self.older = history.older if history else HistorySummary()
        self._events: Counter[str] = Counter(self.older.events)
        self.recent: deque[HistoryEntry] = deque(maxlen=RECENT_KEPT)
        self.add(history.recent if history else ())

    @property
    def last_seq(self) -> int:
        if self.recent:
            return self.recent[-1].seq
        return self.older.last_seq

    def add(self, entries: Iterable[HistoryEntry]) -> None:
        for entry in entries:
            if entry.seq <= self.last_seq:
                continue  # already folded in (a replay overlapping what the file held)
            if len(self.recent) == self.recent.maxlen:
                self.older = _folded(self.older, self._events, self.recent.popleft())
            self.recent.append(entry)

    def state(self, keep: int | None = None) -> StateHistory:
        """The history as the file holds it, with at most ``keep`` recent entries whole."""
        recent = list(self.recent)
        cut = 0 if keep is None else max(0, len(recent) - keep)
        older, events = self.older, Counter(self._events)
        for entry in recent[:cut]:
            older = _folded(older, events, entry)
        return StateHistory(older=older, recent=tuple(recent[cut:]))


def portable(quest: Quest) -> Quest:
    """The quest without what only the writing machine can use, signals bounded."""
    tasks = {}
    for task_id, task in quest.tasks.items():
        update: dict[str, Any] = {}
        if task.run_dir is not None:
            update["run_dir"] = None
        if len(task.signals) > SIGNALS_KEPT:
            update["signals"] = task.signals[-SIGNALS_KEPT:]
        if len(task.rounds) > ROUNDS_KEPT:
            # Older rounds are in the branch's log (and the journal); the newest say enough.
            update["rounds"] = task.rounds[-ROUNDS_KEPT:]
        tasks[task_id] = task.model_copy(update=update) if update else task
    planning = quest.planning
    if planning.run_dir is not None:
        planning = planning.model_copy(update={"run_dir": None})
    return quest.model_copy(update={"tasks": tasks, "planning": planning})


def render(quest: Quest, digest: HistoryDigest, link: Mapping[str, Any] | None = None) -> bytes:
    """The file's bytes: indented JSON (it diffs line by line), under :data:`MAX_BYTES`.

    Of the newest :data:`RECENT_KEPT` entries, as many of the newest as fit are kept
    whole (each one's size is known from its own JSON), the rest counted in."""
    doc = QuestStateFile(quest=portable(quest), link=dict(link) if link else None)
    base = doc.model_dump(mode="json", exclude={"history"})
    recent = [entry.model_dump(mode="json") for entry in digest.recent]

    def dumped(keep: int) -> bytes:
        history = digest.state(keep)
        older = history.older.model_dump(mode="json")
        kept = recent[len(recent) - len(history.recent) :]
        return dumps({**base, "history": {"older": older, "recent": kept}}, indent=1) + b"\n"

    # Each kept entry costs its own JSON, three more spaces of indent per line and ",\n".
    room = MAX_BYTES - len(dumped(0))
    keep = 0
    for entry in reversed(recent):
        text = dumps(entry, indent=1)
        room -= len(text) + 3 * (text.count(b"\n") + 1) + 2
        if room < 0:
            break
        keep += 1
    while keep:
        data = dumped(keep)
        if len(data) <= MAX_BYTES:
            return data
        keep = keep * 3 // 4
    return dumped(0)


def parse(data: bytes, where: str) -> QuestStateFile:
    """A state file, or a StoreError naming ``where`` and what is wrong."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise StoreError(where, f"not a quest state file (bad JSON: {exc})") from None
    if not isinstance(raw, dict):
        raise StoreError(where, "not a quest state file (not a JSON object)")
    if raw.get("format") != FORMAT:
        raise StoreError(
            where, f"quest state format {raw.get('format')!r} is not {FORMAT}: upgrade scaffold"
        )
    try:
        doc = QuestStateFile.model_validate(raw)
        validate_quest_id(doc.quest.id)
        return doc
    except InvalidIdError as exc:
        raise StoreError(where, f"bad quest state file: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise StoreError(
            where, f"bad quest state file at {loc or '(top)'}: {first['msg']}"
        ) from None
