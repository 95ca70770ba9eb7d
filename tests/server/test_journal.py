"""The dedupe log and the spool, on their own: compaction, torn tails, segment removal."""

from __future__ import annotations

import os
import random
import tracemalloc
from collections.abc import Callable

import pytest

from scaffold.server.dedupe import KeyRing, SeenIds
from scaffold.server.spool import Spool


def test_seen_ids_persist_and_stay_bounded(tmp_path) -> None:
    path = tmp_path / "ids.log"
    seen = SeenIds(path, limit=5)
    seen.load()
    for i in range(12):
        seen.add(f"id-{i}")
    assert len(seen) == 5
    assert "id-11" in seen
    assert "id-7" in seen
    assert "id-6" not in seen
    assert len(path.read_text().splitlines()) <= 10  # compacted at twice the limit
    seen.close()

    again = SeenIds(path, limit=5)
    again.load()
    assert len(again) == 5
    assert all(f"id-{i}" in again for i in range(7, 12))
    assert "id-6" not in again
    assert path.read_text().splitlines()[-5:] == [f"id-{i}" for i in range(7, 12)]
    again.close()


def test_seen_ids_reload_keeps_the_newest_of_a_long_log(tmp_path) -> None:
    path = tmp_path / "ids.log"
    path.write_text("".join(f"id-{i}\n" for i in range(30)) + "id-3\n\n")  # id-3 came back
    seen = SeenIds(path, limit=10)
    seen.load()  # 32 lines, over twice the limit: rewritten at once
    kept = [f"id-{i}" for i in range(21, 30)] + ["id-3"]
    assert path.read_text().splitlines() == kept
    assert all(i in seen for i in kept)
    assert "id-20" not in seen
    seen.add("id-30")  # appended after the rewrite, and the oldest (id-21) goes
    seen.close()
    assert path.read_text().splitlines() == [*kept, "id-30"]
    assert "id-21" not in seen


def test_seen_ids_rewrite_keeps_the_others_if_a_line_went_missing(tmp_path) -> None:
    """The one-pass rewrite expects the remembered ids' lines in order; a log changed
    under the server falls back to the newest line of each id still there."""
    path = tmp_path / "ids.log"
    seen = SeenIds(path, limit=3)
    seen.load()
    for i in "abcdef":
        seen.add(i)  # six lines: one more makes the rewrite
    path.write_text(path.read_text().replace("e\n", ""))  # e is remembered: d, e, f
    seen.add("g")  # d goes; the rewrite finds no line for e
    seen.close()
    assert path.read_text() == "f\ng\n"
    assert [i in seen for i in "defg"] == [False, True, True, True]
    again = SeenIds(path, limit=3)
    again.load()
    assert [i in again for i in "efg"] == [False, True, True]
    again.close()


def test_seen_ids_rewrite_is_durable_before_it_replaces_the_log(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A power loss right after a compaction must find the old log or the whole new one."""
    path = tmp_path / "ids.log"
    seen = SeenIds(path, limit=2)
    seen.load()
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync " + os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: object, dst: object) -> None:
        events.append(f"replace {os.path.basename(str(src))}")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    for i in "abcde":
        seen.add(i)  # the fifth line makes the rewrite
    seen.close()
    assert events == ["fsync ids.log.tmp", "replace ids.log.tmp", f"fsync {tmp_path.name}"]
    assert path.read_text() == "d\ne\n"


def _traced_peak(run: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_seen_ids_load_and_rewrite_stream_the_log(tmp_path) -> None:
    """Neither reads the whole log into memory: 40,001 lines (1.7 MB) cost the Python heap
    far less than the file (the ring and the index are memory maps, not on that heap)."""
    path = tmp_path / "ids.log"
    lines = [f"{i:032x}-delivery\n" for i in range(40_001)]
    path.write_text("".join(lines))
    seen = SeenIds(path, limit=20_000)
    assert _traced_peak(seen.load) < 200_000
    assert len(seen) == 20_000
    assert path.read_text() == "".join(lines[20_001:])  # over twice the limit: rewritten
    batch = [f"{i:032x}-more" for i in range(20_001)]
    start = seen.write(batch)
    assert _traced_peak(lambda: seen.confirm(batch, start)) < 200_000
    seen.close()  # the confirm made 40,001 lines: rewritten to the newest 20,000
    assert path.read_text().splitlines() == batch[1:]


def test_seen_ids_ignore_a_torn_last_line(tmp_path) -> None:
    path = tmp_path / "ids.log"
    path.write_bytes(b"a\nb\nhalf-writ")
    seen = SeenIds(path)
    seen.load()
    assert "a" in seen
    assert "b" in seen
    assert "half-writ" not in seen
    seen.add("c")
    seen.close()
    assert path.read_bytes() == b"a\nb\nc\n"


def test_spool_returns_only_unhandled_and_drops_done_segments(tmp_path) -> None:
    spool = Spool(tmp_path, segment_records=3)
    assert spool.open() == []
    refs = [spool.append(f"d{i}", "issues", 1.5 + i, b'{"n": %d}' % i) for i in range(7)]
    assert [spool.read(r) for r in refs] == [b'{"n": %d}' % i for i in range(7)]
    for i in (0, 1, 2, 4):
        spool.done(f"d{i}")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["seg-0000000002.log", "seg-0000000003.log"]  # the first one is gone
    spool.close()

    again = Spool(tmp_path, segment_records=3)
    left = again.open()
    assert [(r.id, r.event, r.received_at) for r in left] == [
        ("d3", "issues", 4.5),
        ("d5", "issues", 6.5),
        ("d6", "issues", 7.5),
    ]
    assert [again.read(r) for r in left] == [b'{"n": 3}', b'{"n": 5}', b'{"n": 6}']
    for r in left:
        again.done(r.id)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seg-0000000004.log"]
    again.close()


def test_spool_offsets_stay_right_with_done_marks_between(tmp_path) -> None:
    spool = Spool(tmp_path)
    spool.open()
    a = spool.append("a", "issues", 1.0, b'{"a": 1}')
    spool.done("a")
    b = spool.append("b", "push", 2.0, b'{"b": 2}')
    assert spool.read(b) == b'{"b": 2}'
    assert a.segment == b.segment
    spool.close()


def test_spool_stops_at_a_torn_record(tmp_path) -> None:
    spool = Spool(tmp_path)
    spool.open()
    spool.append("whole", "issues", 1.0, b'{"ok": true}')
    spool.close()
    seg = next(tmp_path.iterdir())
    with seg.open("ab") as f:
        f.write(b'A torn issues 2.0 100\n{"cut')
    again = Spool(tmp_path)
    assert [r.id for r in again.open()] == ["whole"]
    again.close()


def test_key_ring_keeps_the_newest_distinct_keys_in_order() -> None:
    """The dedupe ring and its index (linear probing, backward-shift deletion) against an
    insertion-ordered dict, with keys crowded into few home slots so runs wrap and shift."""
    for capacity in (1, 2, 5, 50, 700):
        for seed in range(6):
            rng = random.Random(seed)
            ring, ref = KeyRing(capacity), dict[int, None]()
            for _ in range(3000):
                r = rng.random()
                key = (
                    rng.getrandbits(64)
                    if r < 0.5
                    else rng.choice((0, 2**64 - 1))
                    if r < 0.52
                    else rng.randrange(80)
                )
                assert ring.add(key) == (key not in ref)
                if key not in ref:
                    ref[key] = None
                    if len(ref) > capacity:
                        del ref[next(iter(ref))]
                assert len(ring) == len(ref)
            assert list(ring) == list(ref)
            assert all(k in ring for k in ref)
            assert all(ring.position(k) >= 0 for k in ref)
            assert len({ring.position(k) for k in ref}) == len(ref)
            assert ring.position(next(k for k in others_keys(rng) if k not in ref)) == -1
            assert all((k in ring) == (k in ref) for k in others_keys(rng))


def others_keys(rng: random.Random) -> list[int]:
    return [rng.getrandbits(64) for _ in range(300)] + [rng.randrange(100) for _ in range(30)]


def test_key_ring_and_seen_ids_refuse_a_capacity_out_of_range(tmp_path) -> None:
    for bad in (0, 2**32):
        with pytest.raises(ValueError, match="from 1 to"):
            KeyRing(bad)
        with pytest.raises(ValueError, match="from 1 to"):
            SeenIds(tmp_path / "ids.log", limit=bad)


def test_key_ring_index_stays_between_half_and_three_quarters_full() -> None:
    """The index grows from 3/4 full to 1/2 full, and stops under 3/4 of the full ring."""
    ring = KeyRing(10_000)
    rng = random.Random(7)
    for _ in range(30_000):
        ring.add(rng.getrandbits(64))
        slots = ring._slots
        assert 4 * len(ring) <= 3 * slots
        if len(ring) > 12:
            assert slots <= 2 * len(ring)
    assert len(ring) == 10_000
    assert ring._slots == 10_000 * 4 // 3 + 1
