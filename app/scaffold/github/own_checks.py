"""scaffold's own ``scaffold/diagram-check`` run: one per head, by scaffold's own App."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scaffold.errors import GitHubError
from scaffold.github.client import AppIdentity, GitHubClient, repo_vars
from scaffold.github.comments import CHECK_NAME

# A run left in progress longer than this (its server died mid-check) counts as none.
STALE_CHECK_S = 15 * 60


async def already_checked(
    client: GitHubClient, repo_vars: Mapping[str, str | int], sha: str, app: AppIdentity
) -> bool:
    """A current run of scaffold's own App exists for this commit (one of the same name
    from any other App or workflow does not count)."""
    try:
        runs = await client.get_all(
            "/repos/{owner}/{repo}/commits/{ref}/check-runs{?check_name,filter}",
            {**repo_vars, "ref": sha, "check_name": CHECK_NAME, "filter": "all"},
            key="check_runs",
        )
    except GitHubError:
        return False
    now = time.time()
    return any(r.get("name") == CHECK_NAME and app.owns(r) and _current(r, now) for r in runs)


def _current(run: Mapping[str, Any], now: float) -> bool:
    if run.get("status") == "completed":
        return True
    try:
        started = datetime.fromisoformat(str(run.get("started_at"))).timestamp()
    except ValueError:
        return False
    return now - started < STALE_CHECK_S


async def start_check(
    client: GitHubClient,
    app: AppIdentity,
    full_name: str,
    sha: str,
    data: Mapping[str, Any],
    *,
    force: bool = False,
) -> Any | None:
    """Create scaffold's check run on ``sha`` with ``data``; None when this process or
    GitHub has one already (``force``, a re-run a person asked for: always)."""
    # The quest's report and the pull request handler may both be at this head now: the
    # claim in this process settles which one creates the run, before any API call.
    claimed = app.claim_check(full_name, sha)
    if not force and not claimed:
        return None
    where = repo_vars(full_name)
    try:
        if not force and await already_checked(client, where, sha, app):
            return None
        run = await client.post(
            "/repos/{owner}/{repo}/check-runs",
            where,
            data={"name": CHECK_NAME, "head_sha": sha, **data},
        )
    except BaseException:
        app.release_check(full_name, sha)
        raise
    app.learn(run)
    return run
