"""Programs installed anywhere run in the sandbox: a venv, a ``node_modules`` or scaffold
itself under ``/tmp`` (a fresh tmpfs inside) or under HOME (hidden inside).

Every folder here is really under ``/tmp``: that is the point of these tests. The demo
run from a venv there is ``tests/runtime/test_demo.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import scaffold
from harness import REPO, require_tool
from installed_under_tmp import make_venv, real_tmp_dir
from scaffold.config import SandboxConfig
from scaffold.sandbox.confinement import (
    Confinement,
    build_view,
    confine,
    install_root,
    program_files,
)
from scaffold.sandbox.settings import Sandbox, resolve_sandbox

NODE_MODULES = REPO / ".tools" / "node_modules"


@pytest.fixture
def under_tmp(tmp_path: Path) -> Iterator[Path]:
    """A fresh folder under the real ``/tmp``, whatever pytest's basetemp is."""
    with real_tmp_dir(tmp_path) as path:
        yield path


def _sandbox() -> Sandbox:
    return resolve_sandbox(SandboxConfig(mode="bwrap"), strict=True, environ={})


def _run(root: Path, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``argv`` in a planning sandbox of a repository under ``root``."""
    repo = root / "repo"
    repo.mkdir(exist_ok=True)
    c = Confinement(repo=repo, cwd=repo, private=root / "private")
    command, inner_env = confine(_sandbox(), c, argv, env)
    return subprocess.run(
        command,
        env=inner_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _fake_node_package(modules: Path) -> Path:
    """``modules/.bin/tool``: a link to a ``#!/usr/bin/env node`` script that loads a
    sibling module, the way npm installs a CLI."""
    pkg = modules / "tool-pkg"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "lib.js").write_text("module.exports = 'the module beside it';\n")
    script = pkg / "bin" / "tool.js"
    script.write_text("#!/usr/bin/env node\nconsole.log('tool ran with', require('../lib.js'));\n")
    script.chmod(0o755)
    (modules / ".bin").mkdir()
    (modules / ".bin" / "tool").symlink_to("../tool-pkg/bin/tool.js")
    return modules / ".bin" / "tool"


def _node_bin(where: Path) -> Path:
    """A folder holding ``node`` (a link to the real one): node found on PATH there."""
    node = shutil.which("node")
    assert node is not None, "node is needed"
    where.mkdir()
    (where / "node").symlink_to(node)
    return where


def test_install_roots_follow_every_link(under_tmp: Path) -> None:
    real = under_tmp / "real" / "node_modules"
    (real / "pkg").mkdir(parents=True)
    (real / "pkg" / "cli.js").write_text("#!/usr/bin/env -S node --no-warnings\n")
    (real / ".bin").mkdir()
    (real / ".bin" / "cli").symlink_to("../pkg/cli.js")
    checkout = under_tmp / "checkout" / ".tools"
    checkout.mkdir(parents=True)
    (checkout / "node_modules").symlink_to(real)  # a checkout sharing another's install
    cli = checkout / "node_modules" / ".bin" / "cli"
    assert install_root(cli) == [checkout / "node_modules", real]
    nodebin = _node_bin(under_tmp / "nodebin")
    files = program_files(cli, {"PATH": str(nodebin)})
    assert files == [cli, Path("/usr/bin/env"), nodebin / "node"]


def test_scaffold_imported_from_the_home_folder_itself_is_bound_alone(under_tmp: Path) -> None:
    """scaffold imported from HOME itself (``PYTHONPATH=~``): its package is bound, the
    rest of that HOME stays hidden."""
    package = Path(scaffold.__file__).resolve().parent
    repo = under_tmp / "repo"
    c = Confinement(repo=repo, cwd=repo, private=under_tmp / "private")
    view = build_view(_sandbox(), c, [], {"HOME": str(package.parent)}, None)
    assert view.access(package / "sandbox" / "bridge.py") == "ro"
    assert view.access(package.parent / "elsewhere") == "deny"


def test_a_venv_under_tmp_runs_sandboxed(under_tmp: Path) -> None:
    venv = make_venv(under_tmp / "venv")
    done = _run(
        under_tmp,
        [str(venv / "bin" / "python3"), "-c", "import sys, json; print(sys.prefix)"],
        dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(venv)


def test_a_node_cli_under_tmp_runs_on_the_node_found_on_path(under_tmp: Path) -> None:
    tool = _fake_node_package(under_tmp / "tools" / "node_modules")
    nodebin = _node_bin(under_tmp / "nodebin")
    # node is found only under /tmp: the interpreter of the ``#!`` line must be there too.
    env = {**os.environ, "PATH": str(nodebin)}
    assert nodebin / "node" in program_files(tool, env)
    done = _run(under_tmp, [str(tool)], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "tool ran with the module beside it"


def test_a_program_in_the_real_home_is_bound_alone(under_tmp: Path) -> None:
    """``~/bin/tool``'s install root would be HOME itself: only the program is bound,
    never the whole HOME beside it."""
    home = under_tmp / "home"
    (home / "bin").mkdir(parents=True)
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("private key\n")
    tool = home / "bin" / "tool"
    tool.write_text('#!/bin/sh\necho tool ran\ncat "$1" 2>/dev/null || echo no key\n')
    tool.chmod(0o755)
    assert install_root(tool) == [home]
    env = {**os.environ, "HOME": str(home)}
    done = _run(under_tmp, [str(tool), str(home / ".ssh" / "id_ed25519")], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["tool ran", "no key"]


def _linked_copy(src: Path, dst: Path) -> None:
    """``src`` copied as hard links (the CLIs are hundreds of MB); skipped across devices."""
    try:
        shutil.copytree(src, dst, symlinks=True, copy_function=os.link)
    except (OSError, shutil.Error) as exc:
        pytest.skip(f"cannot hard-link {src} under /tmp: {exc}")


@pytest.mark.interop
@pytest.mark.timeout(600)  # three CLIs started on a loaded machine
def test_real_clis_installed_under_tmp_run_sandboxed(under_tmp: Path) -> None:
    """claude (a native binary), codex (a node launcher that runs its platform package's
    binary) and gemini (a node bundle) from a ``node_modules`` under ``/tmp``."""
    require_tool("claude", "SCAFFOLD_CLAUDE_BIN")
    real = NODE_MODULES.resolve()
    modules = under_tmp / "tools" / "node_modules"
    (modules / ".bin").mkdir(parents=True)
    clis = {
        "claude": ("@anthropic-ai/claude-code", "bin/claude.exe", ["@anthropic-ai/claude-code"]),
        "codex": (
            "@openai/codex",
            "bin/codex.js",
            ["@openai/codex", "@openai/codex-linux-x64"],
        ),
        "gemini": ("@google/gemini-cli", "bundle/gemini.js", ["@google/gemini-cli"]),
    }
    present = [name for name, (pkg, _, _) in clis.items() if (real / pkg).is_dir()]
    assert "claude" in present
    for name in present:
        pkg, entry, packages = clis[name]
        for package in packages:
            if (real / package).is_dir():
                _linked_copy(real / package, modules / package)
        (modules / ".bin" / name).symlink_to(f"../{pkg}/{entry}")
    nodebin = _node_bin(under_tmp / "nodebin")
    env = {
        **os.environ,
        "PATH": f"{nodebin}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "GEMINI_CLI_NO_RELAUNCH": "true",
    }
    for name in present:
        done = _run(under_tmp, [str(modules / ".bin" / name), "--version"], env)
        assert done.returncode == 0, f"{name}: {done.stderr}"
        assert done.stdout.strip(), name
