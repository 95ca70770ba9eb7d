"""GitHubSimulator: a stateful, offline stand-in for GitHub (REST slice, webhooks, git over HTTP)."""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from . import events
from . import objects as ob
from .actions import WorkflowDispatch, WorkflowOutcome
from .deliveries import DeliveryRecord, Sender
from .gitrepo import ZERO, BareRepo, valid_branch
from .merging import mergeability
from .reviews import anchor, comment_spec, current_place, file_diff, thread_top
from .state import (
    PERMISSION_LEVELS,
    App,
    CheckRun,
    CheckSuite,
    Comment,
    Ids,
    Installation,
    Issue,
    Label,
    Protection,
    Pull,
    PullEvent,
    RefChange,
    RepoState,
    Review,
    ReviewComment,
    TimelineEntry,
    Token,
    User,
    WorkflowRun,
    now_iso,
)
from .webhooks import DeliverySchemaError, build_delivery

log = logging.getLogger("ghsim")
# What a completed check run may end as (GitHub sets ``stale`` itself, never an App).
CHECK_CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "skipped",
    "success",
    "timed_out",
)
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98})(?:\[bot\])?$")


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    headers: dict[str, str]
    body: Any
    times: int
    delay_s: float


class Repo:
    """Read access to one repository's state, for assertions."""

    def __init__(self, sim: GitHubSimulator, state: RepoState) -> None:
        self._sim = sim
        self.state = state
        self.bare = BareRepo(state.bare_path)

    @property
    def bare_path(self) -> Path:
        return self.state.bare_path

    @property
    def full_name(self) -> str:
        return self.state.full_name

    @property
    def clone_url(self) -> str:
        return f"{self._sim.urls.git}/{self.full_name}.git"

    @property
    def issues(self) -> dict[int, Issue]:
        return {n: i for n, i in self.state.issues.items() if not i.is_pull}

    @property
    def pulls(self) -> dict[int, Pull]:
        return self.state.pulls

    @property
    def comments(self) -> dict[int, Comment]:
        return self.state.comments

    @property
    def reactions(self) -> list[Any]:
        return self.state.reactions

    @property
    def check_runs(self) -> dict[int, CheckRun]:
        return self.state.check_runs

    @property
    def check_suites(self) -> dict[int, CheckSuite]:
        return self.state.check_suites

    @property
    def reviews(self) -> dict[int, Review]:
        return self.state.reviews

    @property
    def review_comments(self) -> dict[int, ReviewComment]:
        return self.state.review_comments

    @property
    def labels(self) -> dict[str, Label]:
        return self.state.labels

    @property
    def statuses(self) -> list[Any]:
        return self.state.statuses

    @property
    def workflow_runs(self) -> dict[int, Any]:
        return self.state.workflow_runs

    def branch_sha(self, branch: str) -> str | None:
        return self.bare.branch_sha(branch)

    def git(self, *args: str) -> str:
        return self.bare.out(*args)

    def file_at(self, ref: str, path: str) -> bytes | None:
        return self.bare.file_at(ref, path)


class GitHubSimulator:
    def __init__(
        self,
        root: Path,
        *,
        webhook_secret: str,
        webhook_url: str | None = None,
        app_id: int = 4242,
        app_slug: str = "scaffold-app",
        private_key_pem: bytes | None = None,
    ) -> None:
        self.root = Path(root)
        self.app_id = app_id
        self.app_slug = app_slug
        if private_key_pem is None:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            private_key_pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        self.private_key_pem = private_key_pem
        private = serialization.load_pem_private_key(private_key_pem, password=None)
        self.public_key_pem = private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.lock = threading.RLock()
        self.ids = Ids()
        self.users: dict[str, User] = {}
        self.repos: dict[str, RepoState] = {}
        self.installations: dict[int, Installation] = {}
        self.tokens: dict[str, Token] = {}
        self.tokens_issued = 0
        self.token_ttl_s = 3600
        self.violations: list[str] = []
        self.deliveries: list[DeliveryRecord] = []
        self.requests: list[tuple[str, str, int]] = []
        self.injected_hits = 0
        self.faults: list[Fault] = []
        # Seconds every API call waits before it is answered: a slow GitHub (e.g. one
        # whose token refreshes take ~100 ms) for tests of races between callers.
        self.latency_s = 0.0
        # Seconds every API call waits after it was handled, before its answer goes out:
        # a write GitHub has done whose answer is slow (the caller may give up meanwhile).
        self.answer_latency_s = 0.0
        self.workflow_runner: Callable[[WorkflowDispatch], WorkflowOutcome] | None = None
        self.rate_limit = 5000
        self.rate_used = 0
        self.rate_reset = int(time.time()) + 3600
        self.hook_id = 1
        self._held = False
        self._sender = Sender()
        self._sender.secret = webhook_secret
        self._sender.url = webhook_url
        self._sender.target_id = app_id
        self.bot_login = f"{app_slug}[bot]"
        self.url = ""
        self.add_user(self.bot_login, type="Bot")
        self.add_user("sim-app-owner")
        # Every App known to this GitHub: the one under test, and any a test adds (other
        # CI, a workflow's github-actions) whose check runs share names with its own.
        self.apps: dict[int, App] = {app_id: App(app_id, app_slug, "sim-app-owner")}
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._workers: list[threading.Thread] = []
        self.response_hook: Callable[[str, int, Any], Any] | None = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> GitHubSimulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        from .api import make_app

        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                runner = web.AppRunner(make_app(self), access_log=None)
                loop.run_until_complete(runner.setup())
                site = web.TCPSite(runner, "127.0.0.1", 0)
                loop.run_until_complete(site.start())
                sockets = site._server.sockets  # type: ignore[union-attr]
                port = sockets[0].getsockname()[1]
                self.url = f"http://127.0.0.1:{port}"
                self._runner = runner
                self._sender.start(loop)
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._sender.stop())
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self.root.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=run, name="ghsim", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise failure[0]

    def close(self) -> None:
        for worker in self._workers:
            worker.join(timeout=30)
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=15)
        self._loop = None

    @property
    def urls(self) -> ob.Urls:
        return ob.Urls(self.url)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    # ------------------------------------------------------------------ setup
    def add_user(self, login: str, *, type: str = "User") -> dict[str, Any]:
        if not _NAME.match(login):
            raise ValueError(f"bad login {login!r}")
        with self.lock:
            if login not in self.users:
                self.users[login] = User(login, self.ids.next(), type)
            return ob.user_obj(self.urls, self.users[login])

    def create_repo(
        self,
        owner: str,
        name: str,
        files: dict[str, str | bytes],
        *,
        default_branch: str = "main",
        private: bool = False,
    ) -> Repo:
        if not _NAME.match(name) or not valid_branch(default_branch):
            raise ValueError("bad repository name or branch")
        with self.lock:
            self.add_user(owner)
            path = self.root / "git" / owner / f"{name}.git"
            state = RepoState(self.ids.next(), owner, name, default_branch, private, path)
            git = BareRepo(path)
            git.init(default_branch)
            git.set_protected([])
            sha = git.commit_files(None, dict(files), "Initial commit")
            git.update_ref(f"refs/heads/{default_branch}", sha)
            self.repos[state.full_name.lower()] = state
            return Repo(self, state)

    def add_app(self, slug: str, *, owner: str = "sim-app-owner") -> int:
        """Another GitHub App (its bot user included); its id, for ``add_check_run``."""
        with self.lock:
            self.add_user(owner)
            app = App(self.ids.next(), slug, owner)
            self.apps[app.id] = app
            self.add_user(f"{slug}[bot]", type="Bot")
            return app.id

    def fork(self, full_name: str, owner: str) -> Repo:
        """``owner``'s fork of ``full_name``: its own repository (same name, every branch
        of the parent), whose branches can be the head of pull requests to the parent.
        The App is not installed on it: it gets no delivery about the fork itself."""
        with self.lock:
            parent = self.repo_state(full_name)
            self.add_user(owner)
            path = self.root / "git" / owner / f"{parent.name}.git"
            state = RepoState(
                self.ids.next(),
                owner,
                parent.name,
                parent.default_branch,
                parent.private,
                path,
                fork_of=parent.full_name,
            )
            if state.full_name.lower() in self.repos:
                raise ValueError(f"{state.full_name} exists")
            git = BareRepo(path)
            git.init(parent.default_branch)
            git.set_protected([])
            git.run(
                "fetch", "--quiet", "--no-tags", str(parent.bare_path), "+refs/heads/*:refs/heads/*"
            )
            self.repos[state.full_name.lower()] = state
            return Repo(self, state)

    def forks_of(self, repo: RepoState) -> list[RepoState]:
        return [r for r in self.repos.values() if r.fork_of == repo.full_name]

    def repo(self, full_name: str) -> Repo:
        return Repo(self, self.repo_state(full_name))

    def repo_state(self, full_name: str) -> RepoState:
        return self.repos[full_name.lower()]

    def git_of(self, repo: RepoState) -> BareRepo:
        return BareRepo(repo.bare_path)

    def install(self, owner: str, repos: list[str]) -> int:
        with self.lock:
            self.add_user(owner)
            full = [r if "/" in r else f"{owner}/{r}" for r in repos]
            for name in full:
                self.repo_state(name)
            inst = Installation(
                self.ids.next(), owner, [self.repo_state(n).full_name for n in full]
            )
            self.installations[inst.id] = inst
            events.installation_created(self, inst.id, owner)
            return inst.id

    def installation_for(self, full_name: str) -> Installation | None:
        for inst in self.installations.values():
            if any(r.lower() == full_name.lower() for r in inst.repos):
                return inst
        return None

    def set_permission(self, full_name: str, login: str, level: str) -> None:
        if level not in PERMISSION_LEVELS:
            raise ValueError(level)
        with self.lock:
            self.add_user(login)
            self.repo_state(full_name).permissions[login] = level

    def protect_branch(
        self,
        full_name: str,
        branch: str,
        *,
        required_checks: list[str] | None = None,
        required_approvals: int = 1,
        strict: bool = True,
        check_apps: dict[str, int] | None = None,
    ) -> None:
        """``check_apps`` pins a required check to the App that must report it."""
        with self.lock:
            repo = self.repo_state(full_name)
            repo.protections[branch] = Protection(
                branch,
                list(required_checks or []),
                required_approvals,
                strict,
                dict(check_apps or {}),
            )
            self.git_of(repo).set_protected(sorted(repo.protections))

    def set_webhook(self, url: str | None, secret: str) -> None:
        self._sender.url = url
        self._sender.secret = secret

    def hold_deliveries(self, hold: bool) -> None:
        self._held = hold

    def wait_deliveries(self, timeout: float = 10.0) -> None:
        if not self._sender.wait(timeout):
            raise TimeoutError(f"{self._sender.pending} deliveries still queued after {timeout}s")

    async def wait_deliveries_async(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self._sender.pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self._sender.pending} deliveries still queued")
            await asyncio.sleep(0.02)

    def redeliver(self, delivery_id: str) -> DeliveryRecord:
        with self.lock:
            original = next(d for d in self.deliveries if d.delivery_id == delivery_id)
            record = DeliveryRecord(
                original.event,
                original.action,
                original.delivery_id,
                original.payload,
                original.body,
                dict(original.headers),
                redelivery=True,
            )
            self.deliveries.append(record)
        self._sender.enqueue(record)
        return record

    def deliveries_of(self, event: str, action: str | None = None) -> list[DeliveryRecord]:
        return [
            d
            for d in self.deliveries
            if d.event == event and (action is None or d.action == action)
        ]

    def inject(
        self,
        method: str,
        path_regex: str,
        *,
        status: int,
        headers: dict[str, str] | None = None,
        body: Any = None,
        times: int = 1,
        delay_s: float = 0.0,
    ) -> None:
        with self.lock:
            self.faults.append(
                Fault(
                    method.upper(),
                    re.compile(path_regex),
                    status,
                    dict(headers or {}),
                    body,
                    times,
                    delay_s,
                )
            )

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and fault.method in (method, "*") and fault.path.search(path):
                    fault.times -= 1
                    self.injected_hits += 1
                    return fault
        return None

    def violation(self, text: str) -> None:
        log.error("GitHub simulator violation: %s", text)
        with self.lock:
            self.violations.append(text)

    # ------------------------------------------------------------------ deliveries
    def emit(self, event: str, action: str | None, payload: dict[str, Any]) -> DeliveryRecord:
        try:
            full = build_delivery(event, action, payload, api=self.url)
        except DeliverySchemaError as exc:
            self.violation(str(exc))
            raise
        with self.lock:
            record = self._sender.record(event, action, full, held=self._held)
            self.deliveries.append(record)
        self._sender.enqueue(record)
        return record

    # ------------------------------------------------------------------ tokens and JWTs
    def app_json(self, *, webhook: bool = False, app_id: int | None = None) -> dict[str, Any]:
        app = self.apps[self.app_id if app_id is None else app_id]
        obj = ob.app_obj(self.urls, app.id, app.slug, self.users[app.owner])
        if webhook:  # the webhook schema's `app` admits fewer keys than the REST one
            obj.pop("client_id")
            obj.pop("installations_count")
        return obj

    def app_jwt(self, *, expires_in: int = 540) -> str:
        now = int(time.time())
        return jwt.encode(
            {"iat": now - 30, "exp": now + expires_in, "iss": str(self.app_id)},
            self.private_key_pem,
            algorithm="RS256",
        )

    def verify_jwt(self, token: str) -> bool:
        skew = 60
        try:
            claims = jwt.decode(
                token,
                self.public_key_pem,
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"], "verify_iat": False},
                leeway=skew,
            )
        except jwt.PyJWTError:
            return False
        now = time.time()
        iat, exp = claims["iat"], claims["exp"]
        if not isinstance(iat, int | float) or not isinstance(exp, int | float):
            return False
        if str(claims["iss"]) != str(self.app_id):
            return False
        return exp - iat <= 600 and iat <= now + skew and exp > now - skew

    def issue_token(self, installation_id: int) -> Token:
        with self.lock:
            token = Token(
                "ghs_" + secrets.token_urlsafe(27)[:36].replace("-", "a").replace("_", "b"),
                installation_id,
                time.time() + self.token_ttl_s,
                dict(ob.APP_PERMISSIONS),
            )
            self.tokens[token.token] = token
            self.tokens_issued += 1
            return token

    def fork_workflow_token(self, full_name: str) -> str:
        """The ``GITHUB_TOKEN`` GitHub gives a workflow run for a pull request from a fork
        of ``full_name``: read-only (every API write answers 403 "Resource not accessible
        by integration", a push is refused) and the run gets no secrets."""
        inst = self.installation_for(full_name)
        if inst is None:
            raise KeyError(f"{full_name} is not installed")
        with self.lock:
            token = Token(
                "ghs_" + secrets.token_urlsafe(27)[:36].replace("-", "a").replace("_", "b"),
                inst.id,
                time.time() + self.token_ttl_s,
                dict.fromkeys(ob.APP_PERMISSIONS, "read"),
                read_only=True,
            )
            self.tokens[token.token] = token
            return token.token

    def live_token(self, token: str) -> Token | None:
        with self.lock:
            found = self.tokens.get(token)
        if found is None or found.expires_at <= time.time():
            return None
        return found

    def installation_token(self, full_name: str) -> str:
        """A fresh token for the installation covering ``full_name`` (for tests)."""
        inst = self.installation_for(full_name)
        if inst is None:
            raise KeyError(f"{full_name} is not installed")
        return self.issue_token(inst.id).token

    # ------------------------------------------------------------------ JSON of state
    def head_repo_of(self, repo: RepoState, pr: Pull) -> RepoState:
        return repo if pr.head_repo is None else self.repo_state(pr.head_repo)

    def refresh_pull(self, repo: RepoState, pr: Pull) -> None:
        """An open PR's head and base as their branches are now, and ``refs/pull/<n>/head``
        in the base repository pointing at the head (a fork's commits fetched into it),
        as GitHub keeps it for every pull request."""
        if pr.issue.state != "open":
            return
        git = self.git_of(repo)
        head_repo = self.head_repo_of(repo, pr)
        pr.head_sha = self.git_of(head_repo).branch_sha(pr.head) or pr.head_sha
        pr.base_sha = git.branch_sha(pr.base) or pr.base_sha
        ref = f"refs/pull/{pr.number}/head"
        if git.resolve(ref) == pr.head_sha:
            return
        if not git.object_exists(pr.head_sha):
            git.run("fetch", "--quiet", "--no-tags", str(head_repo.bare_path), pr.head_sha)
        git.update_ref(ref, pr.head_sha)

    def new_pull(
        self,
        repo: RepoState,
        head_repo: RepoState,
        head: str,
        base: str,
        title: str,
        body: str | None,
        author: str,
        *,
        draft: bool = False,
        maintainer_can_modify: bool = False,
    ) -> Pull:
        """Open a pull request of ``head_repo``'s ``head`` branch into ``repo``'s ``base``
        (raises ValueError with GitHub's reason when it cannot be opened)."""
        git = self.git_of(repo)
        head_sha = self.git_of(head_repo).branch_sha(head) if valid_branch(head) else None
        base_sha = git.branch_sha(base) if valid_branch(base) else None
        if head_sha is None:
            raise ValueError("head")
        if base_sha is None:
            raise ValueError("base")
        if not git.object_exists(head_sha):
            git.run("fetch", "--quiet", "--no-tags", str(head_repo.bare_path), head_sha)
        if not git.rev_list(f"{base_sha}..{head_sha}"):
            raise ValueError(f"No commits between {base} and {head}")
        same = head_repo is repo
        for other in repo.pulls.values():
            if (
                other.head == head
                and self.head_repo_of(repo, other) is head_repo
                and other.base == base
                and other.issue.state == "open"
            ):
                raise ValueError(f"A pull request already exists for {head_repo.owner}:{head}.")
        issue = Issue(repo.take_number(), self.ids.next(), title, body, author, is_pull=True)
        repo.issues[issue.number] = issue
        pr = Pull(
            issue.number,
            self.ids.next(),
            issue,
            head,
            base,
            head_sha,
            base_sha,
            draft=draft,
            maintainer_can_modify=maintainer_can_modify,
            head_repo=None if same else head_repo.full_name,
        )
        repo.pulls[pr.number] = pr
        self.refresh_pull(repo, pr)
        events.pull_request(self, repo, pr, "opened", author)
        return pr

    def pull_json(self, repo: RepoState, pr: Pull) -> dict[str, Any]:
        git = self.git_of(repo)
        self.refresh_pull(repo, pr)
        status = mergeability(git, repo, pr)
        files = git.changed_files(pr.base_sha, pr.head_sha)
        stats = {
            "commits": len(git.rev_list(f"{pr.base_sha}..{pr.head_sha}"))
            if pr.issue.state == "open"
            else 1,
            "additions": sum(int(f["additions"]) for f in files),  # type: ignore[call-overload]
            "deletions": sum(int(f["deletions"]) for f in files),  # type: ignore[call-overload]
            "changed_files": len(files),
        }
        return ob.pull_obj(
            self.urls,
            repo,
            pr,
            self.users,
            head_repo=self.head_repo_of(repo, pr),
            mergeable=status.mergeable,
            mergeable_state=status.state,
            stats=stats,
        )

    def pulls_for_sha(self, repo: RepoState, sha: str) -> list[tuple[Pull, RepoState]]:
        return [
            (p, self.head_repo_of(repo, p))
            for p in repo.pulls.values()
            if p.head_sha == sha and p.issue.state == "open"
        ]

    def suite_json(self, repo: RepoState, suite: CheckSuite) -> dict[str, Any]:
        git = self.git_of(repo)
        info = git.commit_info(suite.head_sha) if git.object_exists(suite.head_sha) else None
        return ob.suite_obj(
            self.urls,
            repo,
            suite,
            self.app_json(app_id=suite.app_id),
            self.users[repo.owner],
            self.pulls_for_sha(repo, suite.head_sha),
            info,
        )

    def check_run_json(self, repo: RepoState, run: CheckRun) -> dict[str, Any]:
        """A check run, with the App that created it (its suite's)."""
        suite = repo.check_suites[run.suite_id]
        return ob.check_run_obj(
            self.urls,
            repo,
            run,
            suite,
            self.app_json(app_id=suite.app_id),
            self.pulls_for_sha(repo, run.head_sha),
        )

    def suite_for(
        self,
        repo: RepoState,
        sha: str,
        branch: str | None,
        before: str | None = None,
        *,
        app_id: int | None = None,
    ) -> CheckSuite:
        """The check suite of ``app_id`` (default: the App under test) for ``sha``."""
        app_id = self.app_id if app_id is None else app_id
        for suite in repo.check_suites.values():
            if suite.head_sha == sha and suite.app_id == app_id:
                return suite
        suite = CheckSuite(self.ids.next(), sha, branch, app_id, before=before, after=sha)
        repo.check_suites[suite.id] = suite
        return suite

    def review_comment_json(
        self, repo: RepoState, comment: ReviewComment, *, webhook: bool = False
    ) -> dict[str, Any]:
        """A review comment where it sits on the pull request now (GitHub moves it along
        with later pushes until its lines change, then it is outdated)."""
        pr = repo.pulls[comment.pr_number]
        self.refresh_pull(repo, pr)
        place = current_place(self.git_of(repo), pr.base_sha, pr.head_sha, comment)
        return ob.review_comment_obj(
            self.urls,
            repo,
            comment,
            self.users,
            commit_id=place.commit_id,
            line=place.line,
            start_line=place.start_line,
            position=place.position,
            webhook=webhook,
        )

    def workflow_run_json(
        self, repo: RepoState, run: WorkflowRun, git: BareRepo | None = None
    ) -> dict[str, Any]:
        pulls = (
            [ob.pr_mini(self.urls, repo, p, h) for p, h in self.pulls_for_sha(repo, run.head_sha)]
            if run.event == "pull_request"
            else []
        )
        return ob.workflow_run_obj(
            self.urls, repo, run, self.users, git or self.git_of(repo), pulls
        )

    # ------------------------------------------------------------------ reviews (core)
    def note_pull_event(
        self, repo: RepoState, pr: Pull, action: str, sender: str, extra: dict[str, Any]
    ) -> None:
        """Keep what happened to a pull request, for ``timeline`` (called as its
        ``pull_request`` delivery goes out)."""
        detail = ""
        if action == "opened":
            detail = pr.issue.title
        elif action == "closed" and pr.merged:
            action, detail = "merged", f"{pr.merge_commit_sha or ''} into {pr.base}"
        elif action in ("review_requested", "review_request_removed"):
            detail = str((extra.get("requested_reviewer") or {}).get("login", ""))
        elif action in ("labeled", "unlabeled"):
            detail = str((extra.get("label") or {}).get("name", ""))
        elif action in ("synchronize", "edited"):
            return  # a push is in the ref log; an edit is not a happening worth a line
        repo.pull_events.append(PullEvent(self.ids.next(), pr.number, action, sender, detail))

    def commit_in_pull(self, repo: RepoState, pr: Pull, sha: str) -> bool:
        """Whether ``sha`` is one of the pull request's commits (a review or a comment of
        another commit is refused: "commit_id is not part of the pull request")."""
        git = self.git_of(repo)
        if len(sha) != 40 or not git.object_exists(sha):
            return False
        return git.is_ancestor(sha, pr.head_sha) and not git.is_ancestor(sha, pr.base_sha)

    def place_comments(
        self, repo: RepoState, pr: Pull, commit_id: str, items: list[Any]
    ) -> list[tuple[dict[str, Any], Any]]:
        """Each asked-for comment with its place on ``git diff base...commit_id``; raises
        AnchorError (GitHub's reasons) when any cannot be placed: nothing is stored then.
        File-level comments (``subject_type: file``) are not simulated: NotImplementedError."""
        git = self.git_of(repo)
        rows: dict[str, Any] = {}
        placed = []
        for item in items:
            spec = comment_spec(item)
            if spec.get("subject_type") == "file":
                raise NotImplementedError("file-level review comments (subject_type: file)")
            path = spec["path"]
            if path not in rows:
                rows[path] = file_diff(git, pr.base_sha, commit_id, path)
            side = spec.get("side") or "RIGHT"
            start_side = spec.get("start_side")
            placed.append(
                (
                    spec,
                    anchor(
                        rows[path],
                        line=spec.get("line"),
                        side=side,
                        start_line=spec.get("start_line"),
                        start_side=side if start_side == "side" else start_side,
                        position=spec.get("position"),
                    ),
                )
            )
        return placed

    def record_review(
        self,
        repo: RepoState,
        pr: Pull,
        user: str,
        state: str,
        body: str,
        commit_id: str,
        placed: list[tuple[dict[str, Any], Any]],
    ) -> Review:
        """A review with its inline comments (placed by ``place_comments``), delivered as
        GitHub does once it is submitted: one ``pull_request_review_comment.created`` per
        comment, then ``pull_request_review.submitted``. Submitting it answers a request
        for the reviewer's review (they leave ``requested_reviewers``)."""
        review = Review(self.ids.next(), pr.number, user, state, body, commit_id)
        repo.reviews[review.id] = review
        comments = []
        for spec, where in placed:
            comment = ReviewComment(
                self.ids.next(),
                pr.number,
                review.id,
                user,
                spec["body"],
                spec["path"],
                where.side,
                where.line,
                where.start_line,
                where.start_side,
                where.position,
                where.diff_hunk,
                commit_id,
            )
            repo.review_comments[comment.id] = comment
            comments.append(comment)
        if state != "PENDING":
            self._submitted(repo, pr, review, comments)
        return review

    def record_reply(
        self, repo: RepoState, pr: Pull, comment_id: int, user: str, body: str
    ) -> ReviewComment:
        """A reply in the thread of ``comment_id``: ``in_reply_to_id`` is the thread's first
        comment, and it sits where that one does. As on GitHub, a reply on its own is a
        review too (COMMENTED, no body), with the same two deliveries."""
        top = thread_top(repo.review_comments, comment_id)
        self.refresh_pull(repo, pr)
        review = Review(self.ids.next(), pr.number, user, "COMMENTED", "", pr.head_sha)
        repo.reviews[review.id] = review
        reply = ReviewComment(
            self.ids.next(),
            pr.number,
            review.id,
            user,
            body,
            top.path,
            top.side,
            top.original_line,
            top.original_start_line,
            top.start_side,
            top.original_position,
            top.diff_hunk,
            top.original_commit_id,
            in_reply_to_id=top.id,
        )
        repo.review_comments[reply.id] = reply
        self._submitted(repo, pr, review, [reply])
        return reply

    def _submitted(
        self, repo: RepoState, pr: Pull, review: Review, comments: list[ReviewComment]
    ) -> None:
        review.submitted_at = now_iso()
        if review.user in pr.requested_reviewers:
            pr.requested_reviewers.remove(review.user)
        pr.issue.updated_at = now_iso()
        for comment in comments:
            events.review_comment(self, repo, comment.id, "created", review.user)
        events.review_submitted(self, repo, review.id, review.user)

    def is_collaborator(self, repo: RepoState, login: str) -> bool:
        return login == repo.owner or repo.permissions.get(login, "none") != "none"

    def request_reviews(self, repo: RepoState, pr: Pull, logins: list[str], sender: str) -> None:
        """Ask ``logins`` for their review: each a collaborator, none the author (raises
        ValueError with GitHub's message, before anything changed); one
        ``pull_request.review_requested`` per newly requested reviewer."""
        for login in logins:
            if login == pr.issue.user:
                raise ValueError("Review cannot be requested from pull request author.")
            if login not in self.users or not self.is_collaborator(repo, login):
                raise ValueError(
                    "Reviews may only be requested from collaborators. One or more of the "
                    "users or teams you specified is not a collaborator of the "
                    f"{repo.full_name} repository."
                )
        for login in logins:
            if login in pr.requested_reviewers:
                continue
            pr.requested_reviewers.append(login)
            pr.issue.updated_at = now_iso()
            events.pull_request(
                self,
                repo,
                pr,
                "review_requested",
                sender,
                requested_reviewer=ob.user_obj(self.urls, self.users[login]),
            )

    def unrequest_reviews(self, repo: RepoState, pr: Pull, logins: list[str], sender: str) -> None:
        """Withdraw requests (one ``pull_request.review_request_removed`` each); a login
        that was not requested is passed over, as GitHub does."""
        for login in logins:
            if login not in pr.requested_reviewers:
                continue
            pr.requested_reviewers.remove(login)
            pr.issue.updated_at = now_iso()
            events.pull_request(
                self,
                repo,
                pr,
                "review_request_removed",
                sender,
                requested_reviewer=ob.user_obj(self.urls, self.users[login]),
            )

    # ------------------------------------------------------------------ GitHub Actions
    ACTIONS_APP_ID = 15368  # github-actions' id on github.com

    def actions_app_id(self) -> int:
        """The ``github-actions`` App (its bot included), made when first needed."""
        with self.lock:
            if self.ACTIONS_APP_ID not in self.apps:
                self.add_user("github", type="Organization")
                self.add_user("github-actions[bot]", type="Bot")
                self.apps[self.ACTIONS_APP_ID] = App(
                    self.ACTIONS_APP_ID, "github-actions", "github"
                )
            return self.ACTIONS_APP_ID

    def job_run(self, repo: RepoState, job_id: int) -> WorkflowRun | None:
        return next((r for r in repo.workflow_runs.values() if r.job_id == job_id), None)

    # ------------------------------------------------------------------ reactions to ref changes
    def on_ref_changes(
        self, repo: RepoState, changes: dict[str, tuple[str, str]], sender: str
    ) -> None:
        """Deliveries after refs moved (git push, API ref writes, merges): push,
        pull_request.synchronize / closed, check_suite.requested."""
        git = self.git_of(repo)
        installed = self.installation_for(repo.full_name) is not None
        for ref, (before, after) in sorted(changes.items()):
            repo.ref_log.append(RefChange(self.ids.next(), ref, before, after, sender))
            if not ref.startswith("refs/heads/"):
                continue
            branch = ref.removeprefix("refs/heads/")
            if installed or repo.fork_of is None:
                events.push(self, repo, git, ref, before, after, sender)
            # The PRs whose head is this branch of this repository: its own, and those
            # it sends, as a fork, to its parent (never a namesake branch elsewhere).
            heads = [(repo, p) for p in repo.pulls.values() if p.head_repo is None]
            for parent in self.repos.values():
                heads += [
                    (parent, p) for p in parent.pulls.values() if p.head_repo == repo.full_name
                ]
            for base_repo, pr in heads:
                if pr.issue.state != "open" or pr.head != branch:
                    continue
                if after == ZERO:
                    self._close_pull(base_repo, pr, sender)
                else:
                    old = pr.head_sha
                    pr.head_sha = after
                    pr.issue.updated_at = now_iso()
                    events.pull_request(
                        self, base_repo, pr, "synchronize", sender, before=old, after=after
                    )
            for pr in repo.pulls.values():
                if pr.issue.state == "open" and pr.base == branch and after != ZERO:
                    pr.base_sha = after
            if after != ZERO and installed:
                suite = self.suite_for(repo, after, branch, before)
                events.check_suite(self, repo, suite, "requested", sender)

    def _close_pull(self, repo: RepoState, pr: Pull, sender: str) -> None:
        pr.issue.state = "closed"
        pr.issue.closed_at = pr.issue.updated_at = now_iso()
        pr.issue.closed_by = sender
        events.pull_request(self, repo, pr, "closed", sender)

    # ------------------------------------------------------------------ person actions
    def _person(self, login: str) -> str:
        self.add_user(login)
        return login

    def open_issue(self, full_name: str, title: str, body: str, by: str) -> int:
        with self.lock:
            repo = self.repo_state(full_name)
            issue = Issue(repo.take_number(), self.ids.next(), title, body, self._person(by))
            repo.issues[issue.number] = issue
            events.issues(self, repo, issue.number, "opened", by)
            return issue.number

    def ensure_label(
        self, repo: RepoState, name: str, color: str = "ededed", description: str | None = None
    ) -> Label:
        if name not in repo.labels:
            repo.labels[name] = Label(self.ids.next(), name, color, description)
        return repo.labels[name]

    def label_issue(self, full_name: str, number: int, label: str, by: str) -> None:
        with self.lock:
            repo = self.repo_state(full_name)
            issue = repo.issues[number]
            self.ensure_label(repo, label)
            if label not in issue.labels:
                issue.labels.append(label)
                issue.updated_at = now_iso()
                self._labels_event(repo, issue, "labeled", label, self._person(by))

    def unlabel_issue(self, full_name: str, number: int, label: str, by: str) -> None:
        with self.lock:
            repo = self.repo_state(full_name)
            issue = repo.issues[number]
            if label in issue.labels:
                issue.labels.remove(label)
                issue.updated_at = now_iso()
                self._labels_event(repo, issue, "unlabeled", label, self._person(by))

    def _labels_event(
        self, repo: RepoState, issue: Issue, action: str, label: str, by: str
    ) -> None:
        if issue.is_pull:
            pr = repo.pulls[issue.number]
            events.pull_request(
                self, repo, pr, action, by, label=ob.label_obj(self.urls, repo, repo.labels[label])
            )
        else:
            events.issues(self, repo, issue.number, action, by, label=label)

    def comment(self, full_name: str, number: int, body: str, by: str) -> int:
        with self.lock:
            repo = self.repo_state(full_name)
            if number not in repo.issues:
                raise KeyError(number)
            comment = Comment(self.ids.next(), number, body, self._person(by))
            repo.comments[comment.id] = comment
            repo.issues[number].updated_at = now_iso()
            events.issue_comment(self, repo, comment.id, "created", by)
            return comment.id

    def submit_review(
        self,
        full_name: str,
        pr_number: int,
        state: str = "APPROVED",
        *,
        by: str,
        body: str = "",
        commit_id: str | None = None,
        comments: list[dict[str, Any]] | None = None,
    ) -> int:
        """A review of the PR's head as it is now (``commit_id``: of another commit of it),
        with inline ``comments`` (``{"path", "line", "side", "body"}``, and ``start_line``/
        ``start_side`` for a range) placed on the pull request's diff; raises ValueError
        with GitHub's reason when one is not on it. Deliveries: one
        ``pull_request_review_comment.created`` per comment, then
        ``pull_request_review.submitted``. Returns the review's id."""
        if state not in ("APPROVED", "CHANGES_REQUESTED", "COMMENTED"):
            raise ValueError(state)
        with self.lock:
            repo = self.repo_state(full_name)
            pr = repo.pulls[pr_number]
            self.refresh_pull(repo, pr)
            sha = commit_id or pr.head_sha
            placed = self.place_comments(repo, pr, sha, list(comments or []))
            review = self.record_review(repo, pr, self._person(by), state, body, sha, placed)
            return review.id

    def review_comments_of(self, full_name: str, review_id: int) -> list[int]:
        """The ids of a review's inline comments, in order."""
        with self.lock:
            repo = self.repo_state(full_name)
            return sorted(c.id for c in repo.review_comments.values() if c.review_id == review_id)

    def reply_review_comment(
        self, full_name: str, pr_number: int, comment_id: int, body: str, *, by: str
    ) -> int:
        """``by`` replies in the thread of review comment ``comment_id`` (GitHub files a
        reply under the thread's first comment). As on GitHub a reply is also a review
        (COMMENTED): deliveries ``pull_request_review_comment.created``, then
        ``pull_request_review.submitted``. Returns the reply's id."""
        with self.lock:
            repo = self.repo_state(full_name)
            pr = repo.pulls[pr_number]
            if repo.review_comments.get(comment_id, None) is None or (
                repo.review_comments[comment_id].pr_number != pr_number
            ):
                raise KeyError(comment_id)
            return self.record_reply(repo, pr, comment_id, self._person(by), body).id

    def request_review(
        self, full_name: str, pr_number: int, reviewers: list[str], *, by: str
    ) -> None:
        """``by`` asks ``reviewers`` (collaborators, not the author: else ValueError) for a
        review: one ``pull_request.review_requested`` per reviewer newly asked."""
        with self.lock:
            repo = self.repo_state(full_name)
            self.request_reviews(repo, repo.pulls[pr_number], list(reviewers), self._person(by))

    def dismiss_review(self, full_name: str, review_id: int, by: str) -> None:
        """A maintainer dismisses a review: its state becomes DISMISSED."""
        with self.lock:
            repo = self.repo_state(full_name)
            review = repo.reviews[review_id]
            review.state = "DISMISSED"
            events.review_dismissed(self, repo, review_id, self._person(by))

    def open_pull(
        self,
        full_name: str,
        head: str,
        *,
        by: str,
        title: str = "",
        body: str = "",
        base: str | None = None,
        head_repo: str | None = None,
    ) -> int:
        """A person opens a pull request into ``full_name``, of ``head`` in ``head_repo``
        (a fork of it; default: the repository itself)."""
        with self.lock:
            repo = self.repo_state(full_name)
            source = repo if head_repo is None else self.repo_state(head_repo)
            if source is not repo and source.fork_of != repo.full_name:
                raise ValueError(f"{head_repo} is not a fork of {full_name}")
            pr = self.new_pull(
                repo,
                source,
                head,
                base or repo.default_branch,
                title or head,
                body,
                self._person(by),
            )
            return pr.number

    def add_check_run(
        self,
        full_name: str,
        head_sha: str,
        name: str,
        *,
        app_id: int,
        conclusion: str = "success",
        summary: str = "",
        title: str | None = None,
        text: str | None = None,
        annotations: list[dict[str, Any]] | None = None,
        details_url: str | None = None,
    ) -> int:
        """A check run of another App (``add_app``) on ``head_sha``, as such an App makes
        one: created in progress, then completed with ``conclusion`` and its output
        (``title``, ``summary``, ``text``, ``annotations`` of ``{"path", "start_line",
        "end_line", "annotation_level", "message", "title"}``). Deliveries:
        ``check_run.created``, ``check_run.completed``, then ``check_suite.completed``
        once every run of the App's suite for the commit is complete. Returns its id."""
        if conclusion not in CHECK_CONCLUSIONS:
            raise ValueError(f"conclusion {conclusion!r} is none of {CHECK_CONCLUSIONS}")
        notes = [dict(a) for a in annotations or []]
        for note in notes:
            missing = {"path", "start_line", "end_line", "annotation_level", "message"} - set(note)
            if missing or note["annotation_level"] not in ("notice", "warning", "failure"):
                raise ValueError(f"bad annotation {note!r}")
        with self.lock:
            repo = self.repo_state(full_name)
            app = self.apps[app_id]
            bot = f"{app.slug}[bot]"
            branch = next((p.head for p in repo.pulls.values() if p.head_sha == head_sha), None)
            suite = self.suite_for(repo, head_sha, branch, app_id=app_id)
            run = CheckRun(
                self.ids.next(),
                name,
                head_sha,
                suite.id,
                status="in_progress",
                details_url=details_url,
                output={"title": None, "summary": None},
            )
            repo.check_runs[run.id] = run
            events.settle_suite(self, repo, suite, bot)
            events.check_run(self, repo, run, "created", bot)
            run.status, run.conclusion, run.completed_at = "completed", conclusion, now_iso()
            run.output = {"title": title or name, "summary": summary or conclusion}
            if text is not None:
                run.output["text"] = text
            run.annotations.extend(notes)
            events.check_run(self, repo, run, "completed", bot)
            events.settle_suite(self, repo, suite, bot)
            return run.id

    def add_actions_job(
        self,
        full_name: str,
        head_sha: str,
        name: str,
        *,
        conclusion: str,
        log: str,
        workflow: str = "ci.yml",
        by: str | None = None,
    ) -> int:
        """A GitHub Actions workflow run of ``workflow`` on ``head_sha`` with one job
        ``name`` that ends with ``conclusion``; its log download (a redirect, as GitHub's)
        serves ``log``. The job's check run is ``github-actions``' (``actions_app_id``),
        has the job's id and ``details_url`` ``.../actions/runs/{run_id}/job/{job_id}``,
        in a check suite of its own (one per workflow run, as on GitHub). ``by``: who
        triggered it (default: the author of the pull request whose head it is, else the
        owner). Deliveries, in order: ``workflow_run.requested``, ``workflow_job.queued``,
        ``check_run.created``, ``workflow_job.in_progress``, ``workflow_run.in_progress``,
        ``workflow_job.completed``, ``check_run.completed``, ``check_suite.completed``,
        ``workflow_run.completed``. Returns the job's id (= its check run's id)."""
        if conclusion not in CHECK_CONCLUSIONS:
            raise ValueError(f"conclusion {conclusion!r} is none of {CHECK_CONCLUSIONS}")
        app_id = self.actions_app_id()
        with self.lock:
            repo = self.repo_state(full_name)
            git = self.git_of(repo)
            if not git.object_exists(head_sha):
                raise ValueError(f"no commit {head_sha} in {full_name}")
            pulls = self.pulls_for_sha(repo, head_sha)
            actor = by or (pulls[0][0].issue.user if pulls else repo.owner)
            self._person(actor)
            branch = (
                pulls[0][0].head
                if pulls
                else next(
                    (
                        ref.removeprefix("refs/heads/")
                        for ref, sha in git.refs().items()
                        if sha == head_sha and ref.startswith("refs/heads/")
                    ),
                    repo.default_branch,
                )
            )
            suite = CheckSuite(self.ids.next(), head_sha, branch, app_id, after=head_sha)
            repo.check_suites[suite.id] = suite
            number = 1 + sum(1 for r in repo.workflow_runs.values() if r.workflow_id == workflow)
            run = WorkflowRun(
                self.ids.next(),
                workflow,
                workflow.rsplit(".", 1)[0],
                branch,
                head_sha,
                number,
                {},
                actor,
                self.ids.next(),
                event="pull_request" if pulls else "push",
                job_name=name,
                check_suite_id=suite.id,
                log=log,
            )
            repo.workflow_runs[run.id] = run
            web = f"{self.urls.web}/{repo.full_name}/actions/runs/{run.id}/job/{run.job_id}"
            check = CheckRun(
                run.job_id,
                name,
                head_sha,
                suite.id,
                status="queued",
                details_url=web,
                html_url=web,
                output={"title": None, "summary": None},
            )
            repo.check_runs[check.id] = check
            events.workflow(self, repo, run, "workflow_run", "requested")
            events.workflow(self, repo, run, "workflow_job", "queued")
            events.settle_suite(self, repo, suite, actor)
            events.check_run(self, repo, check, "created", actor)
            run.status = check.status = "in_progress"
            run.job_started_at = check.started_at = run.updated_at = now_iso()
            events.workflow(self, repo, run, "workflow_job", "in_progress")
            events.workflow(self, repo, run, "workflow_run", "in_progress")
            run.status, run.conclusion = "completed", conclusion
            run.job_completed_at = run.updated_at = now_iso()
            check.status, check.conclusion, check.completed_at = "completed", conclusion, now_iso()
            check.output = {"title": None, "summary": None}
            events.workflow(self, repo, run, "workflow_job", "completed")
            events.check_run(self, repo, check, "completed", actor)
            events.settle_suite(self, repo, suite, actor)
            events.workflow(self, repo, run, "workflow_run", "completed")
            return run.job_id

    def close_pr(self, full_name: str, number: int, by: str) -> None:
        with self.lock:
            repo = self.repo_state(full_name)
            self._close_pull(repo, repo.pulls[number], self._person(by))

    def reopen_pr(self, full_name: str, number: int, by: str) -> None:
        with self.lock:
            repo = self.repo_state(full_name)
            pr = repo.pulls[number]
            if pr.merged or pr.issue.state == "open":
                raise ValueError("only a closed, unmerged pull request can be reopened")
            pr.issue.state = "open"
            pr.issue.closed_at = pr.issue.closed_by = None
            pr.issue.updated_at = now_iso()
            events.pull_request(self, repo, pr, "reopened", self._person(by))

    def push_files(
        self,
        full_name: str,
        branch: str,
        files: dict[str, str | bytes | None],
        by: str,
        message: str,
    ) -> str:
        if not valid_branch(branch):
            raise ValueError(branch)
        with self.lock:
            repo = self.repo_state(full_name)
            git = self.git_of(repo)
            user = self.users[self._person(by)]
            before = git.branch_sha(branch)
            parent = before or git.branch_sha(repo.default_branch)
            sha = git.commit_files(
                parent, files, message, (user.login, f"{user.login}@users.sim.invalid")
            )
            git.update_ref(f"refs/heads/{branch}", sha, before)
            self.on_ref_changes(repo, {f"refs/heads/{branch}": (before or ZERO, sha)}, user.login)
            return sha

    def rerequest_check_run(self, full_name: str, check_run_id: int, by: str) -> None:
        with self.lock:
            repo = self.repo_state(full_name)
            run = repo.check_runs[check_run_id]
            if run.status != "completed":
                raise ValueError("only a completed check run can be re-requested")
            events.check_run(self, repo, run, "rerequested", self._person(by))

    def rerequest_check_suite(self, full_name: str, check_suite_id: int, by: str) -> None:
        with self.lock:
            repo = self.repo_state(full_name)
            events.check_suite(
                self, repo, repo.check_suites[check_suite_id], "rerequested", self._person(by)
            )

    # ------------------------------------------------------------------ a pull request's story
    def timeline(self, full_name: str, pr_number: int) -> list[TimelineEntry]:
        """What happened to a pull request, in order: opened, pushes to its head (from the
        record of ref moves), reviews, review comments and replies, issue comments, review
        requests and their withdrawal, labels, closing, reopening, merging. Each entry is
        ``(kind, when, who, summary)``."""
        with self.lock:
            repo = self.repo_state(full_name)
            pr = repo.pulls[pr_number]
            head_repo = self.head_repo_of(repo, pr)
            items: list[tuple[int, TimelineEntry]] = []

            def add(seq: int, kind: str, when: str, who: str, summary: str) -> None:
                items.append((seq, TimelineEntry(kind, when, who, _one_line(summary))))

            events_of = [e for e in repo.pull_events if e.pr_number == pr_number]
            for ev in events_of:
                add(ev.seq, ev.action, ev.at, ev.sender, ev.detail)
            opened = next((e.seq for e in events_of if e.action == "opened"), pr.id)
            ends = [e.seq for e in events_of if e.action in ("closed", "merged")]
            closed = ends[-1] if ends and pr.issue.state == "closed" else None
            head_git = self.git_of(head_repo)
            for change in head_repo.ref_log:
                if change.ref != f"refs/heads/{pr.head}" or change.seq < opened:
                    continue
                if closed is not None and change.seq > closed:
                    continue
                add(
                    change.seq,
                    "pushed",
                    change.at,
                    change.sender,
                    _push_summary(head_git, change.before, change.after),
                )
            carried = {c.review_id for c in repo.review_comments.values()}
            for review in repo.reviews.values():
                if review.pr_number != pr_number or review.state == "PENDING":
                    continue
                if review.state == "COMMENTED" and not review.body and review.id in carried:
                    continue  # a lone comment or reply: its comment tells it
                add(
                    review.id,
                    "review",
                    review.submitted_at,
                    review.user,
                    f"{review.state} at {review.commit_id[:7]}"
                    + (f": {review.body}" if review.body else ""),
                )
            for c in repo.review_comments.values():
                if c.pr_number != pr_number or repo.reviews[c.review_id].state == "PENDING":
                    continue
                lines = f"{c.original_start_line}-" if c.original_start_line else ""
                where = f"{c.path}:{lines}{c.original_line}"
                if c.in_reply_to_id is None:
                    add(c.id, "review_comment", c.created_at, c.user, f"#{c.id} {where}: {c.body}")
                else:
                    add(
                        c.id,
                        "reply",
                        c.created_at,
                        c.user,
                        f"#{c.id} to #{c.in_reply_to_id} ({where}): {c.body}",
                    )
            for comment in repo.comments.values():
                if comment.issue_number == pr_number:
                    add(comment.id, "comment", comment.created_at, comment.user, comment.body)
            return [entry for _, entry in sorted(items, key=lambda item: item[0])]

    def timeline_text(self, full_name: str, pr_number: int) -> str:
        """``timeline`` as lines to print: when, who, what, summary."""
        return "\n".join(
            f"{e.when}  {e.who:<22} {e.kind:<22} {e.summary}"
            for e in self.timeline(full_name, pr_number)
        )

    # ------------------------------------------------------------------ workers
    def spawn(self, target: Callable[[], None], name: str) -> None:
        worker = threading.Thread(target=target, name=name, daemon=True)
        self._workers.append(worker)
        worker.start()


def _one_line(text: str, limit: int = 120) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _push_summary(git: BareRepo, before: str, after: str) -> str:
    if after == ZERO:
        return "deleted the branch"
    if before == ZERO:
        return f"created at {after[:7]}"
    forced = not git.is_ancestor(before, after)
    shas = git.rev_list(f"{before}..{after}", "--reverse")
    subjects = "; ".join(
        (git.commit_info(sha).message.splitlines() or [""])[0] for sha in shas[:10]
    )
    word = "commit" if len(shas) == 1 else "commits"
    return (
        f"{before[:7]}..{after[:7]}{' (forced)' if forced else ''}: {len(shas)} {word}: {subjects}"
    )
