"""The App's clone: what an agent plants in the shared ``.git`` never runs with the token.

Agents work in worktrees of the App's credentialed clone (``github/checkout.py``), so
they can write its common ``.git/config``, ``.git/hooks`` and ``.git/info``. Here an
agent's worktree plants each attack for real, and the App's fetch, update and push
(against the GitHub simulator, whose git server wants the installation token) either
refuse by naming the key or run without executing it; the planted command never runs
and the token reaches nothing the attacker can read.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
from app_harness import repo_files, writer_repo

from credtrap import Trap, evil_script, leaks
from ghsim import GitHubSimulator
from git.gitrepo import git
from scaffold.errors import GitError, ScaffoldError
from scaffold.github.checkout import Checkout

REPO = "acme/widgets"
BRANCH = "scaffold/task-1"


class AppClone:
    """The App's clone of acme/widgets and one agent's worktree in it."""

    def __init__(self, sim: GitHubSimulator, tmp: Path) -> None:
        self.sim = sim
        self.tmp = tmp
        writer_repo(sim, repo_files())
        self.token = sim.installation_token(REPO)
        basic = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        self.header = f"Authorization: Basic {basic}"
        self.secrets = (self.token, basic)
        self.url = sim.repo(REPO).clone_url
        self.checkout = Checkout(tmp / "state", REPO, self.url, "main")
        self.checkout.ensure(self.token)
        self.worktree = self.checkout.path / ".scaffold" / "worktrees" / "task-1"
        git(self.checkout.path, "worktree", "add", "-q", "-b", BRANCH, str(self.worktree))
        (self.worktree / "work.txt").write_text("agent work\n")
        git(self.worktree, "add", "work.txt")
        git(self.worktree, "commit", "-q", "-m", "agent work")
        self.common = Path(
            git(self.worktree, "rev-parse", "--path-format=absolute", "--git-common-dir")
        )
        self.evil = tmp / "evil"

    def plant(self, *config: str) -> None:
        """``git config`` in the agent's worktree: it writes the clone's common config."""
        git(self.worktree, "config", *config)

    def remote_change(self) -> None:
        """Someone pushes to main, so the App's update has something to merge."""
        self.sim.push_files(REPO, "main", {"NEWS.md": "news\n"}, by="alice", message="news")

    def leaks(self, *more: Path | bytes) -> list[str]:
        return leaks(self.secrets, self.evil, self.common / "config", *more)


@pytest.fixture
def app(github_sim: GitHubSimulator, tmp_path: Path) -> AppClone:
    return AppClone(github_sim, tmp_path)


def test_hooks_planted_in_the_shared_git_never_run(app: AppClone) -> None:
    markers = []
    for name in (
        "pre-push",
        "reference-transaction",
        "post-checkout",
        "post-merge",
        "pre-auto-gc",
        "post-rewrite",
    ):
        script, marker = evil_script(app.evil, name)
        hook = app.common / "hooks" / name
        hook.parent.mkdir(exist_ok=True)
        hook.write_text(script.read_text())
        hook.chmod(0o755)
        markers.append(marker)
    app.remote_change()

    app.checkout.update(app.token)  # fetch, checkout, merge
    assert app.checkout.push_branch(BRANCH, app.token)
    head = app.checkout.head_of(BRANCH)

    assert app.sim.repo(REPO).branch_sha(BRANCH) == head
    assert (app.checkout.path / "NEWS.md").read_text() == "news\n"
    assert git(app.checkout.path, "rev-parse", f"refs/remotes/origin/{BRANCH}") == head
    assert [m.name for m in markers if m.exists()] == []
    assert app.leaks() == []

    # Control: the push as scaffold ran it before (token in the environment of a plain
    # `git push origin`) hands the header to the planted pre-push hook.
    git(app.worktree, "commit", "-q", "--allow-empty", "-m", "again")
    subprocess.run(
        ["git", "push", "-q", "origin", f"{BRANCH}:{BRANCH}"],
        cwd=app.checkout.path,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(app.tmp),
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": app.header,
        },
        capture_output=True,
        check=False,
    )
    assert app.header in (app.evil / "pre-push.ran").read_text()


def _commands(app: AppClone) -> dict[str, tuple[str, ...]]:
    script, _ = evil_script(app.evil, "planted", passthrough=True)
    return {
        "core.fsmonitor": ("core.fsmonitor", str(script)),
        "core.sshCommand": ("core.sshCommand", str(script)),
        "core.hooksPath": ("core.hooksPath", str(app.evil)),
        "credential.helper": ("credential.helper", f"!{script}"),
        "diff.external": ("diff.external", str(script)),
    }


@pytest.mark.parametrize(
    "key",
    ["core.fsmonitor", "core.sshCommand", "core.hooksPath", "credential.helper", "diff.external"],
)
def test_config_planted_in_the_shared_git_is_refused(app: AppClone, key: str) -> None:
    app.plant(*_commands(app)[key])
    app.remote_change()
    for call in (
        lambda: app.checkout.fetch(app.token),
        lambda: app.checkout.update(app.token),
        lambda: app.checkout.push_branch(BRANCH, app.token),
        lambda: app.checkout.fetch_refspecs(app.token, "+refs/heads/main:refs/scaffold/x"),
    ):
        with pytest.raises(GitError) as caught:
            call()
        assert key.lower() in str(caught.value).lower()
        assert str(app.evil) not in str(caught.value)
    assert app.sim.repo(REPO).branch_sha(BRANCH) is None
    assert not (app.evil / "planted.ran").exists()
    assert app.leaks() == []


def test_a_filter_declared_through_info_attributes_never_runs(app: AppClone) -> None:
    # .git/info/attributes applies to every worktree, the App's checkout included
    script, marker = evil_script(app.evil, "filter", passthrough=True)
    (app.common / "info").mkdir(exist_ok=True)
    (app.common / "info" / "attributes").write_text("* filter=evil diff=evil merge=evil\n")
    app.plant("filter.evil.smudge", str(script))
    app.plant("filter.evil.clean", str(script))
    app.plant("diff.evil.textconv", str(script))
    app.plant("merge.evil.driver", str(script))
    app.remote_change()
    with pytest.raises(ScaffoldError, match=r"filter\.evil"):
        app.checkout.update(app.token)
    assert not (app.checkout.path / "NEWS.md").exists()
    assert not marker.exists()
    assert app.leaks() == []


REDIRECTS = ["insteadOf", "pushInsteadOf", "include.path", "includeIf", "http.proxy"]


@pytest.mark.parametrize("how", REDIRECTS)
def test_config_that_sends_the_token_elsewhere_is_refused(app: AppClone, how: str) -> None:
    with Trap() as trap:
        base = app.sim.urls.git
        extra = app.evil / "extra.config"
        app.evil.mkdir(exist_ok=True)
        extra.write_text(f'[url "{trap.url}/git/"]\n\tinsteadOf = {base}/\n')
        planted = {
            "insteadOf": (f"url.{trap.url}/git/.insteadOf", f"{base}/"),
            "pushInsteadOf": (f"url.{trap.url}/git/.pushInsteadOf", f"{base}/"),
            "include.path": ("include.path", str(extra)),
            "includeIf": (f"includeIf.gitdir:{app.common}/.path", str(extra)),
            "http.proxy": ("http.proxy", trap.url),
        }[how]
        app.plant(*planted)
        with pytest.raises(GitError, match="refusing to run it") as caught:
            app.checkout.fetch(app.token)
        assert planted[0].lower() in str(caught.value).lower()
        with pytest.raises(GitError, match="refusing to run it"):
            app.checkout.push_branch(BRANCH, app.token)
        assert trap.connections == 0
        assert app.sim.repo(REPO).branch_sha(BRANCH) is None
        assert app.leaks(trap.received) == []


def test_origin_rewritten_by_an_agent_is_not_where_the_token_goes(app: AppClone) -> None:
    with Trap() as trap:
        app.plant("remote.origin.url", f"{trap.url}/git/evil/widgets.git")
        app.remote_change()
        app.checkout.update(app.token)
        assert app.checkout.push_branch(BRANCH, app.token)
        head = app.checkout.head_of(BRANCH)
        assert trap.connections == 0
        assert app.sim.repo(REPO).branch_sha(BRANCH) == head
        assert (app.checkout.path / "NEWS.md").read_text() == "news\n"
        assert app.leaks(trap.received) == []


def test_a_push_never_overwrites_a_commit_scaffold_has_not_seen(app: AppClone) -> None:
    """The task branch is pushed only over the remote tip scaffold fetched (its lease): a
    writer's commit pushed meanwhile is never overwritten, whatever the local branch says."""
    assert app.checkout.fetch_branch(BRANCH, app.token) is None  # not on the remote yet
    assert app.checkout.push_branch(BRANCH, app.token)  # lease: the branch is absent
    first = app.checkout.head_of(BRANCH)
    theirs = app.sim.push_files(REPO, BRANCH, {"fix.txt": "mine\n"}, by="alice", message="fix")
    git(app.worktree, "commit", "-q", "--allow-empty", "-m", "more agent work")
    # A lease on the old tip, or on no branch at all, is lost: nothing is written.
    assert not app.checkout.push_branch(BRANCH, app.token, lease=first)
    assert not app.checkout.push_branch(BRANCH, app.token)
    assert app.sim.repo(REPO).branch_sha(BRANCH) == theirs
    # Fetched, the writer's commit is what a push must build on; a push that does not
    # contain it is refused too, even with the fresh lease (not a fast-forward).
    assert app.checkout.fetch_branch(BRANCH, app.token) == theirs
    assert not app.checkout.contains(app.checkout.head_of(BRANCH), theirs)
    assert not app.checkout.push_branch(BRANCH, app.token, lease=theirs)
    assert app.sim.repo(REPO).branch_sha(BRANCH) == theirs
    git(app.worktree, "merge", "-q", "--no-edit", theirs)  # built on it: pushed
    assert app.checkout.push_branch(BRANCH, app.token, lease=theirs)
    assert app.sim.repo(REPO).branch_sha(BRANCH) == app.checkout.head_of(BRANCH)
    assert app.leaks() == []
