"""Learned task estimates for the scheduler: the I/O half of :mod:`scaffold.core.estimates`.

Where the history comes from. Every quest this clone ran has a journal under
``.scaffold/quests/<quest>/journal.jsonl`` (finished and open quests alike); a quest
only the state branch knows (another server or an Action ran it) contributes the
newest history entries its file keeps (``state.document.RECENT_KEPT``). Each
transition line carries its instant, the lifecycle states before and after, and the
role whose signal caused it. :func:`slot_seconds` walks those lines and, for every
task that was merged, adds up the time it held a slot (``core.states.HOLDS_SLOT``,
minus the time it was parked on a question), charged to the role whose result ended
each stretch (``scaffold`` for stretches no agent ended: worktree, Ward). The
features of each task (description, acceptance criteria, labels) come from its
Backlog.md file, which stays in the repository after the task is Done.

A task that was started again from Ready (after an abort or a safety stop) counts from
its last start. A task whose worktree was made before a slot was free (as earlier
versions did while every slot was busy) counts from its first agent's start (the
journal note :data:`AGENT_STARTED`), not from the wait for the slot. Time scaffold
itself was down while a task was in flight is counted (the journal cannot tell it
apart); the model's winsorised means keep such an outlier from dominating.

:class:`LearnedEstimates` reads the journals again only when a task merged. Any
unreadable journal is skipped: estimates are advice, never a reason to stop.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from scaffold import backlog as bl
from scaffold.core.estimates import (
    SCAFFOLD_ROLE,
    DurationModel,
    TaskFeatures,
    TaskSample,
    count_paths,
    fit,
)
from scaffold.core.states import HOLDS_SLOT, EventName, Lifecycle
from scaffold.errors import ScaffoldError
from scaffold.quest.model import HistoryEntry
from scaffold.quest.store import QuestStore
from scaffold.signal_back.plan import QUEST_LABEL_PREFIX
from scaffold.state.branch import StateBranch

__all__ = ["LearnedEstimates", "slot_seconds", "task_features"]

_HOLDS = frozenset(s.value for s in HOLDS_SLOT)
# How the journal note of an agent's start begins ("agent started: codeweaver (implement)").
AGENT_STARTED = "agent started"
# Learned estimates are handed to the scheduler in minutes (explicit ones share it).
_SECONDS_PER_UNIT = 60.0


def task_features(task: bl.BacklogTask) -> TaskFeatures:
    """What the model may see of a task before it runs (never its notes or summary,
    which are written while or after it runs)."""
    parts = [task.description or "", *(c.text for c in task.acceptance_criteria)]
    text = "\n".join(p.strip() for p in parts if p and p.strip())
    labels = tuple(lab for lab in task.labels if not lab.startswith(QUEST_LABEL_PREFIX))
    return TaskFeatures(text_chars=len(text), files=count_paths(text), labels=labels)


def slot_seconds(entries: Iterable[HistoryEntry]) -> dict[str, dict[str, float]]:
    """Seconds each merged task held a slot, per role (see the module docstring)."""
    state: dict[str, str] = {}
    since: dict[str, float] = {}
    parked: set[str] = set()
    spent: dict[str, dict[str, float]] = {}
    merged: set[str] = set()
    out: dict[str, dict[str, float]] = {}
    before_first_agent: set[str] = set()
    for e in entries:
        tid = e.task_id
        if e.kind == "note" and tid in before_first_agent and e.event.startswith(AGENT_STARTED):
            since[tid] = e.at.timestamp()  # the wait for a slot was not the task's time
            before_first_agent.discard(tid)
            continue
        if e.kind != "transition" or tid is None or e.target is None:
            continue
        at = e.at.timestamp()
        before_first_agent.discard(tid)
        if e.event == EventName.WORKTREE_CREATED.value:
            before_first_agent.add(tid)
        if e.event == EventName.TASK_SELECTED.value:
            spent[tid] = {}
            merged.discard(tid)
            out.pop(tid, None)
        elif tid in spent and state.get(tid) in _HOLDS and tid not in parked:
            # Only from a start we saw: a history cut short (the state branch keeps the
            # newest entries) must not pass a task's tail off as all of it.
            role = str(e.detail.get("role") or SCAFFOLD_ROLE)
            bucket = spent[tid]
            bucket[role] = bucket.get(role, 0.0) + max(0.0, at - since[tid])
        if e.event == EventName.QUESTION_ASKED.value:
            parked.add(tid)
        elif e.event == EventName.ANSWER_RECEIVED.value or e.target != Lifecycle.PROCESSING.value:
            parked.discard(tid)
        if e.event == EventName.MERGE_COMPLETE.value:
            merged.add(tid)
        state[tid] = e.target
        since[tid] = at
        if tid in merged and e.target not in _HOLDS:
            out[tid] = dict(spent.get(tid, {}))
            merged.discard(tid)
    # Merged but not yet cleaned up (the journal ends mid-cleanup): count what we have.
    for tid in merged:
        out[tid] = dict(spent.get(tid, {}))
    return {tid: roles for tid, roles in out.items() if roles}


class LearnedEstimates:
    """The model fitted to one repository's history, fitted again when a task merged."""

    def __init__(
        self, repo: Path, store: QuestStore | None = None, branch: StateBranch | None = None
    ) -> None:
        self.repo = repo
        self.store = store or QuestStore(repo / ".scaffold" / "quests")
        self.branch = branch
        self.model: DurationModel | None = None
        self._generation: object = object()

    def _histories(self) -> Iterator[Iterable[HistoryEntry]]:
        """The local journals, then the state branch's (newest entries of each quest)
        for the quests this clone has no journal of (another server ran them)."""
        local = self.store.list_ids()
        for qid in local:
            yield self.store.history(qid)
        if self.branch is None:
            return
        try:
            docs = self.branch.read()
        except (ScaffoldError, OSError):
            return
        for qid in sorted(docs):
            if qid not in local:
                yield docs[qid].history.recent

    def samples(self, tasks: Sequence[bl.BacklogTask]) -> list[TaskSample]:
        """One sample per merged task in any journal whose Backlog.md file still exists."""
        by_id = {t.id: t for t in tasks}
        seen: dict[str, TaskSample] = {}
        for entries in self._histories():
            try:
                spent = slot_seconds(entries)
            except (ScaffoldError, OSError, ValueError):
                continue
            for tid, roles in spent.items():
                bt = by_id.get(tid)
                if bt is not None:
                    # The same task merged by two quests (a retry): the later one wins.
                    seen[tid] = TaskSample(task_features(bt), roles)
        return [seen[tid] for tid in sorted(seen)]

    def minutes(self, snapshot: bl.BacklogSnapshot, generation: object) -> Mapping[str, float]:
        """Learned estimate (minutes) of every task of ``snapshot``; empty without history.

        The model is fitted again when ``generation`` changed (the caller bumps it when
        a task merges: only then can the history have grown)."""
        if generation != self._generation:
            self._generation = generation
            try:
                self.model = fit(self.samples(snapshot.tasks))
            except (ScaffoldError, OSError, ValueError, ArithmeticError):
                self.model = None  # advice only: no estimate is never a reason to stop
        model = self.model
        if model is None:
            return {}
        return {t.id: model.estimate(task_features(t)) / _SECONDS_PER_UNIT for t in snapshot.tasks}
