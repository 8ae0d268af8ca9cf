"""The RocksDB store (rocksdict): byte-ordered scans, data kept on disk, restore from the checkpoint on."""

import uuid
from pathlib import Path

import pytest

import kstream_nb as ks
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.state.builders import Stores
from kstream_nb.state.rocksdb import RocksDBKeyValueStore
from kstream_nb.state.store import ValueAndTimestamp


@pytest.fixture
def store(tmp_path, make_context):
    store = RocksDBKeyValueStore("counts")
    store.use_serdes(serde_from("string"), serde_from("json"), timestamped=False)
    store.init(make_context(state_dir=str(tmp_path)))
    yield store
    store.close()


def test_put_get_delete_and_byte_ordered_scans(store) -> None:
    for key, value in [("b", 2), ("a", 1), ("c", {"x": 3}), ("B", 0)]:
        store.put(key, value)
    assert store.get("c") == {"x": 3}
    assert [k for k, _ in store.all()] == ["B", "a", "b", "c"]  # UTF-8 byte order, as RocksDB
    assert store.range("a", "b") == [("a", 1), ("b", 2)]
    assert store.delete("a") == 1 and store.get("a") is None
    store.put("b", None)
    assert [k for k, _ in store.all()] == ["B", "c"]


def test_data_survives_close_and_reopen(tmp_path, make_context) -> None:
    context = make_context(state_dir=str(tmp_path))
    first = RocksDBKeyValueStore("counts")
    first.use_serdes(serde_from("json"), serde_from("json"), timestamped=True)
    first.init(context)
    first.put("k", ValueAndTimestamp(5, 123))
    first.close()
    again = RocksDBKeyValueStore("counts")
    again.use_serdes(serde_from("json"), serde_from("json"), timestamped=True)
    again.init(context)
    assert again.get("k") == ValueAndTimestamp(5, 123)
    assert Path(again.path).is_relative_to(tmp_path)  # type: ignore[arg-type]
    again.close()


def test_persistent_supplier_builds_rocksdb() -> None:
    assert Stores.persistent_key_value_store("counts").metrics_scope == "rocksdb"


def test_restart_restores_only_the_changelog_tail(tmp_path) -> None:
    url = f"memory://rocks-{uuid.uuid4().hex[:8]}"
    b = ks.StreamsBuilder()
    b.stream("words").group_by_key().count(store="counts")
    settings = {"state_dir": str(tmp_path), "default_dsl_store": "rocksdb", "commit_interval_ms": 50}

    ks.produce("words", [("a", 1), ("b", 1), ("a", 1)], bootstrap_servers=url, partitions=2)
    app = ks.KafkaStreams(b.build(), "rocks", url, **settings).start()
    app.wait_until_running().wait_until_idle()
    assert dict(app.store("counts").all()) == {"a": 2, "b": 1}
    assert app.stop()
    assert list(tmp_path.glob("rocks/*/rocksdb/counts"))  # the stores live under state_dir/app/task/
    assert list(tmp_path.glob("rocks/*/.checkpoint"))

    ks.produce("words", [("a", 1), ("c", 1)], bootstrap_servers=url)
    app = ks.KafkaStreams(b.build(), "rocks", url, **settings).start()
    try:
        app.wait_until_running().wait_until_idle()
        assert dict(app.store("counts").all()) == {"a": 3, "b": 1, "c": 1}
        assert app.metrics()["restored-records-total"] == 0  # the data was on disk: nothing replayed
    finally:
        assert app.stop()
