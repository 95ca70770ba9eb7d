"""A typed wrapper over the ``git`` executable.

Every call is an argv list run without a shell, in its own process group, with a
timeout after which git and the helpers it started are killed; a failure raises
:class:`scaffold.errors.GitError` with the argv, exit code and stderr.

Credentialed git (:func:`run_remote_git`) never executes anything an agent wrote.
Agents can write the common ``.git/config`` and ``.git/hooks`` of the repositories
scaffold fetches and pushes with a token, so the repository's config files are first
audited (:func:`audit_repo_config`): a key outside the few that ``git clone``,
``actions/checkout`` and scaffold write is refused. The call runs with hooks and
fsmonitor off, no credential helper, only the URL's transport, no redirects, no system
or global config; the credential reaches that one git process only through its
environment (``GIT_CONFIG_COUNT``/``KEY``/``VALUE``), scoped to the URL.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from scaffold.errors import GitError, UsageError
from scaffold.git.environment import GIT, git_env

# A local call that takes longer is hung; fetch, push, clone and ls-remote get longer.
LOCAL_TIMEOUT_S = 300.0
NETWORK_TIMEOUT_S = 1800.0


def config_options(*settings: str) -> tuple[str, ...]:
    """``-c <setting>`` for each setting."""
    return tuple(part for setting in settings for part in ("-c", setting))


SCAFFOLD_NAME = "scaffold"
SCAFFOLD_EMAIL = "scaffold@localhost"

# The identity scaffold commits with, on machines with no git identity too. Environment
# variables win over config, so both are set.
IDENTITY_CONFIG = config_options(f"user.name={SCAFFOLD_NAME}", f"user.email={SCAFFOLD_EMAIL}")
IDENTITY_ENV: Mapping[str, str] = {
    "GIT_AUTHOR_NAME": SCAFFOLD_NAME,
    "GIT_AUTHOR_EMAIL": SCAFFOLD_EMAIL,
    "GIT_COMMITTER_NAME": SCAFFOLD_NAME,
    "GIT_COMMITTER_EMAIL": SCAFFOLD_EMAIL,
}

# For every git call in a repository an agent may have written to: no hook and no
# fsmonitor command runs (command-line config wins over the repository's).
SAFE_SETTINGS: tuple[str, ...] = (f"core.hooksPath={os.devnull}", "core.fsmonitor=false")
SAFE_LOCAL = config_options(*SAFE_SETTINGS)

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


GitOutput = subprocess.CompletedProcess[str]


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
    """Run ``git <args>`` in ``cwd``, ``env`` added to the cleaned environment.

    :class:`GitError` for a return code outside ``ok_codes`` (with ``check``), and
    always for a missing git or ``cwd`` (code -1, never an ``OSError``) or a timeout.
    ``shown`` is the argv errors name instead of ``args``.
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
    out = GitOutput(argv, proc.returncode, stdout, stderr)
    if check and proc.returncode not in ok_codes:
        raise GitError(named, proc.returncode, stderr)
    return out


# --------------------------------------------------------------------------- config audit


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
    """Refuse a repository whose config holds anything scaffold and git clone did not
    write (hooks paths, filters, drivers, URL rewrites, includes, helpers, proxies... can
    run a program or send a credential elsewhere). The error never shows the value."""
    for path in repo_config_files(repo):
        for key in config_keys(path, repo):
            if not _ALLOWED_KEY.fullmatch(key):
                shown = _URL_USERINFO.sub("//***@", key)[:200]  # no user or password
                raise GitError(
                    [what],
                    -1,
                    f"refusing to run it: {path} sets {shown!r}, which scaffold did not write "
                    "and which could run a program or redirect credentials; remove it with "
                    f"`git config --file {path} --unset-all {shown}`",
                )


# --------------------------------------------------------------------------- credentialed git


def transport_of(url: str) -> str:
    """The transport git will use for ``url``: ``https``, ``file`` (a local path too) or
    ``http`` to this machine (the GitHub simulator); anything else is refused."""
    if not url or url.startswith("-") or any(c in url for c in "\0\n\r"):
        raise GitError(["remote"], -1, "refusing a remote URL that is empty or not a URL")
    match = _SCHEME.match(url)
    if match is None:
        head = url.split("/", 1)[0]
        if ":" in head:  # scp-like (ssh) or <transport>::<address>
            raise GitError(["remote"], -1, "refusing a remote that is not https")
        return "file"
    scheme = match.group(1).lower()
    if scheme in ("https", "file") or (scheme == "http" and urlsplit(url).hostname in _LOOPBACK):
        return scheme
    raise GitError(["remote"], -1, f"refusing to send credentials over {scheme}://")


def remote_options(url: str) -> tuple[str, ...]:
    """The ``-c`` options of a credentialed call to ``url``."""
    transport = transport_of(url)
    return config_options(
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
    """``git <args>`` talking to ``url`` (which ``args`` must name), with ``auth``'s config
    entries in its environment only. ``audit=False`` is for a clone, which has no
    repository yet. Errors show ``args`` without the options, ``auth`` values masked."""
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
