"""How the App reaches GitHub: as an App (JWT + installation tokens), or with one token.

``GitHubApp`` (client.py) is the self-hosted App. ``TokenAccess`` is the same surface
over a single token, for the GitHub Action's ``event`` mode, where the workflow's
``GITHUB_TOKEN`` stands for the installation and ``github-actions[bot]`` is the bot.
"""

from __future__ import annotations

from typing import Protocol

import aiohttp

from scaffold.github.client import DEFAULT_API_URL, GitHubClient, RetryingTransport
from scaffold.github.retry import RetryPolicy

ACTIONS_BOT = "github-actions[bot]"


class GitHubAccess(Protocol):
    def installation(self, installation_id: int) -> GitHubClient: ...

    async def bot_login(self) -> str: ...

    async def installation_ids(self) -> list[int]: ...

    async def close(self) -> None: ...


class TokenAccess:
    """Every installation is the one the token belongs to."""

    def __init__(
        self, token: str, *, base_url: str = DEFAULT_API_URL, bot: str = ACTIONS_BOT
    ) -> None:
        self._token = token
        self.base_url = base_url.rstrip("/")
        self._bot = bot
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
            token = self._token

            async def source() -> str:
                return token

            self._client = GitHubClient(transport, source)
        return self._client

    async def bot_login(self) -> str:
        return self._bot

    async def installation_ids(self) -> list[int]:
        return []  # the repository of the workflow is known from its event

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
            self._client = None
