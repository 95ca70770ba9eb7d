"""The dedupe log and the spool, on their own: compaction, torn tails, segment removal."""

from __future__ import annotations

from scaffold.server.dedupe import SeenIds
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


def test_key_set_agrees_with_a_set_through_adds_and_discards() -> None:
    """The dedupe table (linear probing, backward-shift deletion) against Python's set,
    with keys crowded into few home slots so runs wrap and shift."""
    import random

    from scaffold.server.dedupe import KeySet

    for seed in range(20):
        rng = random.Random(seed)
        keys, ref = KeySet(), set()
        for _ in range(2000):
            key = rng.getrandbits(64) if rng.random() < 0.5 else rng.randrange(64)
            if rng.random() < 0.6:
                assert keys.add(key) == ((key or 1) not in ref)
                ref.add(key or 1)
            else:
                keys.discard(key)
                ref.discard(key or 1)
            assert len(keys) == len(ref)
        assert all(k in keys for k in ref)
        assert all(
            (k in keys) == ((k or 1) in ref) for k in (rng.getrandbits(64) for _ in range(300))
        )
