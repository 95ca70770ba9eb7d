"""Finding the repository, choosing or creating the quest, and running it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TextIO

from scaffold import backlog as bl
from scaffold.config import ScaffoldConfig, load_config
from scaffold.errors import ConfigError, UsageError
from scaffold.git.runner import repo_toplevel
from scaffold.git.workspace import Workspace
from scaffold.quest.model import AgentRun, PlanningState, Quest, QuestPhase
from scaffold.quest.store import QuestStore, QuestWriter
from scaffold.roles import Role
from scaffold.runtime.orchestrator import Orchestrator
from scaffold.runtime.report import RunReport, combined_report
from scaffold.runtime.slot_pool import SlotPool
from scaffold.runtime.view import Reporter
from scaffold.state.branch import DEFAULT_BRANCH, StateBranch
from scaffold.state.publisher import StatePublisher
from scaffold.state.rebuild import merged_view, restore_quests

BACKLOG_QUEST = "backlog"


find_repo = repo_toplevel


def state_root(repo: Path) -> Path:
    return repo / ".scaffold"


def quest_store(repo: Path) -> QuestStore:
    return QuestStore(state_root(repo) / "quests")


def state_branch(repo: Path, branch: str | None = None) -> StateBranch:
    """The repository's state branch (``state.branch`` of the config, when it reads)."""
    if branch is None:
        try:
            branch = load_config(repo).state.branch
        except ConfigError:
            branch = DEFAULT_BRANCH
    return StateBranch(repo, branch)


def read_all_quests(repo: Path) -> list[Quest]:
    """Every quest of the repository: the local store's and the state branch's, the
    newer copy of each (so any clone that fetched the branch can say the status)."""
    return merged_view(quest_store(repo), state_branch(repo).read())


def restore_from_branch(repo: Path, branch: StateBranch) -> dict[str, str]:
    """Rebuild the open quests the local store lacks (or holds older) from the branch."""
    workspace = Workspace(repo)
    return restore_quests(repo, quest_store(repo), branch.read(), workspace.worktree_path)


def _active(quest: Quest) -> bool:
    return quest.phase in (QuestPhase.REQUIREMENTS, QuestPhase.PLANNING) or (
        quest.phase is QuestPhase.EXECUTING
        and quest.id != BACKLOG_QUEST
        and any(t.outcome != "merged" for t in quest.tasks.values())
    )


def open_or_create_quest(
    repo: Path,
    quest_id: str | None,
    *,
    request: str | None = None,
    branch: StateBranch | None = None,
) -> QuestWriter:
    """The quest ``scaffold run`` drives: the one named, the newest unfinished planned
    quest, else the ``backlog`` quest that adopts every To Do task of the backlog.
    Open quests on the state branch that the local store lacks are rebuilt first."""
    store = quest_store(repo)
    restore_from_branch(repo, branch or state_branch(repo))
    if request is not None:
        existing = set(store.list_ids())
        n = 1 + sum(1 for q in existing if q.startswith("quest-"))
        while f"quest-{n}" in existing:
            n += 1
        known = tuple(t.id for t in bl.load_backlog(repo).tasks)
        quest = Quest(
            id=f"quest-{n}",
            request=request,
            phase=QuestPhase.REQUIREMENTS,
            planning=PlanningState(
                role=Role.CHAOSWHISPERER,
                pending_run=AgentRun(role=Role.CHAOSWHISPERER, kind="fresh"),
                known_before=known,
            ),
        )
        return store.create(quest)
    if quest_id is None:
        quests = sorted((store.read(q) for q in store.list_ids()), key=lambda q: q.started_at)
        active = [q for q in quests if _active(q)]
        quest_id = active[-1].id if active else BACKLOG_QUEST
    if store.exists(quest_id):
        return store.open_writer(quest_id)
    if quest_id != BACKLOG_QUEST:
        raise UsageError(f"no quest {quest_id!r}")
    return _backlog_writer(store)


def _backlog_writer(store: QuestStore) -> QuestWriter:
    """The ``backlog`` quest, which adopts every To Do task nobody planned; made if absent."""
    if store.exists(BACKLOG_QUEST):
        return store.open_writer(BACKLOG_QUEST)
    return store.create(Quest(id=BACKLOG_QUEST, phase=QuestPhase.EXECUTING))


def open_active_quests(repo: Path, *, branch: StateBranch | None = None) -> list[QuestWriter]:
    """Every unfinished planned quest, oldest first (``scaffold run`` drives them all at
    once); the ``backlog`` quest when there is none. Rebuilt from the branch first."""
    store = quest_store(repo)
    restore_from_branch(repo, branch or state_branch(repo))
    quests = sorted((store.read(q) for q in store.list_ids()), key=lambda q: q.started_at)
    active = [q.id for q in quests if _active(q)]
    if not active:
        return [_backlog_writer(store)]
    writers: list[QuestWriter] = []
    try:
        for quest_id in active:
            writers.append(store.open_writer(quest_id))
    except BaseException:
        for writer in writers:
            writer.close()
        raise
    return writers


async def run_quests(
    repo: Path, config: ScaffoldConfig, writers: list[QuestWriter], stream: TextIO | None = None
) -> RunReport:
    """Several quests at once, sharing the repository's slots (one plain log for all)."""
    pool = SlotPool(config.slots)
    reports = await asyncio.gather(
        *(
            run_quest(repo, config, w, Reporter(stream, color=False), slot_pool=pool)
            for w in writers
        )
    )
    return combined_report({w.quest.id: r for w, r in zip(writers, reports, strict=True)})


async def run_quest(
    repo: Path,
    config: ScaffoldConfig,
    writer: QuestWriter,
    reporter: Reporter | None = None,
    *,
    slot_pool: SlotPool | None = None,
) -> RunReport:
    try:
        publisher = StatePublisher(
            StateBranch(repo, config.state.branch),
            quest_store(repo),
            writer,
            interval_s=config.state.interval_s,
        )
        orch = Orchestrator(
            repo, config, writer, reporter or Reporter(), publisher=publisher, slot_pool=slot_pool
        )
        report = await orch.run()
        if report.exit_code == 0 and writer.quest.id != BACKLOG_QUEST:
            writer.commit(writer.quest.model_copy(update={"phase": QuestPhase.DONE}))
        await orch.publish_state()
        return report
    finally:
        writer.close()
