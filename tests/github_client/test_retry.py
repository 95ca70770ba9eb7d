"""The retry policy, rule by rule: what is retried, after how long, and when it gives up."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaffold.github.client import RetryPolicy, describe, retry_delay

NOW = 1_700_000_000.0
POLICY = RetryPolicy(max_attempts=6, base_delay_s=0.5, max_delay_s=4.0, max_wait_s=900.0)


def delay(
    status: int | None, headers: dict[str, str] | None = None, attempt: int = 1
) -> float | None:
    return retry_delay(POLICY, attempt, status, headers or {}, NOW)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_errors_back_off_doubling_up_to_the_cap(status: int) -> None:
    delays = [delay(status, attempt=n) for n in range(1, 6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0]


def test_no_response_at_all_is_retried_with_backoff() -> None:
    assert delay(None, attempt=1) == 0.5
    assert delay(None, attempt=3) == 2.0


def test_max_attempts_stops_every_kind_of_retry() -> None:
    assert delay(502, attempt=5) == 4.0
    assert delay(502, attempt=6) is None
    assert delay(None, attempt=6) is None
    assert delay(429, {"Retry-After": "1"}, attempt=6) is None
    one = RetryPolicy(max_attempts=1)
    assert retry_delay(one, 1, 503, {}, NOW) is None


def test_429_waits_what_retry_after_says() -> None:
    assert delay(429, {"Retry-After": "7"}) == 7.0
    assert delay(429, {"Retry-After": " 0 "}) == 0.0


def test_429_without_any_hint_backs_off() -> None:
    assert delay(429, attempt=2) == 1.0


def test_403_with_retry_after_is_a_secondary_limit() -> None:
    assert delay(403, {"Retry-After": "60"}) == 60.0
    assert "secondary rate limit" in describe(403, {"Retry-After": "60"})


def test_retry_after_longer_than_max_wait_gives_up() -> None:
    assert delay(429, {"Retry-After": "901"}) is None
    assert delay(403, {"Retry-After": "-5"}) is None


def test_primary_limit_with_a_reset_in_the_future_waits_until_just_after_it() -> None:
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 120)}
    assert delay(403, headers) == 121.0
    assert delay(429, headers) == 121.0
    assert describe(403, headers) == "primary rate limit (403)"


def test_primary_limit_with_a_reset_in_the_past_waits_one_second() -> None:
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) - 30)}
    assert delay(403, headers) == 1.0


def test_primary_limit_resetting_beyond_max_wait_gives_up() -> None:
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 3600)}
    assert delay(403, headers) is None


def test_primary_limit_without_a_reset_backs_off() -> None:
    assert delay(403, {"X-RateLimit-Remaining": "0"}, attempt=2) == 1.0


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 422])
def test_plain_client_errors_are_not_retried(status: int) -> None:
    assert delay(status) is None
    # Remaining quota left: a 403 is a permission problem, not a limit.
    assert delay(status, {"X-RateLimit-Remaining": "4999", "X-RateLimit-Reset": "1"}) is None


def test_header_names_are_case_insensitive() -> None:
    assert delay(429, {"retry-after": "3"}) == 3.0
    assert delay(429, {"RETRY-AFTER": "3"}) == 3.0
    headers = {"x-ratelimit-remaining": "0", "X-RATELIMIT-RESET": str(int(NOW) + 10)}
    assert delay(403, headers) == 11.0


@pytest.mark.parametrize("garbage", ["soon", "", "Wed, 21 Oct 2015 07:28:00 GMT", "1e400x"])
def test_garbage_retry_after_falls_back_to_the_other_rules(garbage: str) -> None:
    # 429 still backs off; a 403 with nothing else to go on is not retried.
    assert delay(429, {"Retry-After": garbage}, attempt=1) == 0.5
    assert delay(403, {"Retry-After": garbage}) is None


def test_non_finite_retry_after_is_not_waited_out() -> None:
    assert delay(429, {"Retry-After": "nan"}) is None
    assert delay(429, {"Retry-After": "inf"}) is None


def test_describe_names_the_failure() -> None:
    assert describe(None, {}) == "no response"
    assert describe(502, {}) == "HTTP 502"


header_values = st.one_of(
    st.none(),
    st.text(max_size=12),
    st.integers(-(10**6), 10**10).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
)


@given(
    attempt=st.integers(-3, 10_000),
    max_attempts=st.integers(1, 10_000),
    status=st.one_of(st.none(), st.integers(100, 599)),
    retry_after=header_values,
    remaining=st.sampled_from([None, "0", "1", "garbage"]),
    reset=header_values,
    base=st.floats(0, 60),
    cap=st.floats(0, 600),
    max_wait=st.floats(0, 3600),
    now=st.floats(0, 4e9),
)
def test_delay_is_never_negative_nor_above_the_largest_bound(
    attempt: int,
    max_attempts: int,
    status: int | None,
    retry_after: str | None,
    remaining: str | None,
    reset: str | None,
    base: float,
    cap: float,
    max_wait: float,
    now: float,
) -> None:
    policy = RetryPolicy(
        max_attempts=max_attempts, base_delay_s=base, max_delay_s=cap, max_wait_s=max_wait
    )
    headers = {
        name: value
        for name, value in (
            ("Retry-After", retry_after),
            ("X-RateLimit-Remaining", remaining),
            ("X-RateLimit-Reset", reset),
        )
        if value is not None
    }
    result = retry_delay(policy, attempt, status, headers, now)
    if result is not None:
        assert 0 <= result <= max(cap, max_wait)
    if attempt >= max_attempts:
        assert result is None
