"""Fixtures of the server tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from webhook_support import SECRET, example

from scaffold.server.settings import ServerSettings


@pytest.fixture
def settings(tmp_path: Path) -> ServerSettings:
    return ServerSettings(
        app_id=1,
        private_key=b"unused in these tests",
        webhook_secret=SECRET,
        state_dir=tmp_path / "state",
    )


@pytest.fixture
def labeled() -> bytes:
    return example("issues/labeled.0.json")
