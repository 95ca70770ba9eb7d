"""``scaffold status``: every backlog task with its lifecycle state, and every quest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scaffold import backlog as bl
from scaffold.config import ScaffoldConfig, load_config
from scaffold.core import review
from scaffold.core.quest_flow import shown_phase
from scaffold.errors import ConfigError, ScaffoldError
from scaffold.quest.model import Quest, TaskRecord
from scaffold.runtime.session import quest_store, state_branch
from scaffold.state.rebuild import merged_view


def _task_entry(
    bt: Any, ready: bool, record: TaskRecord | None, quest: Quest | None, cfg: ScaffoldConfig
) -> dict[str, Any]:
    rec = record or TaskRecord(id=bt.id)  # a task no quest took: Idle, nothing spent
    return {
        "id": bt.id,
        "title": bt.title,
        "status": bt.status,
        "priority": bt.priority,
        "dependencies": list(bt.dependencies),
        "parent": bt.parent_task_id,
        "path": str(bt.path),
        "ready": ready,
        "state": rec.state.value,
        "quest": quest.id if quest else None,
        "role": rec.role.value if rec.role else None,
        "attempts": rec.attempts,
        "session_id": _newest_session(rec),
        "cost_usd": rec.cost_usd,
        "question": rec.question_id,
        "blocked_reason": rec.blocked_reason,
        "pr": rec.pr.model_dump(mode="json") if rec.pr else None,
        "outcome": rec.outcome,
        "review": _review_entry(rec, cfg),
    }


def _review_entry(record: TaskRecord, cfg: ScaffoldConfig) -> dict[str, Any] | None:
    """The task's review loop: its round in words, counters, and every round."""
    if not (record.rounds or record.feedback):
        return None
    return {
        "round": review.headline(record, cfg.review.max_rounds, cfg.ci.max_fixes),
        "review_rounds": record.review_rounds,
        "ci_fixes": record.ci_fixes,
        "waiting": [f.key for f in record.feedback],
        "rounds": [r.model_dump(mode="json") for r in record.rounds],
    }


def _newest_session(record: TaskRecord) -> str | None:
    if record.role is not None and record.role.value in record.sessions:
        return record.sessions[record.role.value]
    return next(reversed(record.sessions.values()), None)


def status_report(repo: Path) -> dict[str, Any]:
    errors: list[dict[str, Any]] = []
    cfg = ScaffoldConfig()
    try:
        cfg = load_config(repo)
    except ConfigError as exc:
        errors.append(
            {"path": exc.path, "reason": f"{exc.key}: {exc.reason}" if exc.key else exc.reason}
        )
    branch = state_branch(repo)
    docs = {}
    try:
        docs = branch.read()
    except ScaffoldError as exc:
        errors.append({"path": branch.branch, "reason": str(exc)})
    errors += [{"path": f"{branch.branch}:{p.path}", "reason": p.reason} for p in branch.problems]
    unreadable: list[tuple[str, str]] = []
    quests = merged_view(quest_store(repo), docs, unreadable)
    errors += [{"path": path, "reason": reason} for path, reason in unreadable]
    records: dict[str, tuple[TaskRecord, Quest]] = {}
    for q in sorted(quests, key=lambda q: q.started_at):
        for t in q.tasks.values():
            records[t.id] = (t, q)
    snapshot = bl.load_backlog(repo)
    ready = {tid for tid, r in snapshot.readiness.items() if r.ready}
    tasks = []
    for bt in snapshot.tasks:
        rec, quest = records.get(bt.id, (None, None))
        tasks.append(_task_entry(bt, bt.id in ready, rec, quest, cfg))
    for problem in snapshot.problems:
        errors.append(
            {
                "path": problem.path,
                "reason": problem.reason,
                "task": problem.task_id,
                "kind": problem.kind,
            }
        )
    quest_entries = [
        {
            "id": q.id,
            "phase": shown_phase(q),
            "request": q.request,
            "cost_usd": q.cost_usd,
            "cost_by_backend": dict(sorted(q.cost_by_backend.items())),
            "cost_by_role": dict(sorted(q.cost_by_role.items())),
            "started_at": q.started_at.isoformat(),
            "stop_reason": q.stop_reason,
            "planning_role": q.planning.role.value,
            "tasks": sorted(q.tasks),
            "pending_questions": [
                {
                    "id": x.id,
                    "task": x.task_id,
                    "role": x.role.value,
                    "question": x.question,
                    "context": x.context,
                }
                for x in q.pending_questions()
            ],
        }
        for q in quests
    ]
    return {"tasks": tasks, "quests": quest_entries, "errors": errors}


def render_table(report: dict[str, Any]) -> str:
    rows = [("ID", "STATUS", "STATE", "READY", "ROLE", "TRIES", "COST", "TITLE")]
    for t in report["tasks"]:
        rows.append(
            (
                t["id"],
                t["status"],
                t["state"] + (f" (asks {t['question']})" if t["question"] else ""),
                "yes" if t["ready"] else "-",
                t["role"] or "-",
                str(t["attempts"]),
                f"${t['cost_usd']:.2f}",
                t["title"],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=False)) + "  " + r[-1]
        for r in rows
    ]
    for q in report["quests"]:
        lines.append(
            f"\nquest {q['id']}: {q['phase']}, ${q['cost_usd']:.2f}"
            + (f", stopped: {q['stop_reason']}" if q["stop_reason"] else "")
        )
        for t in report["tasks"]:
            if t["quest"] == q["id"] and t["review"] and t["review"]["round"]:
                lines.append(f"  {t['id']}: {t['review']['round']}")
        for pq in q["pending_questions"]:
            lines.append(f"  question {pq['id']} ({pq['task'] or 'planning'}): {pq['question']}")
    if report["errors"]:
        lines.append("\nproblems:")
        lines += [f"  {e['path']}: {e['reason']}" for e in report["errors"]]
    return "\n".join(lines)
