"""How a run ends: exit codes (0 done, 1 failure, 3 waiting, 4 safety)."""

from __future__ import annotations

from dataclasses import dataclass

from scaffold.core.states import Lifecycle
from scaffold.quest.model import Quest, QuestPhase


@dataclass(frozen=True)
class RunReport:
    exit_code: int
    reason: str


def final_report(q: Quest) -> RunReport:
    """The exit code and reason of a run that has nothing left it can do alone."""
    if q.phase is QuestPhase.FAILED:
        return RunReport(1, q.stop_reason or "planning failed")
    if q.pending_questions():
        ids = ", ".join(x.id for x in q.pending_questions())
        return RunReport(3, f'waiting for answers: {ids} (scaffold answer <id> "...")')
    waiting = [t.id for t in q.tasks.values() if t.state is Lifecycle.PR_CREATED]
    if waiting:
        return RunReport(3, f"waiting for approval: {', '.join(waiting)}")
    merging = [t.id for t in q.tasks.values() if t.state is Lifecycle.MERGING]
    if merging:
        # The forge is waiting for something outside scaffold (required checks, an
        # update of the branch); the next delivery or reconciliation picks it up.
        return RunReport(3, f"waiting to merge: {', '.join(merging)}")
    if q.stop_reason:
        code = 1 if q.stop_limit == "abort" else 4
        return RunReport(code, f"stopped: {q.stop_reason}")
    blocked = [t for t in q.tasks.values() if t.state is Lifecycle.BLOCKED]
    if blocked:
        why = "; ".join(f"{t.id}: {t.blocked_reason}" for t in blocked)
        return RunReport(1, f"blocked: {why}")
    # A rejected pull request is a person's decision, not a failure: the task waits in
    # To Do for `scaffold retry`.
    rejected = [t.id for t in q.tasks.values() if t.outcome == "rejected"]
    open_tasks = [t.id for t in q.tasks.values() if t.outcome not in ("merged", "rejected")]
    if open_tasks:
        return RunReport(1, f"not done and nothing can start: {', '.join(open_tasks)}")
    merged = len(q.tasks) - len(rejected)
    tail = f"; rejected, back in To Do: {', '.join(rejected)}" if rejected else ""
    return RunReport(0, f"all {merged} task(s) merged{tail}")


# When several quests ran at once, the run's exit code is the most pressing of theirs:
# a usage error, then a safety stop, then a failure, then waiting for a person.
_PRESSING = (2, 4, 1, 3, 0)


def combined_report(reports: dict[str, RunReport]) -> RunReport:
    """One report for quests that ran side by side (``scaffold run`` with several open)."""
    code = next(c for c in _PRESSING if c in {r.exit_code for r in reports.values()} or c == 0)
    reason = "; ".join(f"{qid}: {r.reason}" for qid, r in reports.items())
    return RunReport(code, reason)
