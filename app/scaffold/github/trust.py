"""What scaffold accepts from GitHub as a decision, by identity and never by name: a PR
is a task's only if its head lives in the base repository itself; an approval holds for
the commit it reviewed, each reviewer's latest decisive review counting; only writers
decide (``Permissions``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scaffold.github.access import Permissions
from scaffold.github.client import GitHubClient, UrlVars

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


async def approved_head(
    client: GitHubClient,
    repo_vars: UrlVars,
    number: int,
    head_sha: str,
    permissions: Permissions,
) -> str | None:
    """Who approved ``head_sha`` of pull request ``number``, read from GitHub now."""
    reviews = await client.get_all(
        "/repos/{owner}/{repo}/pulls/{number}/reviews", {**repo_vars, "number": number}
    )
    return await approver_of(reviews, head_sha, permissions)
