"""Whether scaffold's own App has checked a commit already (``scaffold/diagram-check``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scaffold.errors import GitHubError
from scaffold.github.client import AppIdentity, GitHubClient
from scaffold.github.comments import CHECK_NAME


async def already_checked(
    client: GitHubClient, repo_vars: Mapping[str, str | int], sha: str, app: AppIdentity
) -> bool:
    """A ``scaffold/diagram-check`` run of scaffold's own App exists for this commit,
    completed or still running (one of the same name from any other App or workflow does
    not count). A run left in progress longer than ``STALE_CHECK_S`` (its server died
    mid-check) does not count either, so the head is checked again."""
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


STALE_CHECK_S = 15 * 60


def _current(run: Mapping[str, Any], now: float) -> bool:
    if run.get("status") == "completed":
        return True
    try:
        started = datetime.fromisoformat(str(run.get("started_at"))).timestamp()
    except ValueError:
        return False
    return now - started < STALE_CHECK_S
