"""GitHub App credentials: the App's JWT (RS256, backdated a minute for clock drift) and
installation tokens, cached until ``refresh_margin_s`` before they expire, one refresh
at a time per installation. Neither the key nor a token is ever part of a ``repr``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from scaffold.errors import ScaffoldError

JWT_BACKDATE_S = 60
JWT_LIFETIME_S = 540  # GitHub refuses an App JWT that lives longer than 10 minutes


def load_private_key(pem: bytes) -> RSAPrivateKey:
    """Parse an App private key; a clear error (never the key itself) when it does not."""
    try:
        key = load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ScaffoldError(f"the GitHub App private key does not parse as PEM: {exc}") from None
    if not isinstance(key, RSAPrivateKey):
        raise ScaffoldError("the GitHub App private key is not an RSA key")
    return key


@dataclass(frozen=True, repr=False)
class AppCredentials:
    app_id: int
    private_key: bytes = field(repr=False)

    def __repr__(self) -> str:
        return f"AppCredentials(app_id={self.app_id})"

    def jwt(self, now: float) -> str:
        issued = int(now) - JWT_BACKDATE_S
        claims = {"iat": issued, "exp": issued + JWT_LIFETIME_S, "iss": str(self.app_id)}
        return jwt.encode(claims, load_private_key(self.private_key), algorithm="RS256")


@dataclass(frozen=True, repr=False)
class InstallationToken:
    token: str
    expires_at: float

    def __repr__(self) -> str:
        return f"InstallationToken(expires_at={self.expires_at})"

    def fresh(self, now: float, margin_s: float) -> bool:
        return now < self.expires_at - margin_s


def parse_token_response(data: Any) -> InstallationToken:
    """The body of ``POST /app/installations/{id}/access_tokens``."""
    if not isinstance(data, dict) or not isinstance(data.get("token"), str):
        raise ScaffoldError("GitHub answered an installation token request without a token")
    expires = data.get("expires_at")
    try:
        at = datetime.fromisoformat(str(expires).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ScaffoldError(f"installation token with a bad expires_at: {expires!r}") from None
    return InstallationToken(token=data["token"], expires_at=at)


class TokenCache:
    """Installation tokens by installation id, refreshed shortly before expiry."""

    def __init__(
        self,
        mint: Callable[[int], Awaitable[InstallationToken]],
        clock: Callable[[], float],
        refresh_margin_s: float = 300.0,
    ) -> None:
        self._mint = mint
        self._clock = clock
        self._margin = refresh_margin_s
        self._tokens: dict[int, InstallationToken] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def token(self, installation_id: int) -> str:
        async with self._locks.setdefault(installation_id, asyncio.Lock()):
            cached = self._tokens.get(installation_id)
            if cached is not None and cached.fresh(self._clock(), self._margin):
                return cached.token
            minted = await self._mint(installation_id)
            self._tokens[installation_id] = minted
            return minted.token
