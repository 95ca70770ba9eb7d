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
its last start. A task made ready ahead of its slot (its worktree created while every
slot was busy) counts from its first agent's start (the journal note
:data:`AGENT_STARTED`), not from the wait for the slot. Time scaffold itself was down while a task was in flight is counted
(the journal cannot tell it apart); the model's winsorised means keep such an outlier
from dominating.

Cost. :class:`LearnedEstimates` reads the journals only when the orchestrator says the
history may have grown (a task merged) and a journal's size actually changed; a tick
costs a dictionary lookup per task. Any unreadable journal is skipped: estimates are
advice, never a reason to stop.
"""

from __future__ import annotations

import contextlib
import os
import threading
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
from scaffold.quest.store import JOURNAL_NAME, QuestStore
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
    """Per-repository cache of the fitted model and of each task's estimate.

    With ``background=True`` (the orchestrator) only the first fit runs in the caller;
    a refit after a merge (it reads every journal: tens of ms, growing with history) runs
    in a worker thread, and the previous model answers until it is done. The
    orchestrator's loop asks on every scheduling tick; a refit there held up every hand-off.
    """

    def __init__(
        self,
        repo: Path,
        store: QuestStore | None = None,
        branch: StateBranch | None = None,
        *,
        background: bool = False,
    ) -> None:
        self.repo = repo
        self.background = background
        self._lock = threading.Lock()
        self._refitting: threading.Thread | None = None
        self._pending_tasks: list[bl.BacklogTask] | None = None
        self.store = store or QuestStore(repo / ".scaffold" / "quests")
        self.branch = branch
        self._generation: object = object()
        self._signature: tuple[object, ...] | None = None
        self._model: DurationModel | None = None
        self._snapshot: object = None
        self._minutes: dict[str, float] = {}
        self._samples_seen = 0  # samples of the last fit: paces the next one

    @property
    def model(self) -> DurationModel | None:
        return self._model

    def _journal_signature(self) -> tuple[object, ...]:
        sig: list[object] = []
        for qid in self.store.list_ids():
            with contextlib.suppress(OSError):
                sig.append((qid, os.stat(self.store.root / qid / JOURNAL_NAME).st_size))
        if self.branch is not None:
            with contextlib.suppress(ScaffoldError, OSError):
                sig.append(self.branch.tip())
        return tuple(sig)

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

    def refresh(self, snapshot: bl.BacklogSnapshot, generation: object) -> None:
        """Refit when ``generation`` changed (the caller bumps it when a task merges)
        and the journals grew since the last fit.

        With an integer generation (the number of merged tasks), a refit waits until
        the history has grown by a quarter of what the last fit saw (at least one
        task): one more sample among forty barely moves the model, and every refit
        reads every journal, so refitting at each merge made a long quest's hand-offs
        cost O(n) each (O(n^2) in all)."""
        if generation == self._generation:
            return
        first = self._signature is None
        if (
            not first
            and isinstance(generation, int)
            and isinstance(self._generation, int)
            and generation - self._generation < max(1, self._samples_seen // 4)
        ):
            return
        self._generation = generation
        if self.background and not first:
            with self._lock:
                self._pending_tasks = list(snapshot.tasks)
                if self._refitting is None:
                    self._refitting = threading.Thread(target=self._refit_loop, daemon=True)
                    self._refitting.start()
                # else: the running refit goes round once more with these tasks
            return
        self._refit(snapshot.tasks)

    def _refit_loop(self) -> None:
        while True:
            with self._lock:
                tasks, self._pending_tasks = self._pending_tasks, None
                if tasks is None:
                    self._refitting = None
                    return
            with contextlib.suppress(Exception):  # advice only; never an error in a thread
                self._refit(tasks)

    def _refit(self, tasks: Sequence[bl.BacklogTask]) -> None:
        signature = self._journal_signature()
        if signature == self._signature:
            return
        seen = self._samples_seen
        try:
            samples = self.samples(tasks)
            seen = len(samples)
            model = fit(samples)
        except (ScaffoldError, OSError, ValueError, ArithmeticError):
            model = None  # advice only: no estimate is never a reason to stop
        with self._lock:
            self._samples_seen = seen
            self._signature = signature
            self._model = model
            self._snapshot = None

    def minutes(self, snapshot: bl.BacklogSnapshot, generation: object) -> Mapping[str, float]:
        """Learned estimate (minutes) of every task of ``snapshot``; empty without history."""
        self.refresh(snapshot, generation)
        with self._lock:
            model = self._model
            if model is None:
                return {}
            if self._snapshot is not snapshot:
                self._snapshot = snapshot
                self._minutes = {
                    t.id: model.estimate(task_features(t)) / _SECONDS_PER_UNIT
                    for t in snapshot.tasks
                }
            return self._minutes
