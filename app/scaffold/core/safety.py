"""Safety limits of one scaffold run: cost, time, consecutive failures, abort.

Seed 004's orchestrator checks, before any task leaves Ready, that the run is
still within its budgets ("task_selected & safety_ok"); when one is exhausted
(or a person aborts) the transition taken is ``Ready -> Idle`` on
``safety_limit_hit`` or ``abort_signal``. This module holds those rules as pure
data and functions: the ledger is a frozen value the runtime builds from the quest,
and the current time is always passed in (no clock is read here).

The limits (``safety.*`` in ``.github/scaffold.yml``):

* cost: ``max_cost_usd``, default $5.00 per run. Spent money is the sum of the
  costs the agent runs report.
* time: ``max_hours``, default 4 h of wall-clock time since the run started.
* consecutive failures: ``max_consecutive_failures``, default 3. A failure is an
  agent run or a task attempt that ended in error (crash, stuck, retries used
  up); any success resets the count.
* abort: a person asked the run to stop (``scaffold abort``, or an abort in App
  mode). An abort is sticky for the run and keeps its first reason.

A limit is hit when the figure *reaches* it (``>=``): $5.00 spent of $5.00 stops.

What :func:`check` returning ``ok=False`` means for the runtime:

* Stops: no new task starts. Tasks that are Ready go back to Idle with the
  event ``safety_limit_hit`` (a budget) or ``abort_signal`` (an abort), and the
  scheduler is not asked for more work.
* Keeps running, on a budget limit: tasks already running finish their current
  agent run (and the Ward, review and PR steps that do not start another agent),
  so no work half-written into a worktree is thrown away; they start no further
  agent run. On an abort, running agents are stopped (their process groups
  killed) and their tasks go back to Idle, worktrees kept so nothing is lost.
* Recorded: the verdict's ``reason`` is a sentence for a person (e.g. "cost
  budget reached: $5.02 spent of $5.00") and ``limit`` names the rule
  (:class:`Limit`); the runtime writes both to the quest file, shows them in
  ``scaffold status`` and in App mode on the issue, and exits with code 4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from scaffold.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_CONSECUTIVE_FAILURES",
    "DEFAULT_MAX_COST_USD",
    "DEFAULT_MAX_HOURS",
    "Limit",
    "SafetyLedger",
    "SafetyLimits",
    "SafetyVerdict",
    "check",
    "elapsed",
]

DEFAULT_MAX_COST_USD = 5.0
DEFAULT_MAX_HOURS = 4.0
DEFAULT_MAX_CONSECUTIVE_FAILURES = 3


class Limit(StrEnum):
    """Which rule stopped the run; stable names, written to the quest file."""

    ABORT = "abort"
    COST = "cost"
    TIME = "time"
    CONSECUTIVE_FAILURES = "consecutive_failures"


@dataclass(frozen=True)
class SafetyLimits:
    """The budgets of one run. Refuses values that would disable a check by accident."""

    max_cost_usd: float = DEFAULT_MAX_COST_USD
    max_hours: float = DEFAULT_MAX_HOURS
    max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES

    def __post_init__(self) -> None:
        for key, value in (("max_cost_usd", self.max_cost_usd), ("max_hours", self.max_hours)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError("safety", key, f"must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ConfigError("safety", key, f"must be a finite number >= 0, got {value!r}")
        failures = self.max_consecutive_failures
        if isinstance(failures, bool) or not isinstance(failures, int) or failures < 1:
            raise ConfigError(
                "safety", "max_consecutive_failures", f"must be an integer >= 1, got {failures!r}"
            )


@dataclass(frozen=True)
class SafetyLedger:
    """What the run has used so far.

    ``started_at`` must be timezone-aware (the quest file stores UTC instants;
    mixing naive and aware times would fail only later, at a subtraction).
    """

    cost_usd: float
    started_at: datetime
    consecutive_failures: int = 0
    aborted: bool = False
    abort_reason: str | None = None

    def __post_init__(self) -> None:
        _require_aware(self.started_at, "started_at")
        if not math.isfinite(self.cost_usd) or self.cost_usd < 0:
            raise ValueError(f"cost_usd must be a finite number >= 0, got {self.cost_usd!r}")
        if self.consecutive_failures < 0:
            raise ValueError(
                f"consecutive_failures must be >= 0, got {self.consecutive_failures!r}"
            )


@dataclass(frozen=True)
class SafetyVerdict:
    """``ok`` or why not: ``reason`` is a sentence for a person, ``limit`` the rule."""

    ok: bool
    reason: str | None = None
    limit: Limit | None = None


def elapsed(ledger: SafetyLedger, now: datetime) -> timedelta:
    """Wall-clock time used; a clock that went backwards counts as no time."""
    _require_aware(now, "now")
    return max(now - ledger.started_at, timedelta(0))


def check(limits: SafetyLimits, ledger: SafetyLedger, now: datetime) -> SafetyVerdict:
    """May a new task start? The first rule hit wins: abort, cost, time, failures."""
    if ledger.aborted:
        reason = f"aborted: {ledger.abort_reason}" if ledger.abort_reason else "aborted by a person"
        return SafetyVerdict(ok=False, reason=reason, limit=Limit.ABORT)
    if ledger.cost_usd >= limits.max_cost_usd:
        return SafetyVerdict(
            ok=False,
            reason=(
                f"cost budget reached: {_usd(ledger.cost_usd)} spent of {_usd(limits.max_cost_usd)}"
            ),
            limit=Limit.COST,
        )
    used = elapsed(ledger, now)
    budget = timedelta(hours=limits.max_hours)
    if used >= budget:
        return SafetyVerdict(
            ok=False,
            reason=f"time budget reached: {_duration(used)} elapsed of {_duration(budget)}",
            limit=Limit.TIME,
        )
    if ledger.consecutive_failures >= limits.max_consecutive_failures:
        return SafetyVerdict(
            ok=False,
            reason=(
                f"consecutive failure limit reached: {ledger.consecutive_failures}"
                f" failures in a row (limit {limits.max_consecutive_failures})"
            ),
            limit=Limit.CONSECUTIVE_FAILURES,
        )
    return SafetyVerdict(ok=True)


def _require_aware(value: datetime, name: str) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")


def _usd(amount: float) -> str:
    return f"${amount:,.2f}"


def _duration(span: timedelta) -> str:
    """``4 h 00 min``: whole minutes, rounded down (seconds only below a minute)."""
    seconds = int(span.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    hours, mins = divmod(minutes, 60)
    return f"{hours} h {mins:02d} min"
