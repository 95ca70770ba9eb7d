"""``scaffold action slot``: nothing the agent wrote runs where the push credentials are.

A runner's job as GitHub runs it: ``actions/checkout`` (v4) clones over authenticated
HTTP and leaves ``http.<server>/.extraheader`` in ``.git/config``; then the slot runs
the agent in that checkout and pushes. The origin is the GitHub simulator's git
server, which refuses anything without the token, so a push that lands proves the
credential was carried in memory. The agent runs without a sandbox (``sandbox: off``,
the worst case) and plants, the way any program in the checkout could, hooks,
``core.fsmonitor``, filter drivers, URL rewrites and includes; scaffold runs
capability-less, as a same-user process on a runner would be.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from actionkit import Step, example

from credtrap import ENVIRON_PROBE, Trap, capless, evil_script, leaks
from ghsim import GitHubSimulator
from ghsim.fixture import github_sim  # noqa: F401
from git.gitrepo import git
from scaffold.demo.scripted import agent_command

REPO = "acme/widgets"
COMPLETE = {"signal": {"signal": "complete", "summary": "did the work"}}
BRANCH = "scaffold/task-5"


class Job:
    """One runner job: the checkout actions/checkout leaves, and the slot step."""

    def __init__(self, sim: GitHubSimulator, tmp: Path) -> None:
        self.sim = sim
        self.tmp = tmp
        sim.add_user("alice")
        files = {
            "README.md": "# widgets\n",
            ".github/scaffold.yml": json.dumps({"sandbox": {"mode": "off"}}) + "\n",
        }
        sim.create_repo("acme", "widgets", files)
        sim.install("acme", ["widgets"])
        self.token = sim.installation_token(REPO)
        basic = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        self.header = f"AUTHORIZATION: basic {basic}"
        self.secrets = (self.token, basic)
        self.workspace = tmp / "work"
        url = sim.repo(REPO).clone_url
        git(tmp, "-c", f"http.extraheader={self.header}", "clone", "-q", url, "work")
        git(self.workspace, "config", "--local", f"http.{sim.urls.git}/.extraheader", self.header)
        self.script = tmp / "agent-script.json"
        self.evil = tmp / "evil"
        self.probe = tmp / "probe.json"
        self.step = Step(
            tmp / "step",
            self.workspace,
            "workflow_dispatch",
            example("workflow_dispatch", "_.0.json"),
            extra_env={
                "SCAFFOLD_AGENT_SCRIPT": str(self.script),
                "SCAFFOLD_AGENT_STATE": str(tmp / "agent-state"),
                "GITHUB_TOKEN": self.token,
            },
        )

    def play(self, *actions: dict[str, Any]) -> None:
        runs = [{"actions": [*actions, COMPLETE]}]
        self.script.write_text(json.dumps(runs), encoding="utf-8")

    def run(self) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "scaffold", "action", "slot"]
        argv += ["--task-id", "5", "--role", "codeweaver"]
        argv += ["--agent-command", json.dumps(agent_command())]
        return subprocess.run(
            [*capless(), *argv],
            cwd=self.workspace,
            env=self.step.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def local_config(self) -> str:
        listed = git(self.workspace, "config", "--local", "--name-only", "--list")
        return (self.workspace / ".git" / "config").read_text().lower() + listed.lower()

    @property
    def out(self) -> Path:
        return self.step.runner_temp / "scaffold-slot"

    def outcome(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.out / "outcome.json").read_text())
        return data

    def pushed(self) -> str | None:
        return self.sim.repo(REPO).branch_sha(BRANCH)

    def leaks(self, proc: subprocess.CompletedProcess[str], *more: Path | bytes) -> list[str]:
        printed = (proc.stdout + proc.stderr).encode()
        config = self.workspace / ".git" / "config"
        return leaks(self.secrets, printed, self.out, self.evil, config, *more)


@pytest.fixture
def job(github_sim: GitHubSimulator, tmp_path: Path) -> Job:  # noqa: F811
    return Job(github_sim, tmp_path)


def sh(command: str) -> dict[str, Any]:
    return {"run": ["sh", "-c", command]}


def test_push_uses_credentials_from_memory_and_planted_hooks_never_run(job: Job) -> None:
    script, marker = evil_script(job.evil, "hook")
    hooks = "pre-push pre-commit post-commit reference-transaction pre-auto-gc post-checkout"
    job.play(
        # the agent works in a worktree: the hooks folder is the common git dir's
        sh(
            'd="$(git rev-parse --git-common-dir)/hooks"; '
            f'for h in {hooks}; do cp {script} "$d/$h"; chmod +x "$d/$h"; done'
        ),
        {"write": "hello.txt", "content": "hi\n"},
        {"run": [sys.executable, "-c", ENVIRON_PROBE, str(job.probe)]},
    )
    proc = job.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (job.workspace / ".git" / "hooks" / "pre-push").exists()  # planted for real
    assert not marker.exists()
    head = job.pushed()
    assert head == job.outcome()["head_sha"]
    assert job.sim.repo(REPO).file_at(BRANCH, "hello.txt") == b"hi\n"
    # the credential that pushed is nowhere in the config any more
    config = job.workspace / ".git" / "config"
    assert "extraheader" not in config.read_text().lower()

    # scaffold is non-dumpable: the agent's child cannot read its environment
    probe = json.loads(job.probe.read_text())
    assert probe["scaffold_pid"] is not None
    assert probe.get("error") == "PermissionError", probe.get("scaffold_environ", "")[:200]
    assert probe["agent_readable"] is True
    assert "GITHUB_TOKEN" not in probe["own_env"]
    assert job.leaks(proc, job.probe) == []


def test_fsmonitor_planted_by_the_agent_never_runs(job: Job) -> None:
    script, marker = evil_script(job.evil, "fsmonitor")
    job.play(
        sh(f"git config core.fsmonitor {script}"),
        {"write": "hello.txt", "content": "hi\n"},
    )
    proc = job.run()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "fsmonitor" in job.local_config()  # planted for real
    failure = job.outcome()["failure"]
    assert "core.fsmonitor" in failure
    assert str(script) not in failure
    assert not marker.exists()
    assert job.pushed() is None
    assert job.leaks(proc) == []


def test_filter_in_the_repository_config_is_refused(job: Job) -> None:
    script, marker = evil_script(job.evil, "filter", passthrough=True)
    job.play(
        {"write": ".gitattributes", "content": "* filter=evil\n"},
        sh(f"git config filter.evil.clean {script} && git config filter.evil.smudge {script}"),
        {"write": "hello.txt", "content": "hi\n"},
    )
    proc = job.run()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "filter.evil.clean" in job.local_config()  # planted for real
    assert "filter.evil." in job.outcome()["failure"]
    assert not marker.exists()
    assert job.pushed() is None
    assert job.leaks(proc) == []


def test_filter_in_the_global_config_is_not_read(job: Job) -> None:
    # the agent shares the runner's HOME: it can write the global config
    script, marker = evil_script(job.evil, "filter", passthrough=True)
    global_config = job.step.env()["GIT_CONFIG_GLOBAL"]
    job.play(
        {"write": ".gitattributes", "content": "* filter=evil\n"},
        sh(f"printf '[filter \"evil\"]\\n\\tclean = {script}\\n' >> {global_config}"),
        {"write": "hello.txt", "content": "hi\n"},
    )
    proc = job.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "evil" in Path(global_config).read_text()  # planted for real
    assert not marker.exists()
    assert job.sim.repo(REPO).file_at(BRANCH, "hello.txt") == b"hi\n"
    assert job.leaks(proc) == []


REDIRECTS = {
    "insteadOf": "git config url.{trap}/git/.insteadOf {github}/",
    "pushInsteadOf": "git config url.{trap}/git/.pushInsteadOf {github}/",
    "include.path": "git config include.path {extra}",
    "includeIf": "git config includeIf.gitdir:{work}/.git/.path {extra}",
    "http.proxy": "git config http.proxy {trap}",
    "credential.helper": "git config credential.helper '!{script}'",
    "core.sshCommand": "git config core.sshCommand {script}",
}


@pytest.mark.parametrize("how", list(REDIRECTS))
def test_config_that_redirects_the_push_is_refused(job: Job, how: str) -> None:
    script, marker = evil_script(job.evil, "planted")
    with Trap() as trap:
        extra = job.evil / "extra.config"
        extra.write_text(f'[url "{trap.url}/git/"]\n\tinsteadOf = {job.sim.urls.git}/\n')
        command = REDIRECTS[how].format(
            trap=trap.url, github=job.sim.urls.git, extra=extra, work=job.workspace, script=script
        )
        job.play(sh(command), {"write": "hello.txt", "content": "hi\n"})
        proc = job.run()
        assert proc.returncode == 1, proc.stdout + proc.stderr
        planted = command.split()[2].lower()
        assert planted in job.local_config()  # planted for real
        failure = job.outcome()["failure"]
        assert "refusing to run it" in failure
        assert planted in failure.lower()
        assert trap.connections == 0
        assert not marker.exists()
        assert job.pushed() is None
        assert job.leaks(proc, trap.received) == []


def test_origin_rewritten_by_the_agent_is_not_where_the_push_goes(job: Job) -> None:
    with Trap() as trap:
        job.play(
            sh(f"git remote set-url origin {trap.url}/git/evil/widgets.git"),
            {"write": "hello.txt", "content": "hi\n"},
        )
        proc = job.run()
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert trap.connections == 0
        assert job.sim.repo(REPO).file_at(BRANCH, "hello.txt") == b"hi\n"
        assert job.leaks(proc, trap.received) == []
