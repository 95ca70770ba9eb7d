"""The webhook endpoint, healthz and metrics, through aiohttp's test client."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from webhook_support import Recorder, eventually, example, sign, signed_headers

from scaffold.server.app import INGEST, create_app
from scaffold.server.delivery import Delivery, DeliveryHandler
from scaffold.server.metrics import AppGauges
from scaffold.server.settings import ServerSettings

MakeClient = Callable[..., Awaitable[TestClient[Any, Any]]]


@pytest.fixture
def start(aiohttp_client: MakeClient) -> Callable[..., Awaitable[TestClient[Any, Any]]]:
    async def make(
        settings: ServerSettings,
        handler: DeliveryHandler,
        gauges: Callable[[], Awaitable[AppGauges]] | None = None,
    ) -> TestClient[Any, Any]:
        return await aiohttp_client(create_app(settings, handler, gauges=gauges))

    return make


async def post(
    client: TestClient[Any, Any], body: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    resp = await client.post("/webhook", data=body, headers=headers)
    return resp.status, json.loads(await resp.text())


async def test_good_delivery_is_queued_and_handled_once(start, settings, labeled) -> None:
    rec = Recorder()
    client = await start(settings, rec)
    headers = signed_headers(labeled, delivery="d-1")
    status, body = await post(client, labeled, headers)
    assert (status, body) == (202, {"status": "queued", "delivery": "d-1"})
    await rec.wait(1)
    await asyncio.sleep(0.05)
    assert len(rec.seen) == 1
    d = rec.seen[0]
    payload = json.loads(labeled)
    assert (d.id, d.event, d.action) == ("d-1", "issues", "labeled")
    assert d.payload == payload
    assert d.installation_id is None  # this example has no installation
    assert d.received_at > 0


async def test_installation_id_is_read(start, settings) -> None:
    rec = Recorder()
    client = await start(settings, rec)
    body = example("check_suite/requested.0.json")
    status, _ = await post(client, body, signed_headers(body, event="check_suite"))
    assert status == 202
    await rec.wait(1)
    assert rec.seen[0].installation_id == json.loads(body)["installation"]["id"]
    assert isinstance(rec.seen[0].installation_id, int)


async def test_form_encoded_delivery_is_accepted(start, settings, labeled) -> None:
    from urllib.parse import urlencode

    rec = Recorder()
    client = await start(settings, rec)
    form = urlencode({"payload": labeled.decode()}).encode()
    headers = {
        **signed_headers(form),
        "Content-Type": "application/x-www-form-urlencoded",
    }
    status, _ = await post(client, form, headers)
    assert status == 202
    await rec.wait(1)
    assert rec.seen[0].action == "labeled"


async def test_a_body_in_chunks_is_read_whole_and_the_limit_counts_them_all(
    start, settings, labeled
) -> None:
    rec = Recorder()
    client = await start(dataclasses.replace(settings, max_body_bytes=len(labeled)), rec)

    async def pieces(body: bytes):  # no Content-Length
        for i in range(0, len(body), 1000):
            yield body[i : i + 1000]
            await asyncio.sleep(0)

    headers = signed_headers(labeled, delivery="chunked")
    resp = await client.post("/webhook", data=pieces(labeled), headers=headers)
    assert resp.status == 202  # exactly at the limit
    await rec.wait(1)
    assert rec.seen[0].payload == json.loads(labeled)
    over = labeled + b" "  # still JSON, one byte over
    resp = await client.post("/webhook", data=pieces(over), headers=signed_headers(over))
    assert resp.status == 413


async def test_read_body_keeps_a_one_chunk_body_as_it_came() -> None:
    from scaffold.server.app import _read_body

    class Stream:  # what _read_body uses of aiohttp's StreamReader
        def __init__(self, *chunks: bytes) -> None:
            self.chunks = list(chunks)

        async def readany(self) -> bytes:
            return self.chunks.pop(0) if self.chunks else b""

    one = b'{"a": 1}' * 100
    assert await _read_body(Stream(one), len(one)) is one  # not copied
    assert await _read_body(Stream(b"ab", b"cd"), 4) == b"abcd"
    assert await _read_body(Stream(b"ab", b"cde"), 4) is None
    assert await _read_body(Stream(), 4) == b""


@pytest.mark.parametrize(
    ("change", "status", "outcome"),
    [
        ({"X-Hub-Signature-256": sign(b"something else")}, 401, "bad_signature"),
        ({"X-Hub-Signature-256": sign(b"", "other secret")}, 401, "bad_signature"),
        ({"X-Hub-Signature-256": None}, 401, "bad_signature"),
        ({"X-Hub-Signature-256": "sha1=0123"}, 401, "bad_signature"),
        ({"X-GitHub-Event": None}, 400, "bad_request"),
        ({"X-GitHub-Delivery": None}, 400, "bad_request"),
        ({"X-GitHub-Delivery": 'x" id'}, 400, "bad_request"),
        ({"X-GitHub-Event": "Issues; rm"}, 400, "bad_request"),
        ({"Content-Type": "text/plain"}, 400, "bad_request"),
    ],
)
async def test_refused_requests(start, settings, labeled, change, status, outcome) -> None:
    rec = Recorder()
    client = await start(settings, rec)
    headers = signed_headers(labeled)
    for key, value in change.items():
        if value is None:
            del headers[key]
        else:
            headers[key] = value
    got, body = await post(client, labeled, headers)
    assert (got, body["status"]) == (status, outcome)
    await asyncio.sleep(0.05)
    assert rec.seen == []


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b"\xff\xfe"])
async def test_malformed_json_is_400(start, settings, body) -> None:
    rec = Recorder()
    client = await start(settings, rec)
    status, reply = await post(client, body, signed_headers(body))
    assert (status, reply["status"]) == (400, "bad_request")
    assert rec.seen == []


async def test_body_over_the_limit_is_413(start, settings, labeled) -> None:
    rec = Recorder()
    client = await start(dataclasses.replace(settings, max_body_bytes=4096), rec)
    status, reply = await post(client, labeled, signed_headers(labeled))
    assert (status, reply["status"]) == (413, "too_large")

    async def chunks():  # no Content-Length: the limit holds while reading
        yield labeled

    resp = await client.post("/webhook", data=chunks(), headers=signed_headers(labeled))
    assert resp.status == 413
    small = b'{"action": "labeled"}'
    status, _ = await post(client, small, signed_headers(small))
    assert status == 202
    await rec.wait(1)
    assert [d.payload for d in rec.seen] == [{"action": "labeled"}]


async def test_unknown_event_is_accepted_and_handed_over(start, settings) -> None:
    rec = Recorder()
    client = await start(settings, rec)
    body = b'{"action": "frobnicated", "installation": {"id": 7}}'
    status, _ = await post(client, body, signed_headers(body, event="made_up_event"))
    assert status == 202
    await rec.wait(1)
    assert (rec.seen[0].event, rec.seen[0].action, rec.seen[0].installation_id) == (
        "made_up_event",
        "frobnicated",
        7,
    )


async def test_ping_is_pong(start, settings) -> None:
    rec = Recorder()
    client = await start(settings, rec)
    body = example("ping/_.0.json")
    status, reply = await post(client, body, signed_headers(body, event="ping"))
    assert (status, reply) == (200, {"status": "pong"})
    await asyncio.sleep(0.05)
    assert rec.seen == []


async def test_duplicate_is_not_handled_twice(start, settings, labeled) -> None:
    rec = Recorder()
    client = await start(settings, rec)
    headers = signed_headers(labeled, delivery="dup-1")
    assert (await post(client, labeled, headers))[0] == 202
    status, reply = await post(client, labeled, headers)
    assert (status, reply["status"]) == (200, "duplicate")
    await rec.wait(1)
    await asyncio.sleep(0.05)
    assert [d.id for d in rec.seen] == ["dup-1"]


async def test_duplicate_after_restart(start, settings, labeled) -> None:
    first = Recorder()
    client = await start(settings, first)
    headers = signed_headers(labeled, delivery="restart-1")
    assert (await post(client, labeled, headers))[0] == 202
    await first.wait(1)
    await client.close()

    second = Recorder()
    client = await start(settings, second)
    status, reply = await post(client, labeled, headers)
    assert (status, reply["status"]) == (200, "duplicate")
    other = signed_headers(labeled, delivery="restart-2")
    assert (await post(client, labeled, other))[0] == 202
    await second.wait(1)
    assert [d.id for d in second.seen] == ["restart-2"]


async def test_unhandled_delivery_is_handled_after_restart(start, settings, labeled) -> None:
    never = asyncio.Event()
    got: list[str] = []

    async def stuck(delivery: Delivery) -> None:
        got.append(delivery.id)
        await never.wait()

    client = await start(dataclasses.replace(settings, workers=1), stuck)
    ids = [f"spooled-{i}" for i in range(3)]
    for i in ids:
        assert (await post(client, labeled, signed_headers(labeled, delivery=i)))[0] == 202
    await eventually(lambda: got == ["spooled-0"])
    await client.close()  # stops the workers mid-handling: nothing was marked done

    rec = Recorder()
    client = await start(settings, rec)
    await rec.wait(3)
    assert [d.id for d in rec.seen] == ids
    assert rec.seen[0].payload == json.loads(labeled)
    assert (await post(client, labeled, signed_headers(labeled, delivery=ids[1])))[0] == 200
    await client.close()

    again = Recorder()
    client = await start(settings, again)
    await asyncio.sleep(0.1)
    assert again.seen == []  # handled ones are not handled a third time


async def test_queue_overflow_keeps_spool_references(start, settings, labeled) -> None:
    gate = asyncio.Event()
    got: list[Delivery] = []

    async def gated(delivery: Delivery) -> None:
        await gate.wait()
        got.append(delivery)

    client = await start(dataclasses.replace(settings, workers=1, max_parsed_in_queue=2), gated)
    ids = [f"burst-{i}" for i in range(10)]
    for i in ids:
        assert (await post(client, labeled, signed_headers(labeled, delivery=i)))[0] == 202
    gate.set()
    await eventually(lambda: len(got) == 10)
    assert [d.id for d in got] == ids
    assert all(d.payload == json.loads(labeled) and d.action == "labeled" for d in got)


async def test_crashing_handler_is_counted_and_the_next_works(
    start, settings, labeled, caplog
) -> None:
    rec = Recorder(fail_on={"crash-1"})
    client = await start(settings, rec)
    assert (await post(client, labeled, signed_headers(labeled, delivery="crash-1")))[0] == 202
    assert (await post(client, labeled, signed_headers(labeled, delivery="after-1")))[0] == 202
    await rec.wait(2)
    ingest = client.app[INGEST]
    await eventually(lambda: ingest.queue.in_flight == 0 and ingest.queue.depth == 0)
    text = (await (await client.get("/metrics")).text()).splitlines()
    assert 'scaffold_webhook_deliveries_total{event="issues",outcome="failed"} 1.0' in text
    assert 'scaffold_webhook_deliveries_total{event="issues",outcome="handled"} 1.0' in text
    failures = [r for r in caplog.records if r.getMessage() == "handler failed"]
    assert [(r.delivery, r.event) for r in failures] == [("crash-1", "issues")]


async def test_healthz(start, settings) -> None:
    client = await start(settings, Recorder())
    resp = await client.get("/healthz")
    assert resp.status == 200
    assert await resp.json() == {"status": "ok", "queue": 0, "in_flight": 0}
    client.app[INGEST].draining = True
    resp = await client.get("/healthz")
    assert resp.status == 503
    assert (await resp.json())["status"] == "draining"


async def test_metrics_text(start, settings, labeled) -> None:
    rec = Recorder()
    gauges = AppGauges(quests_by_state={"Running": 2, "Done": 5}, busy_slots=3, cost_usd_total=1.25)

    async def read() -> AppGauges:
        return gauges

    client = await start(settings, rec, gauges=read)
    headers = signed_headers(labeled, delivery="m-1")
    await post(client, labeled, headers)
    await post(client, labeled, headers)
    await post(client, labeled, {**headers, "X-Hub-Signature-256": sign(b"x")})
    await rec.wait(1)
    ingest = client.app[INGEST]
    await eventually(lambda: ingest.queue.in_flight == 0)
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    lines = (await resp.text()).splitlines()
    for expected in [
        'scaffold_webhook_deliveries_total{event="issues",outcome="queued"} 1.0',
        'scaffold_webhook_deliveries_total{event="issues",outcome="duplicate"} 1.0',
        'scaffold_webhook_deliveries_total{event="issues",outcome="handled"} 1.0',
        'scaffold_webhook_deliveries_total{event="-",outcome="bad_signature"} 1.0',
        "scaffold_webhook_handle_seconds_count 1.0",
        "scaffold_queue_depth 0.0",
        'scaffold_quests{state="Done"} 5.0',
        'scaffold_quests{state="Running"} 2.0',
        "scaffold_busy_slots 3.0",
        "scaffold_cost_usd_total 1.25",
    ]:
        assert expected in lines


async def test_two_apps_do_not_share_a_registry(start, settings, labeled, tmp_path) -> None:
    a = await start(settings, Recorder())
    b = await start(dataclasses.replace(settings, state_dir=tmp_path / "other"), Recorder())
    await post(a, labeled, signed_headers(labeled))
    text = await (await b.get("/metrics")).text()
    assert 'outcome="queued"' not in text


@pytest.mark.parametrize(
    "signature",
    [
        "sha256=" + "é" * 64,  # UTF-8 on the wire
        "sha256=" + "0" * 63 + "\udcff",  # a byte that is not UTF-8 at all
        "sha256=" + "0" * 63,  # ASCII, but too short to be a digest
    ],
    ids=["utf8", "not-utf8", "short"],
)
async def test_a_signature_that_is_not_a_hex_digest_is_401(
    start, settings, labeled, signature
) -> None:
    """hmac.compare_digest refuses non-ASCII strings with a TypeError: that must be a 401,
    never a 500. The request goes over a raw socket, bytes as an attacker sends them."""
    rec = Recorder()
    client = await start(settings, rec)
    headers = signed_headers(labeled)
    headers["X-Hub-Signature-256"] = signature
    head = f"POST /webhook HTTP/1.1\r\nHost: {client.host}\r\nConnection: close\r\n"
    head += f"Content-Length: {len(labeled)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    raw = head.encode("utf-8", "surrogateescape") + b"\r\n" + labeled
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(raw)
    await writer.drain()
    reply = await reader.read()
    writer.close()
    status_line, _, rest = reply.partition(b"\r\n")
    assert status_line.split()[1] == b"401", reply[:500]
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["status"] == "bad_signature"
    assert rec.seen == []  # refused before anything was queued
