"""One process in a sandbox: what it sees, and the bwrap command line that makes it so.

An agent (or a Ward command) of a task gets:

- **writable**: the task's worktree, its worktree's own git folder (index, HEAD), and a
  private HOME, TMPDIR and git object store that persist per task, so Claude Code's
  ``--resume`` finds its session again;
- **read-only**: the rest of the system, the programs it runs from wherever they are
  installed (a venv, a pyenv, a ``node_modules`` under HOME or ``/tmp``), the
  repository's common git folder (objects, refs), and, pinned read-only inside the
  writable parts, the files that tell git where that folder is;
- **hidden**: the real HOME, ``/tmp``, ``/run`` (service sockets), scaffold's state
  (``.scaffold``: journal, inbox, signals, other tasks' worktrees), the App's state
  folder and key file, and whatever the operator adds;
- **its own** PID, IPC, UTS and network namespaces: no ``/proc`` view of scaffold, no
  process that outlives the run (the namespace dies with its first process), and no
  network but the routes of :mod:`scaffold.sandbox.egress`.

Git's common ``config``, ``hooks/`` and ``info/`` are read-only inside, so nothing an
agent writes can make a later git command run code; commits the agent makes go to its
private object store (``GIT_OBJECT_DIRECTORY``) and cannot move any branch.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import scaffold
from scaffold.errors import SandboxError
from scaffold.sandbox.egress import Route, hosts_file
from scaffold.sandbox.mounts import View, mount_args
from scaffold.sandbox.settings import Sandbox, bwrap_base

__all__ = [
    "CHANNEL_INSIDE",
    "Confinement",
    "confine",
    "install_root",
    "program_files",
    "worktree_git_dirs",
]

# Where a run's channel folder (signal socket, egress sockets, MCP config) is seen inside.
CHANNEL_INSIDE = Path("/run/scaffold")
BRIDGE = Path(__file__).with_name("bridge.py")
SCAFFOLD_DIR = ".scaffold"
# Variables naming places outside the sandbox, or agents' ways into other services.
_DROPPED_ENV = (
    "XDG_RUNTIME_DIR",
    "DBUS_SESSION_BUS_ADDRESS",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "CLAUDE_CONFIG_DIR",
)
# Files of a worktree's own git folder that say where the repository is, or could hold
# config: pinned read-only (config.worktree is created empty for that).
_POINTERS = ("commondir", "gitdir", "config.worktree")
# Claude Code's login, copied into a private HOME (the agent needs it to call the model).
_CLAUDE_LOGIN = Path(".claude") / ".credentials.json"
# Symlinks followed (the kernel's own limit), and the bytes a ``#!`` line is read from.
_MAX_HOPS = 40
_SHEBANG_MAX = 256


@dataclass(frozen=True)
class Confinement:
    """Where one sandboxed process runs and what it may touch."""

    repo: Path
    cwd: Path
    # Per task (or per quest for planning): home/, tmp/ and git-objects/ live here.
    private: Path
    # The working tree the process may change (a task's worktree, or the Action's
    # checkout); None for planning (the repository read-only).
    worktree: Path | None = None
    # This run's channel folder, seen at CHANNEL_INSIDE (read-only).
    channel: Path | None = None
    routes: Sequence[Route] = ()
    # Programs besides argv[0] that must be runnable (e.g. the signal relay's python).
    programs: Sequence[str] = ()
    extra_hidden: Sequence[Path] = ()


def worktree_git_dirs(worktree: Path) -> tuple[Path, Path]:
    """The working tree's own git folder and the repository's common one.

    A plain checkout's ``.git`` folder is both. A worktree's are read from its ``.git``
    file and checked: the own folder must sit under the common folder's ``worktrees/``
    (a pointer elsewhere is refused, never followed).
    """
    pointer = worktree / ".git"
    if pointer.is_dir() and not pointer.is_symlink():
        return pointer, pointer
    try:
        text = pointer.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SandboxError(f"{worktree} is not a git worktree: {exc}") from None
    if not text.startswith("gitdir:"):
        raise SandboxError(f"{pointer}: not a worktree pointer")
    own = (worktree / text.removeprefix("gitdir:").strip()).resolve()
    common_file = own / "commondir"
    try:
        common = (own / common_file.read_text(encoding="utf-8").strip()).resolve()
    except OSError as exc:
        raise SandboxError(f"{own}: no commondir: {exc}") from None
    if own.parent != common / "worktrees":
        raise SandboxError(f"{pointer} points outside {common / 'worktrees'}: refused")
    return own, common


def install_root(program: Path) -> list[Path]:
    """The folders a program needs readable to run: the install root of its path and of
    every path its symlinks lead through (a ``node_modules/.bin`` link, a venv's
    ``python`` link), and a venv's base interpreter."""
    roots: list[Path] = []
    for path in _hops(program):
        roots += _root(path)
    return list(dict.fromkeys(roots))


def _hops(program: Path) -> list[Path]:
    """``program``, each path its symlinks lead through, and the file they end at."""
    hops = [program]
    current = program
    for _ in range(_MAX_HOPS):
        try:
            target = os.readlink(current)
        except OSError:
            break
        # The link's folder resolved, so a ``..`` in the target is taken where it lands.
        current = Path(os.path.normpath(current.parent.resolve() / target))
        hops.append(current)
    hops.append(program.resolve())
    return list(dict.fromkeys(hops))


def _root(path: Path) -> list[Path]:
    for parent in reversed(path.parents):  # outermost first
        if parent.name == "node_modules":
            return [parent]
    for parent in path.parents:
        cfg = parent / "pyvenv.cfg"
        if cfg.is_file():
            return [*_venv_base(cfg), parent]
    return [path.parent.parent if path.parent.name == "bin" else path.parent]


def _interpreters(program: Path, env: Mapping[str, str]) -> list[Path]:
    """What a script's ``#!`` line runs: its interpreter, and for ``/usr/bin/env name``
    the ``name`` found on the run's ``PATH`` (a ``node`` or ``python3`` anywhere)."""
    if not program.is_file():  # a FIFO's open would wait for a writer
        return []
    try:
        with program.open("rb") as fh:
            head = fh.read(_SHEBANG_MAX)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return []
    found = [Path(words[0])]
    if found[0].name == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        named = _which(names[0], env) if names else None
        found += [named] if named is not None else []
    return found


def program_files(program: Path, env: Mapping[str, str]) -> list[Path]:
    """``program`` and the interpreters it runs on, each followed through its ``#!``."""
    files = [program]
    for path in files:
        if len(files) > _MAX_HOPS:
            break
        files += [i for i in _interpreters(path, env) if i not in files]
    return files


def _venv_base(cfg: Path) -> list[Path]:
    try:
        for line in cfg.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                home = Path(value.strip())
                return [home.parent if home.name == "bin" else home]
    except OSError:
        pass
    return []


def _which(program: str, env: Mapping[str, str]) -> Path | None:
    if "/" in program:
        return Path(program).absolute()
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    return Path(found).absolute() if found else None


def _real_homes(env: Mapping[str, str]) -> list[Path]:
    homes = [Path(env["HOME"])] if env.get("HOME") else []
    with contextlib.suppress(KeyError):
        homes.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    return [h for h in homes if h != Path("/")]


def _python_roots() -> list[Path]:
    """Where this interpreter and scaffold are installed (the bridge runs on them)."""
    roots = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)]
    # Their libraries, and scaffold's own package, are bound alone when a prefix or the
    # folder scaffold is imported from is too wide to bind (a HOME itself).
    libs = sysconfig.get_paths()
    roots += [Path(libs[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in libs]
    package = Path(scaffold.__file__).resolve().parent
    roots += [package.parent, package]
    # Every other folder scaffold imports from (a ``.pth`` line, ``PYTHONPATH``): the
    # scripted agent and the MCP server run on this interpreter. Not the working folder
    # ``python -m`` puts first.
    with contextlib.suppress(OSError):
        cwd = os.getcwd()
        roots += [Path(p) for p in sys.path if p and p != cwd and Path(p).is_dir()]
    return roots


def _show_programs(view: View, files: Sequence[Path]) -> None:
    """Make ``files`` and what they run on readable wherever they are installed: an
    install root under a hidden folder (HOME) or a scratch one (``/tmp``) is bound
    read-only over it. A root that would uncover a whole hidden or scratch folder (a
    script straight in ``~/bin``) is not: the files alone are bound then."""
    covered = [PurePosixPath(str(r.path)) for r in view.rules]
    files = [*files, Path(sys.executable)]  # the bridge's interpreter
    roots = [r for f in files for r in install_root(f)] + _python_roots()
    for root in dict.fromkeys(roots):
        if view.access(root) == "ro":
            continue  # the host's own, seen as it is
        pure = PurePosixPath(str(root))
        if any(pure == c or pure in c.parents for c in covered):
            continue
        view.ro(root)
    for hop in dict.fromkeys(h for f in files for h in _hops(f)):
        if view.access(hop) != "ro":
            view.ro(hop)


def build_view(
    sandbox: Sandbox,
    c: Confinement,
    programs: Sequence[Path],
    env: Mapping[str, str],
    git_dirs: tuple[Path, Path] | None,
) -> View:
    """``git_dirs``: the worktree's own and common git folders (``worktree_git_dirs``)."""
    view = View()
    state = c.repo / SCAFFOLD_DIR
    secret = [state, *sandbox.hidden, *c.extra_hidden]
    for extra in (*sandbox.readable, *sandbox.writable):
        for hidden in secret:
            if extra == hidden or hidden in extra.parents:
                raise SandboxError(f"sandbox path {extra} would expose {hidden}: refused")
    # Private by default: HOME and service sockets (/run) hidden, temp folders fresh.
    view.deny(*_real_homes(env), "/run")
    view.scratch("/tmp", "/var/tmp", "/dev/shm")  # noqa: S108
    _show_programs(view, [f for p in programs for f in program_files(p, env)])
    view.ro(*sandbox.readable)
    if c.worktree is None:
        view.ro(c.repo)
    view.deny(*secret)
    private = c.private
    view.rw(private / "home", private / "tmp", *sandbox.writable)
    if c.worktree is not None and git_dirs is not None:
        own, common = git_dirs
        view.rw(c.worktree, private / "git-objects")
        view.ro(common)
        if own != common:
            # The worktree's index and HEAD are its own; what tells git where the
            # repository is stays as scaffold made it.
            view.rw(own)
            view.ro(c.worktree / ".git", *(own / name for name in _POINTERS))
    if c.channel is not None:
        view.map(CHANNEL_INSIDE, c.channel)
        if c.routes:
            view.map("/etc/hosts", c.channel / "hosts")
    return view


def _prepare_private(
    c: Confinement,
    homes: Sequence[Path],
    writable: Sequence[Path],
    git_dirs: tuple[Path, Path] | None,
) -> None:
    for sub in ("home", "tmp", "git-objects"):
        (c.private / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    for extra in writable:  # the operator's writable folders: there from the first run on
        if not extra.exists():
            extra.mkdir(parents=True, exist_ok=True)
    if git_dirs is not None:
        own, common = git_dirs
        if own != common:  # a worktree: its config.worktree exists, to be pinned read-only
            with contextlib.suppress(FileExistsError):  # made once: a touch would change its
                (own / "config.worktree").touch(exist_ok=False)  # ctime
        elif (own / "index").is_file():
            # A plain checkout's index sits in its read-only .git: the agent gets a copy.
            shutil.copyfile(own / "index", c.private / "index")
    _copy_login(c.private / "home", homes)


def _copy_login(home: Path, real_homes: Sequence[Path]) -> None:
    """Claude Code's login into the private HOME, once. The private HOME is the agent's
    to write, so nothing there is followed: a symlinked ``.claude`` gets no copy."""
    folder = home / _CLAUDE_LOGIN.parent
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        return
    source = next((h / _CLAUDE_LOGIN for h in real_homes if (h / _CLAUDE_LOGIN).is_file()), None)
    if source is None:
        return
    folder.mkdir(mode=0o700, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        fd = os.open(folder / _CLAUDE_LOGIN.name, flags, 0o600)
    except OSError:
        return  # there already (or planted): left as it is
    with os.fdopen(fd, "wb") as out:
        out.write(source.read_bytes())


def confine(
    sandbox: Sandbox,
    c: Confinement,
    argv: Sequence[str],
    env: Mapping[str, str],
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run ``argv`` inside the sandbox.

    ``env`` is the environment the process would get unsandboxed (already without
    credentials); HOME, TMPDIR and git's object store are pointed at the private
    folders. The private folders are created, and the channel's ``hosts`` file written.
    """
    if not sandbox.active or sandbox.bwrap is None:
        raise SandboxError("confine() needs an active sandbox")
    homes = _real_homes(env)
    git_dirs = worktree_git_dirs(c.worktree) if c.worktree is not None else None
    _prepare_private(c, homes, sandbox.writable, git_dirs)
    programs = [p for name in (argv[0], *c.programs) if (p := _which(name, env)) is not None]
    view = build_view(sandbox, c, programs, env, git_dirs)
    if c.channel is not None and c.routes:
        (c.channel / "hosts").write_text(hosts_file(c.routes), encoding="utf-8")
    inner = list(argv)
    if c.routes:
        forwards: list[str] = []
        for r in c.routes:
            forwards += ["--forward", f"{r.inside}:{r.port}={CHANNEL_INSIDE / r.socket_name}"]
        inner = [sys.executable, "-I", "-S", str(BRIDGE), *forwards, "--", *inner]
    command = [
        *bwrap_base(sandbox.bwrap),
        # Only for the bridge to listen on 443 in the sandbox's own network namespace.
        *(["--cap-add", "CAP_NET_BIND_SERVICE"] if c.routes else []),
        *mount_args(view, exists=os.path.lexists, is_dir=os.path.isdir),
        "--chdir",
        str(c.cwd),
        "--",
        *inner,
    ]
    out = {k: v for k, v in env.items() if k not in _DROPPED_ENV}
    home = str(c.private / "home")
    tmp = str(c.private / "tmp")
    out.update({"HOME": home, "TMPDIR": tmp, "TMP": tmp, "TEMP": tmp})
    if git_dirs is not None:
        own, common = git_dirs
        out["GIT_OBJECT_DIRECTORY"] = str(c.private / "git-objects")
        out["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(common / "objects")
        if own == common:
            out["GIT_INDEX_FILE"] = str(c.private / "index")
    return command, out
