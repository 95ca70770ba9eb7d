"""Safety limits: cost, time, consecutive failures and abort stop new work, with a reason."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaffold.core.safety import (
    Limit,
    SafetyLedger,
    SafetyLimits,
    SafetyRemaining,
    SafetyVerdict,
    abort,
    check,
    elapsed,
    new_ledger,
    record_cost,
    record_failure,
    record_success,
    remaining,
)
from scaffold.errors import ConfigError

T0 = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)
LIMITS = SafetyLimits()


def ledger(**changes: object) -> SafetyLedger:
    return dataclasses.replace(new_ledger(T0), **changes)  # type: ignore[arg-type]


def test_defaults_follow_the_design() -> None:
    limits = SafetyLimits()
    assert limits.max_cost_usd == 5.0
    assert limits.max_hours == 4.0
    assert limits.max_consecutive_failures == 3


def test_fresh_run_is_ok() -> None:
    assert check(LIMITS, new_ledger(T0), T0) == SafetyVerdict(ok=True, reason=None, limit=None)


# --- cost ---------------------------------------------------------------------------


def test_cost_accumulates_per_agent_run() -> None:
    led = record_cost(record_cost(new_ledger(T0), 1.25), 2.5)
    assert led.cost_usd == pytest.approx(3.75)
    assert check(LIMITS, led, T0).ok


def test_cost_budget_reached_stops_with_a_sentence() -> None:
    led = record_cost(record_cost(new_ledger(T0), 4.0), 1.02)
    verdict = check(LIMITS, led, T0)
    assert verdict == SafetyVerdict(
        ok=False, reason="cost budget reached: $5.02 spent of $5.00", limit=Limit.COST
    )
    assert verdict.limit == "cost"


def test_cost_exactly_at_the_budget_stops() -> None:
    verdict = check(LIMITS, record_cost(new_ledger(T0), 5.0), T0)
    assert not verdict.ok
    assert verdict.reason == "cost budget reached: $5.00 spent of $5.00"


def test_cost_just_under_the_budget_is_ok() -> None:
    assert check(LIMITS, record_cost(new_ledger(T0), 4.99), T0).ok


@pytest.mark.parametrize("usd", [-0.01, math.nan, math.inf])
def test_bad_cost_is_refused_rather_than_lifting_the_budget(usd: float) -> None:
    with pytest.raises(ValueError, match="cost"):
        record_cost(new_ledger(T0), usd)


# --- time ---------------------------------------------------------------------------


def test_time_budget_reached_stops() -> None:
    verdict = check(LIMITS, new_ledger(T0), T0 + timedelta(hours=4))
    assert verdict == SafetyVerdict(
        ok=False, reason="time budget reached: 4 h 00 min elapsed of 4 h 00 min", limit=Limit.TIME
    )


def test_time_reason_shows_minutes_over() -> None:
    verdict = check(LIMITS, new_ledger(T0), T0 + timedelta(hours=4, minutes=7, seconds=30))
    assert verdict.reason == "time budget reached: 4 h 07 min elapsed of 4 h 00 min"


def test_time_reason_below_a_minute_shows_seconds() -> None:
    limits = SafetyLimits(max_hours=10 / 3600)
    verdict = check(limits, new_ledger(T0), T0 + timedelta(seconds=12))
    assert verdict.reason == "time budget reached: 12 s elapsed of 10 s"


def test_time_just_under_the_budget_is_ok() -> None:
    assert check(LIMITS, new_ledger(T0), T0 + timedelta(hours=3, minutes=59, seconds=59)).ok


def test_time_is_measured_across_time_zones() -> None:
    plus_two = T0.astimezone(timezone(timedelta(hours=2)))
    assert elapsed(new_ledger(T0), plus_two + timedelta(hours=1)) == timedelta(hours=1)


def test_clock_going_backwards_counts_as_no_time() -> None:
    led = new_ledger(T0)
    assert elapsed(led, T0 - timedelta(hours=1)) == timedelta(0)
    assert remaining(LIMITS, led, T0 - timedelta(hours=1)).time == timedelta(hours=4)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        new_ledger(datetime(2025, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        check(LIMITS, new_ledger(T0), datetime(2025, 1, 1, 10))


# --- consecutive failures -------------------------------------------------------------


def test_three_failures_in_a_row_stop() -> None:
    led = new_ledger(T0)
    for _ in range(2):
        led = record_failure(led)
        assert check(LIMITS, led, T0).ok
    led = record_failure(led)
    assert check(LIMITS, led, T0) == SafetyVerdict(
        ok=False,
        reason="consecutive failure limit reached: 3 failures in a row (limit 3)",
        limit=Limit.CONSECUTIVE_FAILURES,
    )


def test_a_success_resets_the_failure_count() -> None:
    led = record_failure(record_failure(new_ledger(T0)))
    led = record_success(led)
    assert led.consecutive_failures == 0
    led = record_failure(record_failure(led))
    assert check(LIMITS, led, T0).ok


def test_success_without_failures_returns_the_same_ledger() -> None:
    led = new_ledger(T0)
    assert record_success(led) is led


# --- abort ----------------------------------------------------------------------------


def test_abort_stops_and_records_the_reason() -> None:
    led = abort(new_ledger(T0), "requested by @octocat")
    assert led.aborted
    assert led.abort_reason == "requested by @octocat"
    assert check(LIMITS, led, T0) == SafetyVerdict(
        ok=False, reason="aborted: requested by @octocat", limit=Limit.ABORT
    )


def test_abort_without_a_reason() -> None:
    assert check(LIMITS, abort(new_ledger(T0)), T0).reason == "aborted by a person"


def test_abort_is_sticky_and_keeps_the_first_reason() -> None:
    led = abort(abort(new_ledger(T0), "first"), "second")
    assert led.abort_reason == "first"
    led = record_success(record_cost(led, 0.1))
    assert check(LIMITS, led, T0).limit is Limit.ABORT


def test_first_rule_hit_wins_abort_cost_time_failures() -> None:
    late = T0 + timedelta(hours=5)
    led = record_failure(record_failure(record_failure(record_cost(new_ledger(T0), 6.0))))
    assert check(LIMITS, abort(led, "stop"), late).limit is Limit.ABORT
    assert check(LIMITS, led, late).limit is Limit.COST
    assert check(LIMITS, ledger(consecutive_failures=3), late).limit is Limit.TIME
    assert check(LIMITS, ledger(consecutive_failures=3), T0).limit is Limit.CONSECUTIVE_FAILURES


# --- remaining ------------------------------------------------------------------------


def test_remaining_budget() -> None:
    led = record_failure(record_cost(new_ledger(T0), 1.5))
    assert remaining(LIMITS, led, T0 + timedelta(hours=1)) == SafetyRemaining(
        cost_usd=3.5, time=timedelta(hours=3), failures=2
    )


def test_remaining_never_goes_negative() -> None:
    led = ledger(cost_usd=9.0, consecutive_failures=7)
    assert remaining(LIMITS, led, T0 + timedelta(days=1)) == SafetyRemaining(
        cost_usd=0.0, time=timedelta(0), failures=0
    )


# --- values ---------------------------------------------------------------------------


def test_updates_return_new_values_and_leave_the_old_one_alone() -> None:
    led = new_ledger(T0)
    record_cost(led, 1.0)
    record_failure(led)
    abort(led, "x")
    assert led == SafetyLedger(cost_usd=0.0, started_at=T0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        led.cost_usd = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"max_cost_usd": -1.0}, "max_cost_usd"),
        ({"max_cost_usd": math.nan}, "max_cost_usd"),
        ({"max_hours": math.inf}, "max_hours"),
        ({"max_hours": True}, "max_hours"),
        ({"max_consecutive_failures": 0}, "max_consecutive_failures"),
        ({"max_consecutive_failures": 2.5}, "max_consecutive_failures"),
    ],
)
def test_bad_limits_are_refused(kwargs: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        SafetyLimits(**kwargs)  # type: ignore[arg-type]
    assert info.value.key == key


def test_zero_budget_stops_at_once() -> None:
    limits = SafetyLimits(max_cost_usd=0.0)
    assert check(limits, new_ledger(T0), T0).limit is Limit.COST


def test_ledger_refuses_impossible_values() -> None:
    with pytest.raises(ValueError, match="cost_usd"):
        SafetyLedger(cost_usd=-1.0, started_at=T0)
    with pytest.raises(ValueError, match="consecutive_failures"):
        SafetyLedger(cost_usd=0.0, started_at=T0, consecutive_failures=-1)


# --- properties -----------------------------------------------------------------------

_EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("cost"), st.floats(min_value=0, max_value=2)),
        st.tuples(st.just("success"), st.just(0.0)),
        st.tuples(st.just("failure"), st.just(0.0)),
        st.tuples(st.just("wait"), st.floats(min_value=0, max_value=3600)),
    ),
    max_size=30,
)


@settings(deadline=None)
@given(_EVENTS)
def test_property_verdict_matches_the_ledger(events: list[tuple[str, float]]) -> None:
    led = new_ledger(T0)
    now = T0
    spent = 0.0
    streak = 0
    for kind, value in events:
        if kind == "cost":
            led = record_cost(led, value)
            spent += value
        elif kind == "success":
            led = record_success(led)
            streak = 0
        elif kind == "failure":
            led = record_failure(led)
            streak += 1
        else:
            now += timedelta(seconds=value)
        verdict = check(LIMITS, led, now)
        over = (
            spent >= LIMITS.max_cost_usd
            or now - T0 >= timedelta(hours=LIMITS.max_hours)
            or streak >= LIMITS.max_consecutive_failures
        )
        assert verdict.ok is not over
        assert (verdict.reason is None) is verdict.ok
        assert (verdict.limit is None) is verdict.ok
        left = remaining(LIMITS, led, now)
        assert left.cost_usd >= 0
        assert left.time >= timedelta(0)
        assert left.failures >= 0
        assert led.consecutive_failures == streak
