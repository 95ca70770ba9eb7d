"""Shared pieces for the GitHub client tests: the simulator, a fake clock and a fake sleep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from ghsim.fixture import github_sim  # noqa: F401
from ghsim.server import GitHubSimulator
from scaffold.github.auth import AppCredentials
from scaffold.github.client import GitHubApp, RetryPolicy

OWNER, NAME = "octo", "demo"
REPO = f"{OWNER}/{NAME}"


@dataclass
class FakeClock:
    """Epoch seconds that only move when told to (starts at the real time, whole seconds)."""

    now: float = field(default_factory=lambda: float(int(time.time())))

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakeSleep:
    """Records every requested wait and returns at once (never a real long sleep)."""

    delays: list[float] = field(default_factory=list)

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


@dataclass
class Site:
    sim: GitHubSimulator
    installation_id: int
    issue: int


@pytest.fixture
def site(github_sim: GitHubSimulator) -> Site:  # noqa: F811
    sim = github_sim
    sim.create_repo(OWNER, NAME, {"README.md": "hello\n"})
    sim.set_permission(REPO, "alice", "write")
    inst = sim.install(OWNER, [NAME])
    number = sim.open_issue(REPO, "Add a greeting", "Please greet", "alice")
    return Site(sim, inst, number)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sleeps() -> FakeSleep:
    return FakeSleep()


FAST = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05, timeout_s=10.0)


@pytest.fixture
async def app(site: Site, clock: FakeClock, sleeps: FakeSleep) -> AsyncIterator[GitHubApp]:
    gh = GitHubApp(
        AppCredentials(site.sim.app_id, site.sim.private_key_pem),
        base_url=site.sim.url,
        policy=FAST,
        clock=clock,
        sleep=sleeps,
    )
    yield gh
    await gh.close()
