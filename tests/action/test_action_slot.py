"""``scaffold action slot`` with the scripted agent, a bare ``origin`` and a real checkout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from actionkit import Repo, Step, example

from git.gitrepo import git
from sandboxing import Evidence, expect_all_blocked, hostile_run, listening
from scaffold.demo.scripted import agent_command
from scaffold.demo.scripted import agent_env as scripted_agent_env

TOKEN = "ghs_" + "S3cr3tT0k3nValue" * 2
HEADER = "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46c2VjcmV0"


class Slot:
    """A checkout with a bare origin, an agent script and a step to run the slot in."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.origin = tmp_path / "origin.git"
        git(tmp_path, "init", "-q", "--bare", "-b", "main", str(self.origin))
        self.repo = Repo.create(tmp_path / "work")
        self.repo.git("remote", "add", "origin", str(self.origin))
        self.repo.git("push", "-q", "origin", "main")
        self.base = self.repo.head()
        self.script = tmp_path / "agent-script.json"
        self.state = tmp_path / "agent-state"
        self.step = Step(
            tmp_path / "step",
            self.repo.root,
            "workflow_dispatch",
            example("workflow_dispatch", "_.0.json"),
            extra_env={
                **scripted_agent_env(self.script, self.state),
                "GITHUB_TOKEN": TOKEN,
                "GH_TOKEN": TOKEN,
            },
        )

    @property
    def out(self) -> Path:
        return self.step.runner_temp / "scaffold-slot"

    def play(self, actions: list[dict[str, Any]], **run: Any) -> None:
        self.script.write_text(json.dumps([{"actions": actions, **run}]), encoding="utf-8")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = json.dumps(agent_command())
        return self.step.run("slot", "--agent-command", command, *args)

    def origin_branches(self) -> set[str]:
        return set(git(self.origin, "for-each-ref", "--format=%(refname)", "refs/heads").split())

    def read(self, name: str) -> Any:
        return json.loads((self.out / name).read_text(encoding="utf-8"))


@pytest.fixture
def slot(tmp_path: Path) -> Slot:
    return Slot(tmp_path)


COMPLETE = {"signal": {"signal": "complete", "summary": "wrote hello"}}


def test_complete_run_is_committed_and_pushed(slot: Slot) -> None:
    slot.play(
        [{"write": "hello.txt", "content": "hi\n"}, COMPLETE], step="TASK-3", role="codeweaver"
    )
    proc = slot.run("--task-id", "task-3", "--role", "codeweaver", "--quest-id", "q1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outputs = slot.step.outputs()
    head = outputs["head-sha"]
    assert outputs["signal"] == "complete"
    assert slot.origin_branches() == {"refs/heads/main", "refs/heads/scaffold/task-3"}
    assert git(slot.origin, "rev-parse", "refs/heads/scaffold/task-3") == head
    assert git(slot.origin, "show", f"{head}:hello.txt") == "hi"
    assert git(slot.origin, "log", "-1", "--format=%an <%ae>|%s", head) == (
        "scaffold <scaffold@localhost>|TASK-3 codeweaver: wrote hello"
    )
    assert git(slot.origin, "rev-parse", f"{head}^") == slot.base
    # the agent worked in a worktree of its own: the workspace's checkout is as it was,
    # the local branch is at the pushed commit, and the worktree is gone
    assert slot.repo.git("symbolic-ref", "--short", "HEAD") == "main"
    assert slot.repo.git("rev-parse", "refs/heads/scaffold/task-3") == head
    assert slot.repo.git("worktree", "list", "--porcelain").count("worktree ") == 1

    signal = slot.read("signal.json")
    assert signal["signal"] == {"signal": "complete", "stepId": "TASK-3", "summary": "wrote hello"}
    assert signal["role"] == "codeweaver"
    assert signal["quest_id"] == "q1"
    outcome = slot.read("outcome.json")
    assert outcome["signalled"] is True
    assert outcome["exit_code"] == 0
    assert outcome["failure"] is None
    assert outcome["pushed"] is True
    assert outcome["head_sha"] == head
    assert outcome["session_id"] == outputs["session-id"] != ""
    assert outcome["cost_usd"] == pytest.approx(0.01)
    events = [
        json.loads(line)
        for line in (slot.out / "transcript.jsonl").read_text().splitlines()
        if line
    ]
    assert events[0]["type"] == "system"
    assert events[0]["session_id"] == outcome["session_id"]
    assert events[-1]["type"] == "result"
    assert outputs["output-dir"] == str(slot.out)
    assert "signalled `complete`" in slot.step.summary()
    invocation = json.loads((slot.state / "invocations.jsonl").read_text().splitlines()[0])
    assert invocation["role"] == "codeweaver"
    assert invocation["step"] == "TASK-3"
    cwd = Path(invocation["cwd"])
    assert cwd.parent == slot.step.runner_temp
    assert cwd.name.startswith("scaffold-task-3-")
    assert not cwd.exists()


def test_crash_pushes_nothing(slot: Slot) -> None:
    slot.play([{"write": "half.txt", "content": "x"}, {"crash": 7}])
    proc = slot.run("--task-id", "3", "--role", "codeweaver")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "::error title=scaffold slot::scaffold slot: exited with code 7" in proc.stdout
    assert slot.origin_branches() == {"refs/heads/main"}
    assert not (slot.out / "signal.json").exists()
    outcome = slot.read("outcome.json")
    assert outcome["signalled"] is False
    assert outcome["exit_code"] == 7
    assert outcome["pushed"] is False
    assert "exited with code 7 without an accepted signal-back" in outcome["failure"]
    assert slot.step.outputs()["signal"] == ""
    assert (slot.out / "transcript.jsonl").read_text().strip()


def test_stalled_agent_is_a_crash(slot: Slot) -> None:
    slot.play([{"say": "thinking"}, {"hang": True}])
    proc = slot.run("--task-id", "8", "--role", "codeweaver", "--stuck-timeout", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    outcome = slot.read("outcome.json")
    assert outcome["stuck"] is True
    assert outcome["failure"].startswith("stuck: no output for the stuck timeout")
    assert slot.origin_branches() == {"refs/heads/main"}


def test_needs_user_input_is_a_signal(slot: Slot) -> None:
    question = {
        "signal": "needs-user-input",
        "question": "Which database, Postgres or SQLite?",
        "context": "the task does not say",
    }
    slot.play([{"signal": question}])
    proc = slot.run("--task-id", "TASK-4", "--run-spec", json.dumps({"role": "codeweaver"}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    signal = slot.read("signal.json")["signal"]
    assert signal["question"] == "Which database, Postgres or SQLite?"
    assert slot.step.outputs()["signal"] == "needs-user-input"
    # nothing changed: the branch is pushed at the commit it started from
    assert git(slot.origin, "rev-parse", "refs/heads/scaffold/task-4") == slot.base


def test_no_credential_reaches_the_agent(slot: Slot) -> None:
    credentials = slot.step.runner_temp / "git-credentials-1234.config"
    slot.step.runner_temp.mkdir(parents=True, exist_ok=True)
    credentials.write_text(f'[http "https://github.com/"]\n\textraheader = {HEADER}\n')
    slot.repo.git("config", "--local", "http.https://github.com/.extraheader", HEADER)
    include_key = f"includeIf.gitdir:{slot.repo.root}/.git/.path"
    slot.repo.git("config", "--local", include_key, str(credentials))
    seen = slot.state / "seen"  # the agent's state folder is writable, also in a sandbox
    dump = (
        "import json, os, subprocess, sys, pathlib\n"
        "out = pathlib.Path(sys.argv[1]); out.mkdir()\n"
        "(out / 'env.json').write_text(json.dumps(dict(os.environ)))\n"
        "cfg = subprocess.run(['git', 'config', '--list', '--show-origin'],"
        " capture_output=True, text=True).stdout\n"
        "(out / 'config.txt').write_text(cfg)\n"
        "try:\n"
        "    text = pathlib.Path(sys.argv[2]).read_text()\n"
        "except OSError as exc:\n"
        "    text = type(exc).__name__\n"
        "(out / 'included.txt').write_text(text)\n"
    )
    hook = slot.repo.root / ".git" / "hooks" / "pre-push"
    marker = slot.tmp / "hook-ran"
    slot.play(
        [
            {"run": [sys.executable, "-c", dump, str(seen), str(credentials)]},
            # a hook must not run where the push credentials are
            {
                "run": [
                    "sh",
                    "-c",
                    f'printf "#!/bin/sh\\ntouch {marker}\\n" > {hook}; chmod +x {hook}',
                ]
            },
            COMPLETE,
        ]
    )
    proc = slot.run("--task-id", "5", "--role", "codeweaver")
    assert proc.returncode == 0, proc.stdout + proc.stderr

    env = json.loads((seen / "env.json").read_text())
    assert "GITHUB_TOKEN" not in env
    assert "GH_TOKEN" not in env
    assert not [name for name, value in env.items() if TOKEN in value]
    assert env["SCAFFOLD_STEP_ID"] == "TASK-5"
    config = (seen / "config.txt").read_text()
    assert "extraheader" not in config.lower()
    assert HEADER not in config
    assert HEADER not in (seen / "included.txt").read_text()  # emptied (or out of sight)
    # taken out for good: a config the agent could write never holds them again
    local = slot.repo.git("config", "--local", "--list").lower()
    assert "extraheader" not in local
    assert include_key.lower() not in local
    assert HEADER not in credentials.read_text()
    assert TOKEN not in proc.stdout + proc.stderr
    assert not marker.exists()  # (planted where no sandbox keeps .git/hooks read-only)
    for path in slot.out.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path


def test_resume_carries_the_session_file(slot: Slot) -> None:
    session = "0d5f3a6e-1111-4c2b-9a5e-6f1d2c3b4a59"
    saved = slot.tmp / "saved-session.jsonl"
    saved.write_text('{"type":"user","message":"earlier"}\n')
    slot.play([COMPLETE], resumed=True)
    proc = slot.run(
        "--task-id",
        "6",
        "--role",
        "codeweaver",
        "--resume-session",
        session,
        "--session-file",
        str(saved),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert slot.step.outputs()["session-id"] == session
    outcome = slot.read("outcome.json")
    assert outcome["resumed"] == session
    # put where Claude Code looks for it in this checkout, and saved with the run's files
    home = Path(slot.step.env()["HOME"])
    cwd = json.loads((slot.state / "invocations.jsonl").read_text().splitlines()[0])["cwd"]
    assert cwd != str(slot.repo.root)  # the agent's own worktree
    slug = "".join(c if c.isalnum() else "-" for c in cwd)
    assert (home / ".claude" / "projects" / slug / f"{session}.jsonl").read_text() == (
        saved.read_text()
    )
    assert (slot.out / "session.jsonl").read_text() == saved.read_text()


def test_existing_remote_branch_is_continued(slot: Slot) -> None:
    slot.repo.git("checkout", "-q", "-b", "scaffold/task-7")
    slot.repo.write("first.txt", "1\n")
    first = slot.repo.commit("first run")
    slot.repo.git("push", "-q", "origin", "scaffold/task-7")
    slot.repo.git("checkout", "-q", "main")
    slot.repo.git("branch", "-q", "-D", "scaffold/task-7")
    slot.play([{"write": "second.txt", "content": "2\n"}, COMPLETE])
    proc = slot.run("--task-id", "7", "--role", "codeweaver")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    head = git(slot.origin, "rev-parse", "refs/heads/scaffold/task-7")
    assert git(slot.origin, "rev-parse", f"{head}^") == first


@pytest.mark.parametrize(
    "args",
    [
        ("--task-id", "../main", "--role", "codeweaver"),
        ("--task-id", "main", "--role", "codeweaver"),
        ("--task-id", "TASK-1/../x", "--role", "codeweaver"),
        ("--task-id", "--force", "--role", "codeweaver"),
        ("--task-id", "3", "--role", "wizard"),
        ("--task-id", "3"),
        ("--task-id", "3", "--role", "codeweaver", "--run-spec", '{"role": "lawbringer"}'),
        ("--task-id", "3", "--role", "codeweaver", "--resume-session", "../../etc/passwd"),
        ("--task-id", "3", "--role", "codeweaver", "--quest-id", "Bad Quest"),
    ],
)
def test_usage_errors_exit_2(slot: Slot, args: tuple[str, ...]) -> None:
    slot.play([COMPLETE])
    proc = slot.run(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "::error title=scaffold action::scaffold: " in proc.stdout
    assert not (slot.state / "invocations.jsonl").exists()  # the agent never started
    assert slot.origin_branches() == {"refs/heads/main"}
    assert slot.step.outputs() == {}


def test_bad_agent_command_is_exit_2(slot: Slot) -> None:
    proc = slot.step.run(
        "slot", "--task-id", "3", "--role", "codeweaver", "--agent-command", "claude -p"
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "agent-command must be a JSON array" in proc.stdout


def test_a_hostile_agent_in_a_slot_gets_nothing(slot: Slot) -> None:
    """The slot's checkout, its output folder (signals), the runner's credentials and the
    step's token are out of the agent's reach; its own work is still pushed."""
    credentials = slot.step.runner_temp / "git-credentials-1234.config"
    slot.step.runner_temp.mkdir(parents=True, exist_ok=True)
    credentials.write_text(f'[http "https://github.com/"]\n\textraheader = {HEADER}\n')
    evidence = Evidence(slot.tmp / "hostile", writable=slot.state / "evidence")
    with listening() as listener:
        evidence.write_plan(
            secrets=[TOKEN, HEADER],
            read=[str(credentials), str(slot.out / "signals")],
            write=[str(slot.repo.root / ".git" / "config"), str(slot.repo.root / ".git" / "hooks")],
            forge={str(slot.out / "signals" / "signal-9.json"): '{"forged": true}'},
            forbidden_cmdline=["action slot"],
            loopback_port=listener.port,
            other_step="TASK-2",
        )
        run = hostile_run(evidence, "TASK-7")
        slot.script.write_text(json.dumps([run]), encoding="utf-8")
        proc = slot.run("--task-id", "7", "--role", "codeweaver")
        assert listener.heard == []
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expect_all_blocked(
        evidence,
        must_include=["read secrets in /proc", "plant hook pre-push", "git config core.fsmonitor"],
    )
    assert evidence.markers_left() == []
    assert slot.read("signal.json")["signal"]["summary"] == "done, and tried everything"
    head = slot.step.outputs()["head-sha"]
    assert git(slot.origin, "show", f"{head}:feature.txt") == "the agent's honest work"
    assert TOKEN not in proc.stdout + proc.stderr


def test_only_the_agents_work_is_committed(slot: Slot) -> None:
    """Issue 27: what other workflow steps left in the workspace (a credential file that
    google-github-actions/auth writes, build output, an ignored folder, an edit to a
    tracked file) is not the agent's work and never reaches the task branch."""
    slot.repo.write(".gitignore", "build/\n")
    slot.repo.commit("ignore build/")
    slot.repo.git("push", "-q", "origin", "main")
    base = slot.repo.head()
    slot.repo.write("gha-creds-0123.json", '{"type": "external_account"}\n')
    slot.repo.write("build/out.bin", "binary\n")
    slot.repo.write("dist/pkg.tar.gz", "tarball\n")
    slot.repo.write("README.md", "# changed by an earlier step\n")
    slot.play([{"write": "work/TASK-1.txt", "content": "done\n"}, COMPLETE])
    proc = slot.run("--task-id", "1", "--role", "codeweaver")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    head = slot.step.outputs()["head-sha"]
    assert git(slot.origin, "rev-parse", "refs/heads/scaffold/task-1") == head
    assert git(slot.origin, "rev-parse", f"{head}^") == base
    changed = git(slot.origin, "diff-tree", "--no-commit-id", "--name-only", "-r", head)
    assert changed.split() == ["work/TASK-1.txt"]
    # the workspace is left as the earlier steps made it
    assert (slot.repo.root / "gha-creds-0123.json").exists()
    assert (slot.repo.root / "README.md").read_text() == "# changed by an earlier step\n"


def test_the_task_branch_checked_out_in_the_workspace(slot: Slot) -> None:
    """A workflow that checked out the task branch itself (``ref: scaffold/task-2``): the
    agent's worktree is on that branch all the same, and the commit goes on top of it."""
    slot.repo.git("checkout", "-q", "-b", "scaffold/task-2")
    slot.repo.write("first.txt", "1\n")
    first = slot.repo.commit("first run")
    slot.repo.write("left-by-a-build.txt", "x\n")
    slot.play([{"write": "second.txt", "content": "2\n"}, COMPLETE])
    proc = slot.run("--task-id", "2", "--role", "codeweaver")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    head = git(slot.origin, "rev-parse", "refs/heads/scaffold/task-2")
    assert git(slot.origin, "rev-parse", f"{head}^") == first
    changed = git(slot.origin, "diff-tree", "--no-commit-id", "--name-only", "-r", head)
    assert changed.split() == ["second.txt"]
