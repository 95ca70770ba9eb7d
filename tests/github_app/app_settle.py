"""Waiting for the App to have acted on everything so far, before asserting that something
did NOT happen (positive evidence instead of a sleep)."""

from __future__ import annotations

from app_harness import AppProcess, wait_for

from ghsim import GitHubSimulator

DONE = ("delivery processed", "handler failed")  # the App is through with it, either way


def _handled(app: AppProcess, delivery_id: str) -> int | None:
    """Where in the App's log the delivery was handled (None: not yet)."""
    for i, record in enumerate(app.log_records()):
        if record.get("msg") in DONE and record.get("delivery") == delivery_id:
            return i
    return None


def settle(
    sim: GitHubSimulator, app: AppProcess, repo: str, issue: int, *, by: str = "alice"
) -> None:
    """Every delivery so far handled and the quest run once more after them: what they
    would have changed has happened (a writer's `/scaffold status` pokes the quest)."""
    sim.comment(repo, issue, "/scaffold status", by=by)
    status = sim.deliveries_of("issue_comment", "created")[-1].delivery_id
    sim.wait_deliveries(timeout=30)
    queued = [d.delivery_id for d in sim.deliveries if d.status_code == 202]
    for delivery in queued:
        wait_for(f"delivery {delivery} handled", lambda d=delivery: _handled(app, d) is not None)

    def ran_after() -> bool | None:
        at = _handled(app, status)
        if at is None:
            return None
        later = app.log_records()[at + 1 :]
        return any(r.get("msg") == "quest run ended" for r in later) or None

    wait_for("a quest run after the status command", ran_after)


def log_mark(app: AppProcess) -> int:
    return len(app.log_records())


def reconciled(app: AppProcess, since: int, passes: int = 2) -> None:
    """``passes`` reconciliation passes finished after log record ``since``."""

    def done() -> bool | None:
        later = app.log_records()[since:]
        return sum(r.get("msg") == "reconciliation pass done" for r in later) >= passes or None

    wait_for(f"{passes} reconciliation passes", done)
