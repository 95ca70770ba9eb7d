"""A thin, typed wrapper over the ``git`` executable.

Why not GitPython for this part: merges and worktree repair need exact exit
codes and NUL-separated plumbing output, and a direct argv call keeps those in
plain sight. Every call is an argv list run without a shell; a failure raises
:class:`scaffold.errors.GitError` carrying the argv, exit code and stderr.

Every call has a timeout (:data:`LOCAL_TIMEOUT_S`, :data:`NETWORK_TIMEOUT_S` for
fetch, push, clone and ls-remote): git runs in its own process group, and on expiry
the whole group (git and the helpers it started) is killed.

Credentialed git (:func:`run_remote_git`) never executes anything an agent wrote.
Agents work in worktrees of the repositories scaffold fetches and pushes with a
token, so they can write the common ``.git/config`` and ``.git/hooks``. Before any
call that carries a credential, the repository's config files are audited
(:func:`audit_repo_config`): a key outside the few that ``git clone``,
``actions/checkout`` and scaffold write is refused, naming the key, never its
value. The call itself runs with hooks and fsmonitor off, no credential helper,
only the transport of the URL it was given, no redirects, and without system or
global config; the credential reaches git only through the environment of that
one git process (``GIT_CONFIG_COUNT``/``KEY``/``VALUE``), scoped to the URL.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from scaffold.errors import GitError, UsageError
from scaffold.git.environment import GIT, git_env

# A local call (status, commit, merge, worktree add) that takes longer than this
# is hung; a network call (fetch, push, clone, ls-remote) gets longer.
LOCAL_TIMEOUT_S = 300.0
NETWORK_TIMEOUT_S = 1800.0

SCAFFOLD_NAME = "scaffold"
SCAFFOLD_EMAIL = "scaffold@localhost"

# The fixed identity scaffold commits with, so commits work on machines that
# have no git identity configured. Environment variables win over config, so
# both are set.
IDENTITY_CONFIG: tuple[str, ...] = (
    "-c",
    f"user.name={SCAFFOLD_NAME}",
    "-c",
    f"user.email={SCAFFOLD_EMAIL}",
)
IDENTITY_ENV: Mapping[str, str] = {
    "GIT_AUTHOR_NAME": SCAFFOLD_NAME,
    "GIT_AUTHOR_EMAIL": SCAFFOLD_EMAIL,
    "GIT_COMMITTER_NAME": SCAFFOLD_NAME,
    "GIT_COMMITTER_EMAIL": SCAFFOLD_EMAIL,
}

# For every scaffold git call in a repository an agent may have written to: no
# hook and no fsmonitor command runs (command-line config wins over the repository's).
# The one definition of "no hooks": local calls pass it as ``-c`` options (SAFE_LOCAL),
# credentialed ones among their settings (remote_options).
SAFE_SETTINGS: tuple[str, ...] = (f"core.hooksPath={os.devnull}", "core.fsmonitor=false")
SAFE_LOCAL: tuple[str, ...] = tuple(part for s in SAFE_SETTINGS for part in ("-c", s))

# Only the repository's own (audited) config applies: no system or global file,
# which an agent sharing scaffold's HOME could have written.
ISOLATED_CONFIG_ENV: Mapping[str, str] = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}

# What git clone, git init, actions/checkout (sparse, partial, submodules) and
# scaffold itself write into a repository's config. Names as `git config --list`
# prints them: section and variable lower-cased, subsection as written.
_ALLOWED_KEY = re.compile(
    r"core\.(?:repositoryformatversion|filemode|bare|logallrefupdates|ignorecase"
    r"|precomposeunicode|symlinks|sparsecheckout|sparsecheckoutcone)"
    r"|extensions\.(?:objectformat|worktreeconfig|partialclone|refstorage)"
    r"|remote\.origin\.(?:url|fetch|promisor|partialclonefilter)"
    r"|branch\.[^\n]+\.(?:remote|merge)"
    r"|submodule\.[^\n]+\.(?:url|active)"
    r"|user\.(?:name|email)"
    r"|gc\.auto"
    r"|index\.sparse"
)

_URL_USERINFO = re.compile(r"//[^/@\s]*@")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class GitOutput:
    """What one git call printed and how it exited."""

    returncode: int
    stdout: str
    stderr: str


def repo_toplevel(start: Path) -> Path:
    """The top of the git repository around ``start``; UsageError when there is none."""
    proc = subprocess.run(
        [GIT, "-C", str(start), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
        env=git_env(),
    )
    if proc.returncode != 0:
        raise UsageError(f"{start} is not inside a git repository")
    return Path(proc.stdout.strip())


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """Kill git and every helper in its process group, reap it, close the pipes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def run_git(
    args: Sequence[str],
    cwd: Path,
    *,
    check: bool = True,
    ok_codes: Sequence[int] = (0,),
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    timeout_s: float = LOCAL_TIMEOUT_S,
    shown: Sequence[str] | None = None,
) -> GitOutput:
    """Run ``git <args>`` in ``cwd``.

    ``env`` adds to (not replaces) the cleaned environment. With ``check`` a
    return code outside ``ok_codes`` raises :class:`GitError`; a missing git or
    a missing ``cwd`` raises it too (return code -1), never an ``OSError``. After
    ``timeout_s`` git's process group is killed and :class:`GitError` raised
    (whatever ``check`` says). ``shown`` is the argv errors name instead of ``args``.
    """
    argv = [str(a) for a in args]
    named = [str(a) for a in shown] if shown is not None else argv
    try:
        proc = subprocess.Popen(
            [GIT, *argv],
            cwd=cwd,
            env=git_env(env),
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            process_group=0,
        )
    except OSError as exc:
        raise GitError(named, -1, f"cannot run git in {cwd}: {exc}") from exc
    try:
        stdout, stderr = proc.communicate(input_text, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise GitError(
            named, -1, f"timed out after {timeout_s:g}s; git and its helpers were killed"
        ) from None
    except BaseException:
        _kill_group(proc)
        raise
    out = GitOutput(proc.returncode, stdout, stderr)
    if check and proc.returncode not in ok_codes:
        raise GitError(named, proc.returncode, stderr)
    return out


# --------------------------------------------------------------------------- config audit


def _shown_key(key: str) -> str:
    """A config key fit for an error message (no user or password of a URL in it)."""
    return _URL_USERINFO.sub("//***@", key)[:200]


def repo_config_files(repo: Path) -> list[Path]:
    """Every repository config file git reads for ``repo`` (or a worktree of it)."""
    out = run_git(
        [*SAFE_LOCAL, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"],
        repo,
    )
    lines = out.stdout.splitlines()
    if len(lines) != 2:
        raise GitError(["rev-parse", "--git-dir"], -1, f"unexpected output for {repo}")
    git_dir, common = Path(lines[0]), Path(lines[1])
    candidates = [common / "config", common / "config.worktree", git_dir / "config.worktree"]
    candidates += sorted((common / "worktrees").glob("*/config.worktree"))
    return [p for p in dict.fromkeys(candidates) if p.is_file()]


def config_keys(path: Path, cwd: Path) -> list[str]:
    """The keys (never the values) one config file sets, includes not followed."""
    out = run_git(
        [
            *SAFE_LOCAL,
            "config",
            "--file",
            str(path),
            "--no-includes",
            "--list",
            "--name-only",
            "-z",
        ],
        cwd,
        check=False,
    )
    if out.returncode != 0:
        if not path.exists():
            # Gone since it was listed (a task's worktree removed meanwhile): a file
            # that is not there sets nothing git could read.
            return []
        raise GitError(["config", "--file", str(path), "--list"], out.returncode, out.stderr)
    return [key for key in out.stdout.split("\0") if key]


def audit_repo_config(repo: Path, what: str = "git") -> None:
    """Refuse a repository whose config holds anything scaffold and git clone did not write.

    Hooks paths, fsmonitor, filters, diff and merge drivers, URL rewrites, includes,
    credential helpers, proxies, ssh commands and aliases can all run a program or
    send a credential elsewhere; none of them belongs in a repository scaffold runs
    credentialed git in. The error names the file and the key, never the value.
    """
    for path in repo_config_files(repo):
        for key in config_keys(path, repo):
            if not _ALLOWED_KEY.fullmatch(key):
                shown = _shown_key(key)
                raise GitError(
                    [what],
                    -1,
                    f"refusing to run it: {path} sets {shown!r}, which scaffold did not write "
                    "and which could run a program or redirect credentials; remove it with "
                    f"`git config --file {path} --unset-all {shown}`",
                )


# --------------------------------------------------------------------------- credentialed git


def transport_of(url: str) -> str:
    """The transport git will use for ``url``: ``https``, loopback ``http`` or ``file``.

    Credentials travel over https only (plain http to this machine, for the GitHub
    simulator); a local path is a file remote. Anything else is refused.
    """
    if not url or url.startswith("-") or any(c in url for c in "\0\n\r"):
        raise GitError(["remote"], -1, "refusing a remote URL that is empty or not a URL")
    match = _SCHEME.match(url)
    if match is None:
        head = url.split("/", 1)[0]
        if ":" in head:  # scp-like (ssh) or <transport>::<address>
            raise GitError(["remote"], -1, "refusing a remote that is not https")
        return "file"
    scheme = match.group(1).lower()
    if scheme == "https":
        return scheme
    if scheme == "http" and urlsplit(url).hostname in _LOOPBACK:
        return scheme
    if scheme == "file":
        return scheme
    raise GitError(["remote"], -1, f"refusing to send credentials over {scheme}://")


def remote_options(url: str) -> tuple[str, ...]:
    """The ``-c`` options of a credentialed call to ``url``."""
    transport = transport_of(url)
    settings = (
        *SAFE_SETTINGS,
        "credential.helper=",
        "protocol.allow=never",
        f"protocol.{transport}.allow=always",
        "http.followRedirects=false",
        "http.sslVerify=true",
        "fetch.recurseSubmodules=false",
        "push.recurseSubmodules=no",
        "submodule.recurse=false",
        "gc.auto=0",
        "maintenance.auto=false",
    )
    return tuple(part for setting in settings for part in ("-c", setting))


def auth_header_config(url: str, header: str) -> tuple[tuple[str, str], ...]:
    """``http.<url>.extraHeader`` = ``header``: sent to ``url`` and nowhere else."""
    return ((f"http.{url}.extraheader", header),)


def credential_env(auth: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Config entries for one git process, through its environment only."""
    env = {
        **ISOLATED_CONFIG_ENV,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
        "GIT_CONFIG_COUNT": str(len(auth)),
    }
    for i, (key, value) in enumerate(auth):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def run_remote_git(
    args: Sequence[str],
    cwd: Path,
    *,
    url: str,
    auth: Sequence[tuple[str, str]] = (),
    check: bool = True,
    ok_codes: Sequence[int] = (0,),
    env: Mapping[str, str] | None = None,
    timeout_s: float = NETWORK_TIMEOUT_S,
    audit: bool = True,
) -> GitOutput:
    """``git <args>`` talking to ``url`` (which ``args`` must name) with ``auth``.

    ``auth`` holds config entries (``http.<url>.extraheader`` and the like) that
    reach git only through this process's environment. ``audit=False`` is for a
    clone, which has no repository yet. Errors show ``args`` without the options
    and with every ``auth`` value masked.
    """
    argv = [str(a) for a in args]
    if url not in argv:
        raise ValueError("run_remote_git: the URL must be one of the arguments")
    shown = [_URL_USERINFO.sub("//***@", a) for a in argv]
    options = remote_options(url)
    if audit:
        audit_repo_config(cwd, argv[0])
    out = run_git(
        [*options, *argv],
        cwd,
        check=False,
        env={**(env or {}), **credential_env(auth)},
        timeout_s=timeout_s,
        shown=shown,
    )
    if check and out.returncode not in ok_codes:
        stderr = _URL_USERINFO.sub("//***@", out.stderr)
        for _, value in auth:
            for secret in (value, value.rpartition(" ")[2]):
                if len(secret) >= 6:
                    stderr = stderr.replace(secret, "[redacted]")
        raise GitError(shown, out.returncode, stderr)
    return out
