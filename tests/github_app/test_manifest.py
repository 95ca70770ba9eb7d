"""The App's registration asks for every event the App handles, and no more power than
it uses."""

from __future__ import annotations

import json
from pathlib import Path

from scaffold.github.service import ROUTES

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "app-manifest.json"


def test_every_routed_event_is_subscribed() -> None:
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    events = set(manifest["default_events"])
    routed = {key.split(".")[0] for key in ROUTES}
    assert routed <= events, routed - events


def test_every_route_is_a_handler() -> None:
    for route in ROUTES.values():
        assert callable(route)


def test_the_app_cannot_change_workflows() -> None:
    permissions = json.loads(MANIFEST.read_text(encoding="utf-8"))["default_permissions"]
    assert "workflows" not in permissions
    for needed in ("contents", "issues", "pull_requests", "checks"):
        assert permissions[needed] == "write"
