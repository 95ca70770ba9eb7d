"""The scripted Responses API catches what the e2e tests promise it catches: a codex that
is not kept silent reaches for the internet through the proxy setting, and every such
attempt is a problem of the server (so ``server.problems == []`` there means none)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from responses_server import ResponsesServer, Text, When, chain, codex_env

from claude.e2e_project import wait_until

pytestmark = pytest.mark.interop


def test_outside_traffic_of_a_default_codex_is_caught(tmp_path: Path, codex_bin: str) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    with ResponsesServer(chain(Text("hello"), final=None, when=When())) as server:
        (home / "config.toml").write_text(
            'model = "gpt-5.5"\nmodel_provider = "local"\n[model_providers.local]\n'
            f'name = "local"\nbase_url = "{server.base_url}"\nwire_api = "responses"\n'
            'env_key = "OPENAI_API_KEY"\n',
            encoding="utf-8",
        )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "CODEX_HOME": str(home),
            **codex_env(server.base_url, server.proxy_url),
        }
        proc = subprocess.run(
            [codex_bin, "exec", "--json", "--skip-git-repo-check", "hello"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert [r.user_text for r in server.requests] == ["hello"]
        # Plugins (git ls-remote of github.com) and analytics try at once.
        wait_until(lambda: bool(server.problems), what="codex's outside traffic")
        with pytest.raises(AssertionError, match="outside traffic: CONNECT"):
            server.check()
