"""``default_dsl_store="rocksdb"``: DSL window, session and join stores on RocksDB, kept across restarts.

The windowed conformance cases run on RocksDB too (tests/conformance/test_conformance.py).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import kstream_nb as ks
from kstream_nb.processor.windows import JoinWindows, SessionWindows, TimeWindows
from kstream_nb.state.rocksdb_window import RocksDBSessionStore, RocksDBWindowStore
from tests.helpers import backend


def test_dsl_window_session_and_join_stores_are_rocksdb(tmp_path: Path) -> None:
    b = ks.StreamsBuilder()
    grouped = b.stream("clicks").group_by_key()
    # retention=100: the windows stay within the retention, so reads see them all (as Kafka's store)
    grouped.windowed_by(TimeWindows.of(10)).count(store="per-window", retention=100)
    grouped.windowed_by(SessionWindows.with_gap(5)).count(store="sessions", retention=100)
    left, right = b.stream("left"), b.stream("right")
    left.join(right, lambda lv, rv: f"{lv}+{rv}", JoinWindows.of(10)).to("joined")
    settings = {"default_dsl_store": "rocksdb", "state_dir": str(tmp_path)}
    with ks.TopologyTestDriver(b.build(), settings) as driver:
        clicks = driver.create_input_topic("clicks")
        clicks.pipe_input("u", 1, timestamp=1)
        clicks.pipe_input("u", 1, timestamp=3)
        clicks.pipe_input("u", 1, timestamp=12)
        driver.create_input_topic("left").pipe_input("k", "l", timestamp=5)
        driver.create_input_topic("right").pipe_input("k", "r", timestamp=7)
        joined = driver.create_output_topic("joined").read_key_values_to_list()
        stores = {name: s for task in driver.tasks for name, r in task.stores.items() for s in [r.store]}
        assert isinstance(backend(stores["per-window"]), RocksDBWindowStore)
        assert isinstance(backend(stores["sessions"]), RocksDBSessionStore)
        join_stores = [backend(s) for n, s in stores.items() if n.startswith("KSTREAM-JOIN")]
        assert len(join_stores) == 2 and all(isinstance(s, RocksDBWindowStore) for s in join_stores)
        assert all(s.retain_duplicates for s in join_stores)
        assert stores["per-window"].fetch_all() == [
            ("u", 0, ks.ValueAndTimestamp(2, 3)),
            ("u", 10, ks.ValueAndTimestamp(1, 12)),
        ]
        assert stores["sessions"].all() == [("u", 1, 3, 2), ("u", 12, 12, 1)]
    assert joined == [("k", "l+r")]


def test_restart_keeps_windows_and_restores_only_the_changelog_tail(tmp_path: Path) -> None:
    url = f"memory://rocks-win-{uuid.uuid4().hex[:8]}"
    b = ks.StreamsBuilder()
    grouped = b.stream("clicks").group_by_key()
    grouped.windowed_by(TimeWindows.of(60_000)).count(store="per-minute", retention="1h")
    grouped.windowed_by(SessionWindows.with_gap(60_000)).count(store="sessions", retention="1h")
    settings = {"state_dir": str(tmp_path), "default_dsl_store": "rocksdb", "commit_interval_ms": 50}

    ks.produce("clicks", [("a", 1), ("b", 1), ("a", 1)], url, timestamps=[1_000, 2_000, 61_000])
    app = ks.KafkaStreams(b.build(), "rocks-win", url, **settings).start()
    try:
        app.wait_until_running().wait_until_idle()
        assert app.store("per-minute").all() == [("a", 0, 60_000, 1), ("a", 60_000, 120_000, 1),
                                                 ("b", 0, 60_000, 1)]  # fmt: skip
    finally:
        assert app.stop()
    assert list(tmp_path.glob("rocks-win/0_0/rocksdb/per-minute/CURRENT"))
    assert list(tmp_path.glob("rocks-win/0_0/rocksdb/sessions/CURRENT"))
    assert list(tmp_path.glob("rocks-win/*/.checkpoint"))

    ks.produce("clicks", [("a", 1), ("c", 1)], url, timestamps=[62_000, 63_000])
    app = ks.KafkaStreams(b.build(), "rocks-win", url, **settings).start()
    try:
        app.wait_until_running().wait_until_idle()
        assert app.store("per-minute").all() == [
            ("a", 0, 60_000, 1), ("a", 60_000, 120_000, 2), ("b", 0, 60_000, 1), ("c", 60_000, 120_000, 1),
        ]  # fmt: skip
        assert app.store("sessions").all() == [
            ("a", 1_000, 62_000, 3), ("b", 2_000, 2_000, 1), ("c", 63_000, 63_000, 1),
        ]  # fmt: skip
        assert app.metrics()["restored-records-total"] == 0  # the windows were on disk: nothing replayed
    finally:
        assert app.stop()
