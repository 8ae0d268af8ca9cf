"""Versioned key-value stores (KIP-889): put return codes, as-of reads, history retention = grace, restore.

The expectations transcribe Kafka Streams' RocksDBVersionedStoreTest (history retention 300 000 ms, segment
interval 100 000 ms, base timestamp 10) and run on both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.errors import IllegalStateError
from kstream_nb.state.builders import Stores, changelog_topic_config
from kstream_nb.state.suppliers import VersionedKeyValueStoreSupplier
from kstream_nb.state.versioned import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    VersionedRecord,
    VersionedStoreBackend,
)
from tests.state.conftest import FakeContext

HISTORY = 300_000
SEGMENT = HISTORY // 3
BASE = 10
LATEST = PUT_RETURN_CODE_VALID_TO_UNDEFINED


class DropCountingContext(FakeContext):
    """A store context that also counts the dropped records a store reports (the task's metric)."""

    def __init__(self, state_dir: str) -> None:
        super().__init__(state_dir=state_dir)
        self.dropped: list[tuple[str, str]] = []

    def record_dropped(self, processor: str, reason: str) -> None:
        self.dropped.append((processor, reason))


def make_store(persistent: bool, history: int, tmp_path: Any) -> tuple[VersionedStoreBackend, DropCountingContext]:
    store = VersionedKeyValueStoreSupplier("versioned", history, SEGMENT, persistent=persistent).get()
    use_serdes = getattr(store, "use_serdes", None)
    if use_serdes is not None:
        use_serdes(serde_from("string"), serde_from("string"))
    context = DropCountingContext(str(tmp_path))
    store.init(context)
    return store, context


@pytest.fixture(params=[False, True], ids=["in-memory", "rocksdb"])
def backend(request: Any, tmp_path: Any) -> Iterator[tuple[VersionedStoreBackend, DropCountingContext]]:
    store, context = make_store(request.param, HISTORY, tmp_path)
    yield store, context
    store.close()


@pytest.fixture
def store(backend: tuple[VersionedStoreBackend, DropCountingContext]) -> VersionedStoreBackend:
    return backend[0]


def put(store: VersionedStoreBackend, key: str, value: str | None, timestamp: int, expected: int) -> None:
    assert store.put(key, value, timestamp) == expected, (key, value, timestamp)


def found(value: str, valid_from: int, valid_to: int) -> VersionedRecord:
    return VersionedRecord(value, valid_from, None if valid_to == LATEST else valid_to)


def test_put_latest(store) -> None:
    put(store, "k", "v", BASE, LATEST)
    put(store, "k", "v2", BASE + 1, LATEST)
    assert store.get("k") == VersionedRecord("v2", BASE + 1)
    assert store.get("k", BASE) == found("v", BASE, BASE + 1)
    assert store.get("k", BASE + 1) == found("v2", BASE + 1, LATEST)
    assert store.get("k", BASE + 2) == found("v2", BASE + 1, LATEST)


def test_put_null_as_latest(store) -> None:
    put(store, "k", None, BASE, LATEST)
    put(store, "k", None, BASE + 1, LATEST)
    assert store.get("k") is None
    assert [store.get("k", t) for t in (BASE, BASE + 1, BASE + 2)] == [None, None, None]


def test_put_older_with_non_null_latest(store) -> None:
    put(store, "k", "v", BASE, LATEST)
    put(store, "k", "v2", BASE - 2, BASE)
    put(store, "k", "v1", BASE - 1, BASE)
    put(store, "k", "v4", BASE - 4, BASE - 2)
    assert store.get("k") == VersionedRecord("v", BASE)
    assert store.get("k", BASE) == found("v", BASE, LATEST)
    assert store.get("k", BASE - 1) == found("v1", BASE - 1, BASE)
    assert store.get("k", BASE - 2) == found("v2", BASE - 2, BASE - 1)
    assert store.get("k", BASE - 3) == found("v4", BASE - 4, BASE - 2)


def test_put_older_null_with_non_null_latest(store) -> None:
    put(store, "k", "v", BASE, LATEST)
    put(store, "k", None, BASE - 2, BASE)
    put(store, "k", None, BASE - 1, BASE)
    put(store, "k", None, BASE - 4, BASE - 2)
    put(store, "k", "v5", BASE - 5, BASE - 4)
    put(store, "k", "v3", BASE - 3, BASE - 2)
    put(store, "k", None, BASE - 6, BASE - 5)
    assert store.get("k") == VersionedRecord("v", BASE)
    assert store.get("k", BASE - 1) is None and store.get("k", BASE - 2) is None
    assert store.get("k", BASE - 3) == found("v3", BASE - 3, BASE - 2)
    assert store.get("k", BASE - 4) is None
    assert store.get("k", BASE - 5) == found("v5", BASE - 5, BASE - 4)
    assert store.get("k", BASE - 6) is None


def test_put_repeat_timestamp_replaces_the_version(store) -> None:
    put(store, "k", "to_be_replaced", BASE, LATEST)
    put(store, "k", "b", BASE, LATEST)
    assert store.get("k", BASE) == found("b", BASE, LATEST) and store.get("k", BASE - 1) is None
    put(store, "k", None, BASE, LATEST)
    assert store.get("k") is None and store.get("k", BASE) is None
    put(store, "k", None, BASE, LATEST)
    put(store, "k", "b", BASE, LATEST)
    assert store.get("k") == VersionedRecord("b", BASE)


def test_put_repeat_timestamps_across_segments(store) -> None:
    s = SEGMENT
    put(store, "k", "to_be_replaced", s + 20, LATEST)
    put(store, "k", None, s - 10, s + 20)
    put(store, "k", "to_be_replaced", s - 10, s + 20)
    put(store, "k", None, s - 10, s + 20)
    put(store, "k", "to_be_replaced", s - 1, s + 20)
    put(store, "k", "to_be_replaced", s + 1, s + 20)
    put(store, "k", None, s - 1, s + 1)
    put(store, "k", None, s + 1, s + 20)
    put(store, "k", None, s + 10, s + 20)
    put(store, "k", None, s + 5, s + 10)
    put(store, "k", "vp5", s + 5, s + 10)
    put(store, "k", "to_be_replaced", s - 5, s - 1)
    put(store, "k", "vn5", s - 5, s - 1)
    put(store, "k", None, s + 20, LATEST)
    put(store, "k", None, s + 20, LATEST)
    put(store, "k", "vn6", s - 6, s - 5)
    assert store.get("k") is None
    for t in (s + 30, s + 15, s + 2, s, s - 1, s - 8):
        assert store.get("k", t) is None, t
    assert store.get("k", s + 6) == found("vp5", s + 5, s + 10)
    assert store.get("k", s - 5) == found("vn5", s - 5, s - 1)
    assert store.get("k", s - 6) == found("vn6", s - 6, s - 5)


def test_non_latest_tombstone_gets_a_valid_to(store) -> None:
    s = SEGMENT
    put(store, "k", "vp30", s + 30, LATEST)
    put(store, "k", None, s - 10, s + 30)
    put(store, "k", "vn5", s - 5, s + 30)
    put(store, "k", "vn1", s - 1, s + 30)
    put(store, "k", None, s - 2, s - 1)
    assert store.get("k", s + 10) == found("vn1", s - 1, s + 30)
    assert store.get("k", s - 2) is None
    assert store.get("k", s - 5) == found("vn5", s - 5, s - 2)
    assert store.get("k", s - 10) is None


def test_delete_returns_the_version_it_replaced(store) -> None:
    s = SEGMENT
    put(store, "k", "vp20", s + 20, LATEST)
    put(store, "k", "vp10", s + 10, s + 20)
    put(store, "k", "vn10", s - 10, s + 10)
    put(store, "k", "vn2", s - 2, s + 10)
    assert store.delete("k", s - 5) == found("vn10", s - 10, s - 2)  # the version as of s - 5, before the delete
    assert store.delete("k", s + 10) == found("vp10", s + 10, s + 20)
    assert store.delete("k", s + 10) is None
    assert store.delete("k", s + 25) == VersionedRecord("vp20", s + 20)


def test_writes_older_than_the_grace_period_are_not_put(backend) -> None:
    store, context = backend
    put(store, "k", "v", HISTORY + 10, LATEST)
    put(store, "k1", "v1", 10, LATEST)  # exactly stream time - grace: still accepted
    assert store.get("k1") == VersionedRecord("v1", 10)
    put(store, "k2", "v2", 9, PUT_RETURN_CODE_NOT_PUT)
    assert store.get("k2") is None
    assert len(context.dropped) == 1 and context.dropped[0][0] == "versioned"


def test_deletes_older_than_the_grace_period_are_not_applied(backend) -> None:
    store, context = backend
    put(store, "k1", "v1", 1, LATEST)
    put(store, "k2", "v2", 1, LATEST)
    put(store, "kother", "vother", HISTORY + 10, LATEST)
    assert store.delete("k1", 10) == found("v1", 1, LATEST)
    assert store.get("k1") is None
    assert store.delete("k2", 9) is None
    assert store.get("k2") == VersionedRecord("v2", 1)
    assert len(context.dropped) == 1


def test_history_older_than_retention_is_not_read(store) -> None:
    s = SEGMENT
    put(store, "k", "v_old", 0, LATEST)
    put(store, "k", "v", s - 10, LATEST)
    assert store.get("k", s - 11) == found("v_old", 0, s - 10)
    put(store, "ko", "vo", HISTORY + s - 11, LATEST)
    assert store.get("k", s - 11) == found("v_old", 0, s - 10)
    put(store, "ko", "vo2", HISTORY + s - 10, LATEST)
    assert store.get("k", s - 11) is None


def test_the_latest_version_never_expires(store) -> None:
    put(store, "k", "v", 1, LATEST)
    put(store, "ko", "vo_old", 1, LATEST)
    put(store, "ko", "vo_new", HISTORY + 12, LATEST)
    assert store.get("k", 10) == found("v", 1, LATEST)
    assert store.get("ko", 10) is None


def test_zero_history_retention(tmp_path) -> None:
    for persistent in (False, True):
        store, context = make_store(persistent, 0, tmp_path / str(persistent))
        put(store, "k", "v", BASE, LATEST)
        assert store.get("k", BASE + 1) == found("v", BASE, LATEST)  # a query "in the future" is allowed
        put(store, "k", "updated", BASE, LATEST)
        put(store, "k", "v2", BASE + 2, LATEST)
        assert store.get("k", BASE + 1) is None  # history retention expired
        store.delete("k", BASE + 3)
        assert store.get("k") is None
        put(store, "k2", "v", BASE + 2, PUT_RETURN_CODE_NOT_PUT)
        assert len(context.dropped) == 1
        store.close()


def test_restore_replays_changes_in_changelog_order(store) -> None:
    s = SEGMENT
    for key, value, ts in [("k", "vp20", s + 20), ("k", "vp10", s + 10), ("k", "vn10", s - 10),
                           ("k", "vn2", s - 2), ("k", "vn1", s - 1), ("k", "vp1", s + 1)]:  # fmt: skip
        store.restore_put(key, value, ts)
    assert store.get("k") == VersionedRecord("vp20", s + 20)
    assert store.get("k", s + 15) == found("vp10", s + 10, s + 20)
    assert store.get("k", s + 5) == found("vp1", s + 1, s + 10)
    assert store.get("k", s) == found("vn1", s - 1, s + 1)
    assert store.get("k", s - 2) == found("vn2", s - 2, s - 1)
    assert store.get("k", s - 5) == found("vn10", s - 10, s - 2)


def test_restore_skips_expired_records_without_counting_them(backend) -> None:
    store, context = backend
    store.restore_put("k", "v", HISTORY + 10)
    store.restore_put("k1", "v1", 10)
    store.restore_put("k2", "v2", 9)
    assert store.get("k1") == VersionedRecord("v1", 10) and store.get("k2") is None
    assert context.dropped == []


def test_rows_of_expired_segments_are_dropped(store) -> None:
    put(store, "k", "a", 0, LATEST)
    put(store, "k", "b", 5, LATEST)
    put(store, "gone", "x", 1, LATEST)
    put(store, "gone", None, 2, LATEST)
    put(store, "other", "z", HISTORY + 3 * SEGMENT, LATEST)  # segments before 3 expire
    assert store._load("k").rows == {} and store.get("k") == VersionedRecord("b", 5)
    assert not store._load("gone")
    assert [kv.key for kv in store.all()] == ["k", "other"]


def test_a_tombstone_at_the_latest_timestamp_removes_that_version(store) -> None:
    """As Kafka: the deletion is remembered only where a row ends at that timestamp (reference-checked)."""
    put(store, "first", "a9", 17, LATEST)
    put(store, "first", None, 17, LATEST)  # no older version ends at 17: nothing remembers the delete
    put(store, "first", "x1", 15, LATEST)  # so this out-of-order value becomes the latest
    assert store.get("first") == VersionedRecord("x1", 15)
    put(store, "moved", "a", 10, LATEST)
    put(store, "moved", "b", 17, LATEST)  # "a" now ends at 17
    put(store, "moved", None, 17, LATEST)
    put(store, "moved", "x", 15, 17)
    assert store.get("moved") is None and store.get("moved", 16) == found("x", 15, 17)
    put(store, "explicit", "b", 20, LATEST)
    put(store, "explicit", None, 15, 20)  # an out-of-order tombstone, valid to 20
    put(store, "explicit", None, 20, LATEST)
    put(store, "explicit", "x", 17, 20)
    assert store.get("explicit") is None and store.get("explicit", 18) == found("x", 17, 20)
    put(store, "degenerate", None, 17, LATEST)
    put(store, "degenerate", "a", 17, LATEST)
    put(store, "degenerate", None, 17, LATEST)
    put(store, "degenerate", "x", 15, 17)
    assert store.get("degenerate") is None


def test_iq_reads_of_latest_versions(store) -> None:
    put(store, "b", "2", 5, LATEST)
    put(store, "a", "1", 6, LATEST)
    put(store, "c", None, 7, LATEST)
    assert store.all() == [("a", VersionedRecord("1", 6)), ("b", VersionedRecord("2", 5))]
    assert store.range("b", None) == [("b", VersionedRecord("2", 5))]
    assert len(store) == 2
    assert store.to_pandas().to_dict("records") == [
        {"key": "a", "value": "1", "timestamp": 6},
        {"key": "b", "value": "2", "timestamp": 5},
    ]


def test_rocksdb_backend_keeps_versions_on_disk(tmp_path) -> None:
    store, _ = make_store(True, HISTORY, tmp_path)
    put(store, "k", "v1", 1, LATEST)
    put(store, "k", "v2", 5, LATEST)
    store.close()
    reopened, _ = make_store(True, HISTORY, tmp_path)
    assert reopened.get("k") == VersionedRecord("v2", 5)
    assert reopened.get("k", 3) == found("v1", 1, 5)
    assert reopened.observed_stream_time == -1  # as in Kafka: not kept on disk, rebuilt by the restore
    reopened.close()


def test_stack_logs_every_write_and_restores_from_it(tmp_path) -> None:
    supplier = Stores.persistent_versioned_key_value_store("prices", "5m")
    builder = Stores.versioned_key_value_store_builder(supplier, "string", "json")
    assert changelog_topic_config(builder, 0) == {
        "cleanup.policy": "compact",
        "min.compaction.lag.ms": str(300_000 + 86_400_000),
    }
    stack = builder.build()
    context = FakeContext(state_dir=str(tmp_path / "a"))
    stack.init(context)
    assert stack.put("k", {"p": 1}, 10) == LATEST
    assert stack.put("k", {"p": 2}, 20) == LATEST
    assert stack.put("k", {"p": 0}, 5) == 10  # out of order: logged too
    assert stack.delete("k", 30) == VersionedRecord({"p": 2}, 20)
    assert [(key, value, ts) for _, _, key, value, ts in context.logged] == [
        (b"k", b'{"p":1}', 10),
        (b"k", b'{"p":2}', 20),
        (b"k", b'{"p":0}', 5),
        (b"k", None, 30),
    ]
    restored = builder.build()
    other = FakeContext(state_dir=str(tmp_path / "b"))
    restored.init(other)
    (registered, restore, topic) = other.registered[0]
    assert registered is restored and topic == "app-prices-changelog"
    restore([(k, v, ts) for _, _, k, v, ts in context.logged])
    assert restored.get("k") is None
    assert restored.get("k", 7) == VersionedRecord({"p": 0}, 5, 10)
    assert restored.get("k", 25) == VersionedRecord({"p": 2}, 20, 30)
    assert stack.metrics()["put_total"] == 3 and stack.metrics()["scope"] == "rocksdb"
    stack.close()
    restored.close()


def test_supplier_validation_and_defaults() -> None:
    assert Stores.persistent_versioned_key_value_store("s", 30_000).segment_interval_ms == 10_000
    assert Stores.persistent_versioned_key_value_store("s", "1h").segment_interval_ms == 300_000
    assert Stores.persistent_versioned_key_value_store("s", "1d").segment_interval_ms == 3_600_000
    with pytest.raises(ValueError, match="historyRetention"):
        Stores.persistent_versioned_key_value_store("s", -1)
    with pytest.raises(Exception, match="segmentInterval"):
        Stores.persistent_versioned_key_value_store("s", 10, 0)
    builder = Stores.versioned_key_value_store_builder(Stores.in_memory_versioned_key_value_store("m", 10))
    with pytest.raises(IllegalStateError, match="caching"):
        builder.with_caching_enabled()
