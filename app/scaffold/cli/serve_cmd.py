"""``scaffold serve``: the self-hosted GitHub App (webhook server and quest runner).

The server listens with only ingest's modules imported; :class:`LazyApp` imports and
starts the App's GitHub side once it listens, on an event loop in a thread of its own
(``server/app_thread.py``), so nothing a quest does holds up an acknowledgement.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from scaffold.errors import ScaffoldError
from scaffold.server.app_thread import AppThread

if TYPE_CHECKING:
    from scaffold.github.service import AppService
    from scaffold.server.delivery import Delivery
    from scaffold.server.metrics import AppGauges
    from scaffold.server.settings import ServerSettings

DEFAULT_STATE_DIR = "~/.local/share/scaffold"


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise click.UsageError(f"{name} must be a number of seconds, not {raw!r}") from None
    if value < 0:
        raise click.UsageError(f"{name} must not be negative")
    return value


def harden_process() -> dict[str, str]:
    """Take every credential variable out of ``os.environ`` (returned, for the caller to
    keep in memory) and make the process non-dumpable: an agent of the same user can
    then read neither its memory nor ``/proc/<pid>/environ`` (the starting environment).
    """
    from scaffold.agent.process import is_credential_name

    taken = {
        name: os.environ.pop(name)
        for name in list(os.environ)
        # a path to a secret is no secret (the file stays out of the agents' sandbox)
        if is_credential_name(name) and not name.upper().endswith("_PATH")
    }
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_dumpable = 4
        libc.prctl(pr_set_dumpable, 0, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: nothing to do
        pass
    return taken


class LazyApp:
    """The App service, built (its modules imported) and started once the server listens;
    deliveries handed over before that wait for it."""

    def __init__(self, settings: ServerSettings, **options: Any) -> None:
        """``options``: the fields of :class:`~scaffold.github.service.AppOptions`."""
        self._settings = settings
        self._options = options
        self._service: AppService | None = None
        self._ready = asyncio.Event()
        self._thread = AppThread()

    async def start(self) -> None:
        """Start the App's thread; import, build and start the service there."""
        self._thread.start()
        await self._thread.call(self._start())
        self._ready.set()

    async def _start(self) -> None:
        from scaffold.github.auth import AppCredentials
        from scaffold.github.client import GitHubApp
        from scaffold.github.service import AppOptions, AppService

        settings = self._settings
        github = GitHubApp(
            AppCredentials(settings.app_id, settings.private_key), base_url=settings.github_url
        )
        self._service = AppService(github, AppOptions(**self._options))
        await self._service.start()

    async def handle(self, delivery: Delivery) -> None:
        await self._ready.wait()
        assert self._service is not None
        await self._thread.call(self._service.handle(delivery))

    async def gauges(self) -> AppGauges:
        from scaffold.server.metrics import AppGauges

        if self._service is None:
            return AppGauges()
        return await self._thread.call(self._service.gauges())

    async def stop(self) -> None:
        if self._service is not None:
            await self._thread.call(self._service.stop())
        await asyncio.to_thread(self._thread.close)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--state-dir",
    envvar="SCAFFOLD_STATE_DIR",
    default=DEFAULT_STATE_DIR,
    show_default=True,
    help="Clones, quests and the delivery log (env SCAFFOLD_STATE_DIR).",
)
@click.option(
    "--max-agents",
    envvar="SCAFFOLD_MAX_AGENTS",
    type=click.IntRange(min=1),
    default=None,
    help="Agents at once across every repository (env SCAFFOLD_MAX_AGENTS; default: two "
    "per core). Each repository's `slots` still applies within it.",
)
@click.option("--log-level", default="info", type=click.Choice(["debug", "info", "warning"]))
def serve(host: str, port: int, state_dir: str, max_agents: int | None, log_level: str) -> None:
    """Run the GitHub App: POST /webhook, GET /healthz, GET /metrics.

    Credentials come from the environment: SCAFFOLD_APP_ID, SCAFFOLD_PRIVATE_KEY or
    SCAFFOLD_PRIVATE_KEY_PATH, SCAFFOLD_WEBHOOK_SECRET, and SCAFFOLD_GITHUB_URL for
    GitHub Enterprise.
    """
    from scaffold.server.app import create_app
    from scaffold.server.logs import configure_json_logging
    from scaffold.server.run import serve as run_server
    from scaffold.server.settings import ServerSettings

    root = Path(state_dir).expanduser()
    try:
        settings = ServerSettings.from_env(os.environ, root)
    except ScaffoldError as exc:
        click.echo(f"scaffold serve: {exc}", err=True)
        sys.exit(2)
    configure_json_logging(log_level.upper(), extra_secrets=[settings.webhook_secret])
    harden_process()
    root.mkdir(parents=True, exist_ok=True)
    key_path = os.environ.get("SCAFFOLD_PRIVATE_KEY_PATH", "").strip()
    lazy = LazyApp(
        settings,
        state_dir=root,
        hidden=(Path(key_path).expanduser().absolute(),) if key_path else (),
        status_interval_s=_seconds("SCAFFOLD_STATUS_INTERVAL_S", 10.0),
        reconcile_interval_s=max(1.0, _seconds("SCAFFOLD_RECONCILE_INTERVAL_S", 300.0)),
        max_agents=max_agents,
    )
    app = create_app(settings, lazy.handle, gauges=lazy.gauges)
    app.on_shutdown.append(lambda _app: lazy.stop())
    try:
        run_server(
            app, host, port, drain_timeout_s=settings.drain_timeout_s, after_listening=lazy.start
        )
    except ScaffoldError as exc:  # a state directory in use, a damaged delivery database
        click.echo(f"scaffold serve: {exc}", err=True)
        sys.exit(2)
