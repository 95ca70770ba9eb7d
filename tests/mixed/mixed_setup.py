"""What the tests of quests on mixed backends share.

The scripted model servers of the CLIs, each the one its own backend's tests use
(``claude/messages_server``, ``codex/responses_server``, ``gemini/gemini_server``),
started together; the environment that points each CLI at its own server (as a user's
environment would: each CLI's base URL and key); and a shell command a run makes to show
what it sees and what it reaches from inside scaffold's sandbox.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from claude.messages_server import MessagesServer, claude_env
from codex.responses_server import ResponsesServer, codex_env
from gemini.gemini_server import GeminiServer, gemini_env

# Every model key of the three CLIs, and a token of the forge.
KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GITHUB_TOKEN")


@dataclass(frozen=True)
class ModelServers:
    """One scripted model API per backend: OpenAI's for codex, Anthropic's for claude,
    Google's for gemini."""

    openai: ResponsesServer
    anthropic: MessagesServer
    google: GeminiServer

    def env(self, home: Path) -> dict[str, str]:
        """Each CLI's base URL and key (``HOME`` is ``home``); codex's outside traffic
        goes to its server as a proxy, so an attempt to reach the internet is seen."""
        return {
            **claude_env(self.anthropic.base_url, home),
            **codex_env(self.openai.base_url, self.openai.proxy_url),
            **gemini_env(self.google.base_url, home),
        }

    def ports(self) -> dict[str, int]:
        """The loopback port of each backend's model host."""
        urls = {
            "claude": self.anthropic.base_url,
            "codex": self.openai.base_url,
            "gemini": self.google.base_url,
        }
        return {name: int(urlsplit(url).port or 0) for name, url in urls.items()}

    def check(self) -> None:
        self.openai.check()
        self.anthropic.check()
        self.google.check()

    def unused(self) -> list[str]:
        claude = [t.name for t in self.anthropic.unused()]
        return [*self.openai.unused(), *claude, *self.google.unused()]


@contextlib.contextmanager
def model_servers() -> Iterator[ModelServers]:
    with ResponsesServer() as openai, MessagesServer() as anthropic, GeminiServer() as google:
        yield ModelServers(openai, anthropic, google)


def probe(foreign: Iterable[str], ports: dict[str, int]) -> str:
    """A shell command printing ``KEYS=<n>``, how many of the ``foreign`` variables its
    environment has, and ``PORT <backend> connected|refused`` for each backend's model
    port on loopback. Plain Python: Gemini's shell tool refuses ``$(...)``."""
    tries = "\n".join(f"try_port({name!r}, {port})" for name, port in sorted(ports.items()))
    script = (
        "import os, socket\n"
        f"print('KEYS=%d' % sum(name in os.environ for name in {sorted(foreign)!r}))\n"
        "def try_port(name, port):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), 5).close()\n"
        "        print('PORT', name, 'connected')\n"
        "    except OSError:\n"
        "        print('PORT', name, 'refused')\n"
        f"{tries}\n"
    )
    return f"python3 -c {shlex.quote(script)}"


def reached(output: str) -> dict[str, str]:
    """What `probe` printed: ``{backend: "connected" | "refused"}``."""
    return dict(re.findall(r"PORT (\w+) (connected|refused)", output))


def tool_output(result: Any) -> str:
    """The text of a scripted server's tool result (``text``; Gemini's ``output``)."""
    if result is None:
        return ""
    return str(getattr(result, "text", None) or getattr(result, "output", ""))


def keys_seen(output: str) -> int | None:
    """How many foreign variables `probe` counted (None: it did not print)."""
    found = re.search(r"KEYS=(\d+)", output)
    return int(found.group(1)) if found else None
