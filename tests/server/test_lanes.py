"""People before echoes: a person's delivery is handled before scaffold's own noise,
and the loop that acknowledges deliveries never waits for the App's work."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp.test_utils import TestClient
from webhook_support import eventually, example, signed_headers

from scaffold.server.app import INGEST, create_app
from scaffold.server.app_thread import AppThread
from scaffold.server.delivery import Delivery, by_a_person
from scaffold.server.settings import ServerSettings

MakeClient = Callable[..., Awaitable[TestClient[Any, Any]]]


def _delivery(event: str, action: str | None, sender: dict[str, Any]) -> Delivery:
    return Delivery("d", event, action, {"sender": sender}, None, 0.0)


def test_what_a_person_caused() -> None:
    alice = {"login": "alice", "type": "User"}
    bot = {"login": "scaffold-app[bot]", "type": "Bot"}
    assert by_a_person(_delivery("pull_request_review", "submitted", alice))
    assert by_a_person(_delivery("issues", "labeled", alice))
    assert by_a_person(_delivery("issue_comment", "created", alice))
    assert by_a_person(_delivery("pull_request", "closed", alice))
    # scaffold's own merge, its comments' edits, check suites and PR heads are echoes
    assert not by_a_person(_delivery("pull_request", "closed", bot))
    assert not by_a_person(_delivery("issue_comment", "created", {"login": "x[bot]"}))
    assert not by_a_person(_delivery("issue_comment", "edited", alice))
    assert not by_a_person(_delivery("check_suite", "requested", alice))
    assert not by_a_person(_delivery("pull_request", "synchronize", alice))
    assert not by_a_person(_delivery("push", None, alice))


async def test_an_approval_is_handled_while_echoes_hold_the_workers(
    aiohttp_client: MakeClient, settings: ServerSettings
) -> None:
    release = asyncio.Event()
    handled: list[str] = []

    async def handler(d: Delivery) -> None:
        handled.append(d.event)
        if d.event == "check_suite":
            await release.wait()

    client = await aiohttp_client(create_app(settings, handler))
    suite = _check_suite()
    for _ in range(20):
        resp = await client.post(
            "/webhook", data=suite, headers=signed_headers(suite, "check_suite")
        )
        assert resp.status == 202
    review = example("pull_request_review/submitted.0.json")
    resp = await client.post(
        "/webhook", data=review, headers=signed_headers(review, "pull_request_review")
    )
    assert resp.status == 202
    await eventually(lambda: "pull_request_review" in handled)
    assert handled.count("check_suite") < 20  # the echoes still wait; the person did not
    release.set()
    ingest = client.app[INGEST]
    await eventually(lambda: len(handled) == 21 and ingest.queue.in_flight == 0)


def _check_suite() -> bytes:
    payload = {
        "action": "requested",
        "check_suite": {"id": 1, "head_sha": "0" * 40, "pull_requests": []},
        "repository": {"full_name": "acme/widgets"},
        "sender": {"login": "scaffold-app[bot]", "type": "Bot"},
    }
    return json.dumps(payload).encode()


async def test_acknowledged_while_the_app_loop_is_held(
    aiohttp_client: MakeClient, settings: ServerSettings, labeled: bytes
) -> None:
    """The App's handler holds its own loop's thread (as a fork, an fsync or git would);
    deliveries are still answered 202, since the App runs on a loop of its own."""
    app_thread = AppThread()
    app_thread.start()
    held = threading.Event()
    go_on = threading.Event()
    seen: list[str] = []

    async def blocking(d: Delivery) -> None:
        seen.append(d.id)
        held.set()
        go_on.wait(60)  # blocks the App's loop itself, not a coroutine of it

    async def handler(d: Delivery) -> None:
        await app_thread.call(blocking(d))

    try:
        client = await aiohttp_client(create_app(settings, handler))
        resp = await client.post("/webhook", data=labeled, headers=signed_headers(labeled))
        assert resp.status == 202
        await eventually(held.is_set)
        for _ in range(5):
            resp = await client.post("/webhook", data=labeled, headers=signed_headers(labeled))
            assert resp.status == 202
        assert len(seen) == 1  # the App's loop is still held
        go_on.set()
        await eventually(lambda: len(seen) == 6)
    finally:
        go_on.set()
        await asyncio.to_thread(app_thread.close)


async def test_a_cancelled_call_cancels_the_coroutine_on_the_app_loop() -> None:
    app_thread = AppThread()
    app_thread.start()
    started = threading.Event()
    cancelled = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    try:
        call = asyncio.ensure_future(app_thread.call(forever()))
        await asyncio.to_thread(started.wait, 30)
        call.cancel()
        assert await asyncio.to_thread(cancelled.wait, 30)
    finally:
        await asyncio.to_thread(app_thread.close)
