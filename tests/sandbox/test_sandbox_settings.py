"""Which sandbox is in force: the mode, the machine, and who may run without one."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaffold.config import SandboxConfig
from scaffold.errors import SandboxError
from scaffold.sandbox.settings import ENV_READABLE, ENV_WRITABLE, find_bwrap, resolve_sandbox


def _none() -> Path | None:
    return None


def _broken() -> Path:
    return Path("/bin/false")  # runs, but makes no namespaces


def test_the_bundled_bubblewrap_works_here() -> None:
    sandbox = resolve_sandbox(SandboxConfig(), strict=True)
    assert sandbox.active
    assert sandbox.bwrap == find_bwrap()
    assert "bwrap" in sandbox.describe()


def test_off_written_out_is_honoured_even_where_strict() -> None:
    sandbox = resolve_sandbox(SandboxConfig(mode="off"), strict=True, finder=_none)
    assert not sandbox.active
    assert sandbox.reason == "sandbox.mode: off"


@pytest.mark.parametrize("finder", [_none, _broken])
def test_the_app_and_the_action_refuse_without_a_sandbox(finder: object) -> None:
    with pytest.raises(SandboxError, match=r"sandbox: \{mode: off\}"):
        resolve_sandbox(SandboxConfig(), strict=True, finder=finder)  # type: ignore[arg-type]


def test_bwrap_mode_refuses_even_locally() -> None:
    with pytest.raises(SandboxError, match="not installed"):
        resolve_sandbox(SandboxConfig(mode="bwrap"), strict=False, finder=_none)


def test_the_local_cli_warns_once_and_runs_without_one() -> None:
    heard: list[str] = []
    for _ in range(3):
        sandbox = resolve_sandbox(SandboxConfig(), strict=False, warn=heard.append, finder=_broken)
        assert not sandbox.active
    assert len(heard) == 1
    assert "WITHOUT a sandbox" in heard[0]


def test_operator_paths_come_from_the_environment(tmp_path: Path) -> None:
    env = {ENV_READABLE: f"{tmp_path}/a:{tmp_path}/b", ENV_WRITABLE: str(tmp_path / "c")}
    sandbox = resolve_sandbox(SandboxConfig(mode="off"), strict=False, environ=env)
    assert sandbox.readable == (tmp_path / "a", tmp_path / "b")
    assert sandbox.writable == (tmp_path / "c",)
