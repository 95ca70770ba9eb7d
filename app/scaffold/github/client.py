"""The REST client: gidgethub over one aiohttp session, with retries and App auth.

Paths are URI templates filled from ``url_vars`` (gidgethub escapes them), never
absolute URLs taken from a payload, so ``SCAFFOLD_GITHUB_URL`` decides where every
request goes. The transport retries no response and 5xx with backoff, waits out a
secondary rate limit's ``Retry-After`` and a primary one's ``X-RateLimit-Reset`` (within
``max_wait_s``), and retries no other 4xx; what is left raises ``GitHubError``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import gidgethub
import gidgethub.aiohttp
from gidgethub import sansio

from scaffold.errors import GitHubError, ScaffoldError
from scaffold.github.auth import AppCredentials, InstallationToken, TokenCache, parse_token_response
from scaffold.github.comments import CHECK_NAME

log = logging.getLogger("scaffold.github")

DEFAULT_API_URL = "https://api.github.com"
USER_AGENT = "scaffold-app"
UrlVars = Mapping[str, str | int]


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    # A rate limit that resets later than this is reported rather than waited out.
    max_wait_s: float = 900.0
    timeout_s: float = 30.0


def _number(text: str | None) -> float | None:
    try:
        return float(text.strip()) if text is not None else None
    except ValueError:
        return None


def retry_delay(
    policy: RetryPolicy,
    attempt: int,
    status: int | None,
    headers: Mapping[str, str],
    now_epoch: float,
) -> float | None:
    """Seconds to wait before attempt ``attempt + 1`` (1-based), or None to stop;
    ``status`` is None when there was no response."""
    # The exponent is bounded: a bigger power would not fit in a float.
    backoff = min(policy.max_delay_s, policy.base_delay_s * 2.0 ** min(attempt - 1, 64))
    headers = {key.lower(): value for key, value in headers.items()}
    if attempt >= policy.max_attempts:
        return None
    if status is None or status >= 500:
        return backoff
    if status not in (403, 429):
        return None
    retry_after = _number(headers.get("retry-after"))
    if retry_after is not None:
        return retry_after if 0 <= retry_after <= policy.max_wait_s else None
    if headers.get("x-ratelimit-remaining") == "0":
        reset = _number(headers.get("x-ratelimit-reset"))
        if reset is None:
            return backoff
        wait = max(0.0, reset - now_epoch) + 1.0
        return wait if wait <= policy.max_wait_s else None
    return backoff if status == 429 else None  # a plain 403: a permission problem


def describe(status: int | None, headers: Mapping[str, str]) -> str:
    """A short reason for logs: which limit or failure this was."""
    headers = {key.lower(): value for key, value in headers.items()}
    if status is None:
        return "no response"
    if "retry-after" in headers:
        return f"secondary rate limit ({status}, Retry-After {headers['retry-after']})"
    if headers.get("x-ratelimit-remaining") == "0":
        return f"primary rate limit ({status})"
    return f"HTTP {status}"


def repo_vars(full_name: str, **more: str | int) -> dict[str, str | int]:
    """The ``owner`` and ``repo`` URL variables of ``full_name``, with ``more``."""
    owner, _, name = full_name.partition("/")
    return {"owner": owner, "repo": name, **more}


async def post_comment(client: GitHubClient, full_name: str, number: int, body: str) -> int:
    """Comment on issue or pull request ``number``; the new comment's id."""
    data = await client.post(
        "/repos/{owner}/{repo}/issues/{number}/comments",
        repo_vars(full_name, number=number),
        data={"body": body},
    )
    return int(data["id"])


async def edit_comment(client: GitHubClient, full_name: str, comment_id: int, body: str) -> None:
    await client.patch(
        "/repos/{owner}/{repo}/issues/comments/{comment_id}",
        repo_vars(full_name, comment_id=comment_id),
        data={"body": body},
    )


async def check_runs(client: GitHubClient, where: UrlVars, ref: str, **query: str) -> list[Any]:
    """The check runs on commit ``ref`` (``query``: ``check_name``, ``filter``)."""
    return await client.get_all(
        "/repos/{owner}/{repo}/commits/{ref}/check-runs{?check_name,filter}",
        {**where, "ref": ref, **query},
        key="check_runs",
    )


class RetryingTransport(gidgethub.aiohttp.GitHubAPI):
    """gidgethub's aiohttp transport, retrying timeouts, 5xx and rate limits."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        base_url: str,
        policy: RetryPolicy,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(session, USER_AGENT, base_url=base_url.rstrip("/"))
        self.policy = policy
        self._sleep = sleep
        self._clock = clock

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        attempt = 0
        timeout = aiohttp.ClientTimeout(total=self.policy.timeout_s)
        while True:
            attempt += 1
            status: int | None = None
            response_headers: Mapping[str, str] = {}
            data = b""
            try:
                async with self._session.request(
                    method, url, headers=headers, data=body, timeout=timeout
                ) as response:
                    status, response_headers = response.status, response.headers
                    data = await response.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                failure = f"{type(exc).__name__}: {exc}"
            else:
                if status < 400:
                    return status, response_headers, data
                failure = describe(status, response_headers)
            delay = retry_delay(self.policy, attempt, status, response_headers, self._clock())
            if delay is None:
                if status is None:
                    raise GitHubError(method, _path_of(url), None, failure)
                return status, response_headers, data
            log.warning(
                "github call failed; retrying",
                extra={
                    "method": method,
                    "path": _path_of(url),
                    "reason": failure,
                    "attempt": attempt,
                    "wait_s": round(delay, 3),
                },
            )
            await self._sleep(delay)


def _path_of(url: str) -> str:
    """The path of a request URL, for errors and logs (no query: it may name things)."""
    return urlsplit(url).path or "/"


TokenSource = Callable[[], Awaitable[str]]


class AppIdentity:
    """The GitHub App scaffold acts as, by id: a check run is scaffold's only if this App
    created it (``app.id``), whatever it is called."""

    # Heads remembered as checked in this process (oldest forgotten first past this).
    MAX_CHECKED_HEADS = 10_000

    def __init__(self, app_id: int | None = None) -> None:
        self.app_id = app_id
        # (repository, head sha) whose check run is taken in this process (the event
        # loop's only: no lock).
        self._checked: dict[tuple[str, str], None] = {}

    def __repr__(self) -> str:
        return f"AppIdentity(app_id={self.app_id})"

    async def start_check(
        self,
        client: GitHubClient,
        full_name: str,
        sha: str,
        data: Mapping[str, Any],
        *,
        force: bool = False,
    ) -> Any | None:
        """Create scaffold's ``scaffold/diagram-check`` run on ``sha`` with ``data``; None
        when this process or GitHub has one already (``force``, a re-run a person asked
        for: always)."""
        # The quest's report and the pull request handler may both be at this head now:
        # taking it here settles which one creates the run, before any API call.
        key = (full_name.lower(), sha)
        claimed = key not in self._checked
        self._checked[key] = None
        while len(self._checked) > self.MAX_CHECKED_HEADS:
            del self._checked[next(iter(self._checked))]
        if not force and not claimed:
            return None
        where = repo_vars(full_name)
        try:
            if not force and await already_checked(client, where, sha, self):
                return None
            run = await client.post(
                "/repos/{owner}/{repo}/check-runs",
                where,
                data={"name": CHECK_NAME, "head_sha": sha, **data},
            )
        except BaseException:
            self._checked.pop(key, None)
            raise
        if self.app_id is None and type((run.get("app") or {}).get("id")) is int:
            self.app_id = int(run["app"]["id"])  # a plain token's App, learnt
        return run

    def owns(self, run: Mapping[str, Any]) -> bool:
        app = run.get("app")
        return (
            self.app_id is not None
            and isinstance(app, Mapping)
            and type(app.get("id")) is int
            and app["id"] == self.app_id
        )


class GitHubClient:
    """REST calls authenticated by a token source (installation token, or a plain token)."""

    def __init__(self, transport: RetryingTransport, token: TokenSource, *, jwt: bool = False):
        self._api = transport
        self._token = token
        self._jwt = jwt

    @property
    def base_url(self) -> str:
        return str(self._api.base_url)

    async def token(self) -> str:
        """The current token, for git over HTTPS (never for an agent's environment)."""
        return await self._token()

    async def _auth(self) -> dict[str, str]:
        """gidgethub's ``jwt`` or ``oauth_token`` argument."""
        return {"jwt" if self._jwt else "oauth_token": await self._token()}

    async def _call(
        self,
        method: str,
        request: Callable[..., Awaitable[Any]],
        path: str,
        url_vars: UrlVars | None,
        **kw: Any,
    ) -> Any:
        auth = await self._auth()
        try:
            return await request(path, _vars(url_vars), **kw, **auth)
        except gidgethub.HTTPException as exc:
            raise GitHubError(method, path, int(exc.status_code), _message(exc)) from None
        except gidgethub.GitHubException as exc:
            raise GitHubError(method, path, None, str(exc)) from None

    async def get(self, path: str, url_vars: UrlVars | None = None) -> Any:
        return await self._call("GET", self._api.getitem, path, url_vars)

    async def get_all(
        self, path: str, url_vars: UrlVars | None = None, *, key: str = ""
    ) -> list[Any]:
        """Every page of a list endpoint (``key`` names the list in a wrapped answer)."""

        async def collect(path: str, url_vars: dict[str, str], **auth: Any) -> list[Any]:
            pages = self._api.getiter(path, url_vars, iterable_key=key or None, **auth)
            return [item async for item in pages]

        result: list[Any] = await self._call("GET", collect, path, url_vars)
        return result

    async def post(self, path: str, url_vars: UrlVars | None = None, *, data: Any = None) -> Any:
        body = b"" if data is None else data
        return await self._call("POST", self._api.post, path, url_vars, data=body)

    async def patch(self, path: str, url_vars: UrlVars | None = None, *, data: Any) -> Any:
        return await self._call("PATCH", self._api.patch, path, url_vars, data=data)

    async def put(self, path: str, url_vars: UrlVars | None = None, *, data: Any = None) -> Any:
        body = b"" if data is None else data
        return await self._call("PUT", self._api.put, path, url_vars, data=body)

    async def delete(self, path: str, url_vars: UrlVars | None = None) -> None:
        await self._call("DELETE", self._api.delete, path, url_vars)

    async def download(self, path: str, url_vars: UrlVars | None = None) -> bytes:
        """A binary download (an artifact archive), following GitHub's redirect."""
        url = sansio.format_url(path, _vars(url_vars), base_url=self.base_url)
        headers = sansio.create_headers(USER_AGENT, **await self._auth())
        status, _, body = await self._api._request("GET", url, headers)
        if status >= 400:
            raise GitHubError("GET", path, status, body[:200].decode("utf-8", "replace"))
        return body


def _vars(url_vars: UrlVars | None) -> dict[str, str]:
    values = {k: str(v) for k, v in (url_vars or {}).items()}
    for name, value in values.items():
        # Expansion escapes "/", "?" and "#", but not dots, and the URL library drops dot
        # segments: ".." would climb out of the template to another endpoint.
        if value in (".", ".."):
            raise ScaffoldError(f"the URL variable {name!r} may not be {value!r}")
    return values


def _message(exc: gidgethub.HTTPException) -> str:
    text = str(exc) or exc.status_code.phrase
    errors = getattr(exc, "errors", None)
    return f"{text} {errors}" if errors else text


class GitHubAccess:
    """How the App reaches GitHub: one aiohttp session (opened on first use), who scaffold
    is there, and a client per installation."""

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_API_URL,
        app_id: int | None = None,
        policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.policy = policy or RetryPolicy()
        self._clock = clock
        self._sleep = sleep
        self._session: aiohttp.ClientSession | None = None
        self._transport: RetryingTransport | None = None
        self._clients: dict[int, GitHubClient] = {}
        self._identity = AppIdentity(app_id)

    def transport(self) -> RetryingTransport:
        if self._transport is None:
            self._session = aiohttp.ClientSession()
            self._transport = RetryingTransport(
                self._session,
                base_url=self.base_url,
                policy=self.policy,
                sleep=self._sleep,
                clock=self._clock,
            )
        return self._transport

    def identity(self) -> AppIdentity:
        return self._identity

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
            self._transport = None
            self._clients.clear()


class GitHubApp(GitHubAccess):
    """The self-hosted App: its JWT, and an installation token per installation."""

    def __init__(
        self,
        credentials: AppCredentials,
        *,
        base_url: str = DEFAULT_API_URL,
        policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        refresh_margin_s: float = 300.0,
    ) -> None:
        super().__init__(
            base_url=base_url, app_id=credentials.app_id, policy=policy, clock=clock, sleep=sleep
        )
        self.credentials = credentials
        self.tokens = TokenCache(self._mint, clock, refresh_margin_s)
        self._bot_login: str | None = None

    def app_client(self) -> GitHubClient:
        """Calls as the App itself (``/app``...), authenticated by a fresh JWT."""

        async def jwt_token() -> str:
            return self.credentials.jwt(self._clock())

        return GitHubClient(self.transport(), jwt_token, jwt=True)

    def installation(self, installation_id: int) -> GitHubClient:
        if installation_id not in self._clients:
            token = functools.partial(self.tokens.token, installation_id)
            self._clients[installation_id] = GitHubClient(self.transport(), token)
        return self._clients[installation_id]

    async def bot_login(self) -> str:
        """The App's bot account, ``<slug>[bot]``."""
        if self._bot_login is None:
            app = await self.app_client().get("/app")
            self._bot_login = f"{app['slug']}[bot]"
        return self._bot_login

    async def installation_ids(self) -> list[int]:
        installations = await self.app_client().get_all("/app/installations")
        return [int(inst["id"]) for inst in installations]

    async def _mint(self, installation_id: int) -> InstallationToken:
        data = await self.app_client().post(
            "/app/installations/{installation_id}/access_tokens",
            {"installation_id": installation_id},
        )
        return parse_token_response(data)


class TokenAccess(GitHubAccess):
    """``GitHubApp``'s surface over the workflow's ``GITHUB_TOKEN`` (the Action's
    ``event`` mode): every installation is the one the token belongs to."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str = DEFAULT_API_URL,
        app_id: int | None = None,
    ) -> None:
        # The App behind a plain token is not known up front: the first check run
        # scaffold creates with it says (and the Action keeps it for later runs).
        super().__init__(base_url=base_url, app_id=app_id)
        self._token = token

    def __repr__(self) -> str:
        return f"TokenAccess(base_url={self.base_url!r})"

    def installation(self, installation_id: int) -> GitHubClient:
        if not self._clients:
            self._clients[0] = GitHubClient(self.transport(), self._source)
        return self._clients[0]

    async def _source(self) -> str:
        return self._token

    async def bot_login(self) -> str:
        return "github-actions[bot]"

    async def installation_ids(self) -> list[int]:
        return []  # the repository of the workflow is known from its event


# A run left in progress longer than this (its server died mid-check) counts as none.
STALE_CHECK_S = 15 * 60


async def already_checked(
    client: GitHubClient, where: Mapping[str, str | int], sha: str, app: AppIdentity
) -> bool:
    """A current run of scaffold's own App exists for this commit (one of the same name
    from any other App or workflow does not count)."""
    try:
        runs = await check_runs(client, where, sha, check_name=CHECK_NAME, filter="all")
    except GitHubError:
        return False
    now = time.time()
    return any(r.get("name") == CHECK_NAME and app.owns(r) and _current(r, now) for r in runs)


def _current(run: Mapping[str, Any], now: float) -> bool:
    if run.get("status") == "completed":
        return True
    try:
        started = datetime.fromisoformat(str(run.get("started_at"))).timestamp()
    except ValueError:
        return False
    return now - started < STALE_CHECK_S
