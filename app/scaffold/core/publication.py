"""When the quest's state goes to the state branch: a pure decision.

The journal under ``.scaffold/`` records every transition (crash-safe, local); the
state branch is what outlives the machine and what people read with ``git log``. A
commit per transition would make that log noise and cost a git call (and, for the
App, a push) each time, so the quest is published:

* at once when a person is now waited on (a new question, a pull request waiting for
  approval) and when the quest's phase changed;
* when a task merged, at once unless the last publication is less than ``merge_gap_s``
  old (then once it is): with several slots merges come in bursts, and one state
  commit covers a burst;
* otherwise at most every ``interval_s`` seconds while something changed;
* and always at the end of a run (the caller's last publication).

The returned reason is the state commit's subject, so the branch's log reads as the
quest's story.
"""

from __future__ import annotations

from scaffold.core.states import Lifecycle
from scaffold.quest.model import Quest


def _waiting_for_approval(quest: Quest) -> set[str]:
    return {
        t.id
        for t in quest.tasks.values()
        if t.state in (Lifecycle.PR_CREATED, Lifecycle.MERGING)
        and t.pr is not None
        and t.pr.approved_by is None
    }


def _merged(quest: Quest) -> set[str]:
    return {t.id for t in quest.tasks.values() if t.outcome == "merged"}


def publish_reason(
    published: Quest | None,
    current: Quest,
    elapsed_s: float,
    interval_s: float,
    merge_gap_s: float = 0.0,
) -> str | None:
    """Why ``current`` should be published now (None: not yet, or nothing new)."""
    if published is None:
        return f"{current.id}: {current.phase.value}"
    if published is current or (published.seq == current.seq and published == current):
        return None
    asked = {q.id for q in current.pending_questions()} - {
        q.id for q in published.pending_questions()
    }
    if asked:
        return f"{current.id}: asks {', '.join(sorted(asked))}"
    merged = _merged(current) - _merged(published)
    if current.phase is not published.phase:
        # A new phase goes at once, with the merges that waited for the gap.
        also = f"; merged {', '.join(sorted(merged))}" if merged else ""
        return f"{current.id}: {current.phase.value}{also}"
    if merged and elapsed_s >= merge_gap_s:
        return f"{current.id}: merged {', '.join(sorted(merged))}"
    approval = _waiting_for_approval(current) - _waiting_for_approval(published)
    if approval:
        return f"{current.id}: {', '.join(sorted(approval))} waits for approval"
    if elapsed_s >= interval_s:
        return f"{current.id}: progress"
    return None
