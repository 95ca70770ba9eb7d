"""Who scaffold listens to on GitHub, and the Action's access over a single token.

``Permissions`` asks GitHub whether a person has write access (a delivery's claims are
never taken). ``TokenAccess`` is ``GitHubApp``'s surface over the workflow's
``GITHUB_TOKEN`` (the Action's ``event`` mode), with ``github-actions[bot]`` as the bot.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from scaffold.errors import GitHubError
from scaffold.github.client import DEFAULT_API_URL, GitHubAccess, GitHubClient, repo_vars

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


class TokenAccess(GitHubAccess):
    """Every installation is the one the token belongs to."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str = DEFAULT_API_URL,
        bot: str = ACTIONS_BOT,
        app_id: int | None = None,
    ) -> None:
        # The App behind a plain token is not known up front: the first check run
        # scaffold creates with it says (and the Action keeps it for later runs).
        super().__init__(base_url=base_url, app_id=app_id)
        self._token = token
        self._bot = bot

    def __repr__(self) -> str:
        return f"TokenAccess(base_url={self.base_url!r})"

    def installation(self, installation_id: int) -> GitHubClient:
        if not self._clients:
            self._clients[0] = GitHubClient(self.transport(), self._source)
        return self._clients[0]

    async def _source(self) -> str:
        return self._token

    async def bot_login(self) -> str:
        return self._bot

    async def installation_ids(self) -> list[int]:
        return []  # the repository of the workflow is known from its event
