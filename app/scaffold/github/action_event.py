"""The Action's ``event`` mode: one workflow run handles one event the way the App would,
with the workflow's ``GITHUB_TOKEN`` standing for the installation; a ``schedule`` or
``workflow_dispatch`` event runs the reconciliation pass instead. The quests live on the
state branch, so the state folder (kept with ``actions/cache``) is only a speed-up; it
also keeps which App the token belongs to, so a later run knows scaffold's own
``scaffold/diagram-check`` from one of the same name that anything else reported.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scaffold.errors import UsageError
from scaffold.github.client import DEFAULT_API_URL, TokenAccess
from scaffold.github.service import AppOptions, AppService
from scaffold.server.delivery import Delivery

log = logging.getLogger("scaffold.app")

RECONCILE_EVENTS = frozenset({"schedule", "workflow_dispatch", "repository_dispatch"})
APP_ID_FILE = "token-app-id"


def _known_app_id(state_dir: Path) -> int | None:
    try:
        text = (state_dir / APP_ID_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def delivery_from_actions(environ: Mapping[str, str]) -> Delivery:
    """The triggering event of a workflow run, as a delivery."""
    event = environ.get("GITHUB_EVENT_NAME", "")
    path = environ.get("GITHUB_EVENT_PATH", "")
    if not event or not path:
        raise UsageError(
            "GITHUB_EVENT_NAME and GITHUB_EVENT_PATH are required (run inside a workflow)"
        )
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the event payload {path}: {exc}") from None
    if not isinstance(payload, dict):
        raise UsageError(f"the event payload {path} is not a JSON object")
    repo = environ.get("GITHUB_REPOSITORY", "")
    if "repository" not in payload and repo:
        payload["repository"] = {"full_name": repo}
    installation = payload.get("installation")
    inst_id = installation.get("id") if isinstance(installation, dict) else None
    action = payload.get("action")
    run = f"{environ.get('GITHUB_RUN_ID', '0')}-{environ.get('GITHUB_RUN_ATTEMPT', '1')}"
    return Delivery(
        id=f"actions-{run}",
        event=event,
        action=action if isinstance(action, str) else None,
        payload=payload,
        installation_id=inst_id if isinstance(inst_id, int) else 0,
        received_at=time.time(),
    )


async def run_event(environ: Mapping[str, str], state_dir: Path) -> dict[str, Any]:
    """Handle the workflow's event, run what it started, and say what happened."""
    token = environ.get("GITHUB_TOKEN") or environ.get("INPUT_GITHUB_TOKEN") or ""
    if not token:
        raise UsageError("GITHUB_TOKEN is required (pass `github-token: ${{ github.token }}`)")
    delivery = delivery_from_actions(environ)
    state_dir.mkdir(parents=True, exist_ok=True)
    # The action keeps the state folder in the workspace (a cache path that is the same
    # on every run): it ignores itself, so no checkout there ever commits it.
    ignore = state_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")
    known = _known_app_id(state_dir)
    access = TokenAccess(
        token, base_url=environ.get("GITHUB_API_URL") or DEFAULT_API_URL, app_id=known
    )
    service = AppService(
        access,
        AppOptions(state_dir=state_dir, status_interval_s=5.0, reconcile_interval_s=24 * 3600.0),
    )
    try:
        if delivery.event in RECONCILE_EVENTS:
            await service.open_repo(str(delivery.payload["repository"]["full_name"]), 0)
            await service.reconcile()
        else:
            await service.handle(delivery)
        await service.runner.wait_idle()
    finally:
        await service.stop()
        learnt = access.identity().app_id
        if learnt is not None and learnt != known:
            (state_dir / APP_ID_FILE).write_text(f"{learnt}\n", encoding="utf-8")
    outcome = {
        "event": delivery.event,
        "action": delivery.action,
        "handled": dict(service.handled),
        "runs": service.runner.runs_finished,
    }
    log.info("event handled", extra=outcome)
    return outcome
