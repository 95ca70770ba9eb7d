"""A REST client for a plain token, for the client's own tests (the product's clients
come from ``GitHubApp.installation`` and the Action's credentials)."""

from __future__ import annotations

import aiohttp

from scaffold.github.client import DEFAULT_API_URL, GitHubClient, RetryingTransport, RetryPolicy


def token_client(
    token: str, *, base_url: str = DEFAULT_API_URL
) -> tuple[GitHubClient, aiohttp.ClientSession]:
    """A client whose every call carries ``token``; close the session after."""
    session = aiohttp.ClientSession()
    transport = RetryingTransport(session, base_url=base_url, policy=RetryPolicy())

    async def source() -> str:
        return token

    return GitHubClient(transport, source), session
