"""Signed webhook deliveries built from GitHub's example payloads, and a recording handler."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaffold.server.delivery import Delivery

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "github" / "webhook-examples"
SECRET = "test-webhook-secret-2f9c1"


def example(name: str) -> bytes:
    return (EXAMPLES / name).read_bytes()


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signed_headers(
    body: bytes, event: str = "issues", delivery: str | None = None, secret: str = SECRET
) -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(body, secret),
        "Content-Type": "application/json",
    }


@dataclass
class Recorder:
    """A handler that records what it gets; ``wait(n)`` until it has n deliveries."""

    seen: list[Delivery] = field(default_factory=list)
    fail_on: set[str] = field(default_factory=set)

    async def __call__(self, delivery: Delivery) -> None:
        self.seen.append(delivery)
        if delivery.id in self.fail_on:
            raise RuntimeError(f"boom on {delivery.id} with ghp_{'x' * 36}")

    async def wait(self, n: int, timeout: float = 20.0) -> None:
        async def until() -> None:
            while len(self.seen) < n:
                await asyncio.sleep(0.005)

        await asyncio.wait_for(until(), timeout)


async def eventually(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    async def until() -> None:
        while not cond():
            await asyncio.sleep(0.005)

    await asyncio.wait_for(until(), timeout)


Json = dict[str, Any]
PostFn = Callable[..., Awaitable[tuple[int, Json]]]


def body_json(text: str) -> Json:
    value = json.loads(text)
    assert isinstance(value, dict)
    return value
