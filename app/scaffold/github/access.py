"""How the App reaches GitHub, and who it is and listens to there.

``GitHubApp`` (client.py) is the self-hosted App. ``TokenAccess`` is the same surface
over a single token, for the GitHub Action's ``event`` mode, where the workflow's
``GITHUB_TOKEN`` stands for the installation and ``github-actions[bot]`` is the bot.

Identity, never names: ``AppIdentity`` says which App scaffold is (a check run is
scaffold's only if that App created it, whatever its name), and ``Permissions`` asks
GitHub whether a person has write access (a delivery's claims are never taken).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import aiohttp

from scaffold.errors import GitHubError
from scaffold.github.client import (
    DEFAULT_API_URL,
    AppIdentity,
    GitHubClient,
    RetryingTransport,
    repo_vars,
)
from scaffold.github.retry import RetryPolicy

ACTIONS_BOT = "github-actions[bot]"
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
PERMISSION_TTL_S = 60.0


def is_bot(user: Mapping[str, Any]) -> bool:
    login = str(user.get("login", ""))
    return user.get("type") == "Bot" or login.endswith("[bot]")


class Permissions:
    """Who may steer scaffold in one repository: people (not bots) with write access,
    asked of GitHub and remembered for ``ttl_s``."""

    def __init__(
        self,
        client: GitHubClient,
        full_name: str,
        *,
        ttl_s: float = PERMISSION_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.full_name = full_name
        self.ttl_s = ttl_s
        self._clock = clock
        self._cache: dict[str, tuple[float, bool]] = {}

    async def is_writer(self, user: Mapping[str, Any]) -> bool:
        login = str(user.get("login", ""))
        if not login or is_bot(user):
            return False
        now = self._clock()
        cached = self._cache.get(login)
        if cached is not None and now - cached[0] < self.ttl_s:
            return cached[1]
        try:
            data = await self.client.get(
                "/repos/{owner}/{repo}/collaborators/{username}/permission",
                repo_vars(self.full_name, username=login),
            )
        except GitHubError as exc:
            if exc.status == 404:
                self._cache[login] = (now, False)
                return False
            raise
        allowed = (
            data.get("permission") in WRITE_PERMISSIONS
            or data.get("role_name") in WRITE_PERMISSIONS
        )
        self._cache[login] = (now, allowed)
        return allowed


class GitHubAccess(Protocol):
    def installation(self, installation_id: int) -> GitHubClient: ...

    def identity(self) -> AppIdentity: ...

    async def bot_login(self) -> str: ...

    async def installation_ids(self) -> list[int]: ...

    async def close(self) -> None: ...


class TokenAccess:
    """Every installation is the one the token belongs to."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str = DEFAULT_API_URL,
        bot: str = ACTIONS_BOT,
        app_id: int | None = None,
    ) -> None:
        self._token = token
        self.base_url = base_url.rstrip("/")
        self._bot = bot
        # The App behind a plain token is not known up front: the first check run
        # scaffold creates with it says (and the Action keeps it for later runs).
        self._identity = AppIdentity(app_id)
        self._session: aiohttp.ClientSession | None = None
        self._client: GitHubClient | None = None

    def __repr__(self) -> str:
        return f"TokenAccess(base_url={self.base_url!r})"

    def installation(self, installation_id: int) -> GitHubClient:
        if self._client is None:
            self._session = aiohttp.ClientSession()
            transport = RetryingTransport(
                self._session, base_url=self.base_url, policy=RetryPolicy()
            )
            self._client = GitHubClient(transport, self._source)
        return self._client

    async def _source(self) -> str:
        return self._token

    def identity(self) -> AppIdentity:
        return self._identity

    async def bot_login(self) -> str:
        return self._bot

    async def installation_ids(self) -> list[int]:
        return []  # the repository of the workflow is known from its event

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
            self._client = None
