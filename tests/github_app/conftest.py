from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ghsim import GitHubSimulator
from ghsim.fixture import github_sim  # noqa: F401
from scaffold.github.auth import AppCredentials
from scaffold.github.client import GitHubApp
from scaffold.github.service import AppOptions, AppService


@pytest.fixture
async def service(github_sim: GitHubSimulator, tmp_path: Path) -> AsyncIterator[AppService]:  # noqa: F811
    """The App's service in process, against the simulator (state under ``tmp_path``)."""
    credentials = AppCredentials(github_sim.app_id, github_sim.private_key_pem)
    app = GitHubApp(credentials, base_url=github_sim.url)
    svc = AppService(app, AppOptions(state_dir=tmp_path / "state"))
    yield svc
    await svc.stop()
