"""Who and what scaffold trusts on GitHub, by identity and never by name.

Only writers decide (``Permissions`` asks GitHub; a delivery's claims are never taken,
bots never count). A PR is a task's only if its head lives in the base repository itself
(a fork's branch may carry any name). An approval holds for the commit it reviewed, each
reviewer's latest decisive review counting.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from scaffold.errors import GitHubError
from scaffold.github.client import GitHubClient, repo_vars

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
PERMISSION_TTL_S = 60.0


def is_bot(user: Mapping[str, Any]) -> bool:
    login = str(user.get("login", ""))
    return user.get("type") == "Bot" or login.endswith("[bot]")


class Permissions:
    """Who may steer scaffold in one repository: people (not bots) with write access,
    asked of GitHub and remembered for ``PERMISSION_TTL_S``."""

    def __init__(self, client: GitHubClient, full_name: str) -> None:
        self.client = client
        self.full_name = full_name
        self._cache: dict[str, tuple[float, bool]] = {}

    async def is_writer(self, user: Mapping[str, Any]) -> bool:
        login = str(user.get("login", ""))
        if not login or is_bot(user):
            return False
        now = time.monotonic()
        cached = self._cache.get(login)
        if cached is not None and now - cached[0] < PERMISSION_TTL_S:
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

    async def approver(self, number: int, head_sha: str) -> str | None:
        """Who approved ``head_sha`` of pull request ``number``, read from GitHub now."""
        reviews = await self.client.get_all(
            "/repos/{owner}/{repo}/pulls/{number}/reviews",
            repo_vars(self.full_name, number=number),
        )
        return await approver_of(reviews, head_sha, self)

    async def closer(self, number: int) -> str | None:
        """The writer who closed issue or pull request ``number`` (None: not a writer)."""
        issue = await self.client.get(
            "/repos/{owner}/{repo}/issues/{number}", repo_vars(self.full_name, number=number)
        )
        closed_by = issue.get("closed_by") or {}
        return str(closed_by["login"]) if await self.is_writer(closed_by) else None


DECISIVE = frozenset({"APPROVED", "CHANGES_REQUESTED", "DISMISSED"})


def same_repository(pr: Mapping[str, Any], full_name: str) -> bool:
    """``pr``'s head branch lives in its base repository, ``full_name`` (a PR object, or
    the short form in check run payloads, whose repositories have ids but no names)."""
    head = (pr.get("head") or {}).get("repo")
    base = (pr.get("base") or {}).get("repo")
    if not isinstance(head, Mapping) or not isinstance(base, Mapping):
        return False  # a deleted fork has no head repository
    head_id, base_id = head.get("id"), base.get("id")
    if type(head_id) is not int or head_id != base_id:
        return False
    for repo in (head, base):
        name = repo.get("full_name")
        if name is not None and str(name).lower() != full_name.lower():
            return False
    return True


def _order(review: Mapping[str, Any]) -> tuple[str, int]:
    ident = review.get("id")
    return (str(review.get("submitted_at") or ""), ident if type(ident) is int else 0)


def latest_decisions(reviews: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each reviewer's latest decisive review, by login."""
    latest: dict[str, Mapping[str, Any]] = {}
    for review in sorted(reviews, key=_order):
        login = str((review.get("user") or {}).get("login", ""))
        if login and str(review.get("state", "")).upper() in DECISIVE:
            latest[login] = review
    return latest


async def approver_of(
    reviews: Iterable[Mapping[str, Any]], head_sha: str, permissions: Permissions
) -> str | None:
    """A writer whose latest decisive review approves exactly ``head_sha``, or None."""
    for login, review in latest_decisions(reviews).items():
        if (
            str(review.get("state", "")).upper() == "APPROVED"
            and review.get("commit_id") == head_sha
            and await permissions.is_writer(review.get("user") or {})
        ):
            return login
    return None
