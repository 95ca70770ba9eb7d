"""Finding the repository, choosing or creating the quest, and running it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from scaffold import backlog as bl
from scaffold.config import ScaffoldConfig
from scaffold.errors import UsageError
from scaffold.quest.model import AgentRun, PlanningState, Quest, QuestPhase
from scaffold.quest.store import QuestStore, QuestWriter
from scaffold.roles import Role
from scaffold.runtime.orchestrator import Orchestrator
from scaffold.runtime.report import RunReport
from scaffold.runtime.view import Reporter

BACKLOG_QUEST = "backlog"


def find_repo(start: Path) -> Path:
    proc = subprocess.run(
        ["git", "-C", str(start), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise UsageError(f"{start} is not inside a git repository")
    return Path(proc.stdout.strip())


def state_root(repo: Path) -> Path:
    return repo / ".scaffold"


def quest_store(repo: Path) -> QuestStore:
    return QuestStore(state_root(repo) / "quests")


def read_all_quests(repo: Path) -> list[Quest]:
    store = quest_store(repo)
    return [store.read(qid) for qid in store.list_ids()]


def _active(quest: Quest) -> bool:
    return quest.phase in (QuestPhase.REQUIREMENTS, QuestPhase.PLANNING) or (
        quest.phase is QuestPhase.EXECUTING
        and quest.id != BACKLOG_QUEST
        and any(t.outcome != "merged" for t in quest.tasks.values())
    )


def open_or_create_quest(
    repo: Path, quest_id: str | None, *, request: str | None = None
) -> QuestWriter:
    """The quest ``scaffold run`` drives: the one named, the newest unfinished planned
    quest, else the ``backlog`` quest that adopts every To Do task of the backlog."""
    store = quest_store(repo)
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
    return store.create(Quest(id=BACKLOG_QUEST, phase=QuestPhase.EXECUTING))


async def run_quest(
    repo: Path, config: ScaffoldConfig, writer: QuestWriter, reporter: Reporter | None = None
) -> RunReport:
    try:
        orch = Orchestrator(repo, config, writer, reporter or Reporter())
        report = await orch.run()
        if report.exit_code == 0 and writer.quest.id != BACKLOG_QUEST:
            writer.commit(writer.quest.model_copy(update={"phase": QuestPhase.DONE}))
        return report
    finally:
        writer.close()
