"""App JWTs, private-key errors, secret-free reprs, and the installation token cache."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ghsim.server import GitHubSimulator
from scaffold.errors import ScaffoldError
from scaffold.github.auth import (
    AppCredentials,
    InstallationToken,
    TokenCache,
    load_private_key,
    parse_token_response,
)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> GitHubSimulator:
    """A simulator that is never started: only its App id and key pair are used."""
    return GitHubSimulator(tmp_path_factory.mktemp("keys"), webhook_secret="s", app_id=31337)


def test_jwt_verifies_with_the_simulators_public_key(keys: GitHubSimulator) -> None:
    now = 1_700_000_000.0
    token = AppCredentials(keys.app_id, keys.private_key_pem).jwt(now)
    claims = jwt.decode(
        token,
        keys.public_key_pem,
        algorithms=["RS256"],
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims["iss"] == "31337"
    assert isinstance(claims["iss"], str)
    assert 0 < claims["exp"] - claims["iat"] <= 600
    assert claims["iat"] <= now  # backdated for clock drift
    assert claims["exp"] > now


def test_a_jwt_made_now_is_accepted_by_the_simulator(keys: GitHubSimulator) -> None:
    import time

    token = AppCredentials(keys.app_id, keys.private_key_pem).jwt(time.time())
    assert keys.verify_jwt(token)
    assert not keys.verify_jwt(AppCredentials(1, keys.private_key_pem).jwt(time.time()))


def test_a_key_that_does_not_parse_is_a_clear_error_without_the_key(
    keys: GitHubSimulator,
) -> None:
    lines = keys.private_key_pem.decode().splitlines()
    body = lines[1:-1]
    mangled = "\n".join([lines[0], *body[:5], "!!!not base64!!!", *body[6:], lines[-1]])
    for pem in (mangled.encode(), b"not a key at all", b""):
        with pytest.raises(ScaffoldError) as caught:
            load_private_key(pem)
        message = str(caught.value)
        assert "private key does not parse" in message
        assert not any(line in message for line in body if len(line) > 8)
    with pytest.raises(ScaffoldError, match="does not parse"):
        AppCredentials(1, mangled.encode()).jwt(0)


def test_a_key_that_is_not_rsa_is_refused() -> None:
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(ScaffoldError, match="not an RSA key"):
        load_private_key(pem)


def test_reprs_hide_the_key_and_the_token(keys: GitHubSimulator) -> None:
    creds = AppCredentials(keys.app_id, keys.private_key_pem)
    key_line = keys.private_key_pem.decode().splitlines()[3]
    for text in (repr(creds), str(creds), f"{creds}", repr([creds])):
        assert key_line not in text
        assert "PRIVATE KEY" not in text
    assert repr(creds) == "AppCredentials(app_id=31337)"
    token = InstallationToken("ghs_" + "s3cr3t" * 6, 1234.0)
    for text in (repr(token), str(token), repr({"t": token})):
        assert "s3cr3t" not in text
        assert "ghs_" not in text


def test_token_response_is_parsed_and_checked() -> None:
    token = parse_token_response({"token": "ghs_abc", "expires_at": "2030-01-01T00:00:00Z"})
    assert token.token == "ghs_abc"
    assert token.expires_at == 1893456000.0
    with pytest.raises(ScaffoldError, match="without a token"):
        parse_token_response({"expires_at": "2030-01-01T00:00:00Z"})
    with pytest.raises(ScaffoldError, match="without a token"):
        parse_token_response(["ghs_abc"])
    with pytest.raises(ScaffoldError, match="bad expires_at") as caught:
        parse_token_response({"token": "ghs_abc", "expires_at": "tomorrow"})
    assert "ghs_abc" not in str(caught.value)


def test_fresh_means_before_expiry_minus_the_margin() -> None:
    token = InstallationToken("t", expires_at=1000.0)
    assert token.fresh(699.0, 300.0)
    assert not token.fresh(700.0, 300.0)
    assert not token.fresh(1001.0, 0.0)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Minter:
    """Mints numbered tokens that live ``ttl`` seconds from the clock's now."""

    def __init__(self, clock: Callable[[], float], ttl: float = 3600.0) -> None:
        self.clock = clock
        self.ttl = ttl
        self.calls: Counter[int] = Counter()

    async def __call__(self, installation_id: int) -> InstallationToken:
        self.calls[installation_id] += 1
        await asyncio.sleep(0.01)  # let concurrent callers pile up behind the refresh
        n = self.calls[installation_id]
        return InstallationToken(f"tok-{installation_id}-{n}", self.clock() + self.ttl)


async def test_a_token_is_cached_until_the_refresh_margin_then_refreshed() -> None:
    clock = Clock(10_000.0)
    mint = Minter(clock, ttl=3600.0)
    cache = TokenCache(mint, clock, refresh_margin_s=300.0)
    assert await cache.token(7) == "tok-7-1"
    clock.advance(3299)  # one second before the margin
    assert await cache.token(7) == "tok-7-1"
    assert mint.calls[7] == 1
    clock.advance(1)  # exactly at expiry - margin
    assert await cache.token(7) == "tok-7-2"
    assert await cache.token(7) == "tok-7-2"
    assert mint.calls[7] == 2


async def test_concurrent_callers_for_one_installation_mint_once() -> None:
    clock = Clock(0.0)
    mint = Minter(clock)
    cache = TokenCache(mint, clock)
    tokens = await asyncio.gather(*(cache.token(1) for _ in range(20)))
    assert set(tokens) == {"tok-1-1"}
    assert mint.calls == Counter({1: 1})
    clock.advance(3400)
    tokens = await asyncio.gather(*(cache.token(1) for _ in range(20)))
    assert set(tokens) == {"tok-1-2"}
    assert mint.calls == Counter({1: 2})


async def test_installations_have_separate_tokens() -> None:
    clock = Clock(0.0)
    mint = Minter(clock)
    cache = TokenCache(mint, clock)
    tokens = await asyncio.gather(*(cache.token(i % 3 + 1) for i in range(30)))
    assert Counter(tokens) == Counter({"tok-1-1": 10, "tok-2-1": 10, "tok-3-1": 10})
    assert mint.calls == Counter({1: 1, 2: 1, 3: 1})


async def test_a_failed_mint_is_not_cached_and_does_not_wedge_the_lock() -> None:
    clock = Clock(0.0)
    attempts: list[int] = []

    async def flaky(installation_id: int) -> InstallationToken:
        attempts.append(installation_id)
        if len(attempts) == 1:
            raise ScaffoldError("GitHub said no")
        return InstallationToken("ok", clock() + 3600)

    cache = TokenCache(flaky, clock)
    with pytest.raises(ScaffoldError):
        await cache.token(5)
    assert await asyncio.wait_for(cache.token(5), timeout=5) == "ok"
    assert attempts == [5, 5]
