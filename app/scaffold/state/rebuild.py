"""Quests rebuilt from the repository alone: the state branch, Backlog.md, the branches.

A fresh server, a workflow run whose cache was evicted, or a clone whose ``.scaffold/``
was deleted finds every quest on the state branch. Each open quest the local store lacks
(or holds older) is written back into the store, with task worktrees where this machine
keeps them, no run folders (an interrupted agent run is run again), and task branches
only the remote still has taken from it, so an open pull request's work is never
replaced by a fresh branch. The orchestrator's usual recovery does the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path

from scaffold.errors import InvalidIdError, ScaffoldError, StoreLocked
from scaffold.git.runner import SAFE_LOCAL, run_git
from scaffold.ids import branch_for_task, normalize_task_id
from scaffold.quest.model import Quest
from scaffold.quest.store import QuestStore
from scaffold.state.document import QuestStateFile, is_finished

log = logging.getLogger("scaffold.state")


def localized(quest: Quest, worktree_for: Callable[[str], Path]) -> Quest:
    """The quest with its task worktrees where this machine keeps them (task ids that are
    not Backlog.md ids are refused: they end up in paths and branch names)."""
    for task_id in quest.tasks:
        if normalize_task_id(task_id) != task_id:
            raise InvalidIdError(task_id, "task id")
    tasks = {
        tid: t.model_copy(update={"worktree": str(worktree_for(tid)), "run_dir": None})
        if t.worktree is not None
        else t
        for tid, t in quest.tasks.items()
    }
    return quest.model_copy(update={"tasks": tasks})


def _adopt_remote_branches(repo: Path, quest: Quest) -> None:
    """Task branches known only as ``origin/<branch>`` become local branches again."""
    for task in quest.tasks.values():
        if task.branch is None or task.outcome is not None:
            continue
        try:
            if task.branch != branch_for_task(task.id):
                continue  # a file someone edited by hand: only scaffold's own names
        except InvalidIdError:
            continue
        local = f"refs/heads/{task.branch}"
        remote = f"refs/remotes/origin/{task.branch}"
        has = run_git([*SAFE_LOCAL, "rev-parse", "--verify", "--quiet", local], repo, check=False)
        if has.returncode == 0:
            continue
        tip = run_git([*SAFE_LOCAL, "rev-parse", "--verify", "--quiet", remote], repo, check=False)
        if tip.returncode == 0 and tip.stdout.strip():
            run_git([*SAFE_LOCAL, "update-ref", local, tip.stdout.strip(), "0" * 40], repo)
            log.info("task branch %s taken from the remote", task.branch)


def restore_quests(
    repo: Path,
    store: QuestStore,
    docs: Mapping[str, QuestStateFile],
    worktree_for: Callable[[str], Path],
) -> dict[str, str]:
    """Bring every open quest of ``docs`` into ``store``; quest id -> what was done."""
    done: dict[str, str] = {}
    for qid, doc in sorted(docs.items()):
        if is_finished(doc.quest):
            continue
        try:
            outcome = store.restore(localized(doc.quest, worktree_for))
        except StoreLocked:
            outcome = "kept"  # a live run holds it: that one is newer
        except InvalidIdError as exc:
            log.warning("quest %s on the state branch not rebuilt: %s", qid, exc)
            continue
        if outcome != "kept":
            _adopt_remote_branches(repo, doc.quest)
            log.info("quest %s rebuilt from the state branch (%s)", qid, outcome)
        done[qid] = outcome
    return done


def merged_view(
    store: QuestStore,
    docs: Mapping[str, QuestStateFile],
    problems: list[tuple[str, str]] | None = None,
) -> list[Quest]:
    """Every quest known here or on the branch, the newer copy of each (for status).

    With ``problems``, a local quest that cannot be read is recorded there as (path,
    reason) and its branch copy, if any, stands in; without, the error is raised."""
    quests: dict[str, Quest] = {qid: doc.quest for qid, doc in docs.items()}
    for qid in store.list_ids():
        try:
            local = store.read(qid)
        except ScaffoldError as exc:
            if problems is None:
                raise
            problems.append((str(store.root / qid), str(exc)))
            continue
        held = quests.get(qid)
        if held is None or local.seq >= held.seq:
            quests[qid] = local  # the journal is ahead of the branch (or level with it)
    return sorted(quests.values(), key=lambda q: (q.started_at, q.id))
