"""Stores factory and the key-value store builder's layer stack."""

from __future__ import annotations

import pytest

from kstream_nb.errors import StreamsError
from kstream_nb.state import (
    ChangeLoggingKeyValueStore,
    InMemoryKeyValueStore,
    MeteredKeyValueStore,
    Stores,
)


def test_in_memory_supplier() -> None:
    supplier = Stores.in_memory_key_value_store("counts")
    assert supplier.name == "counts"
    assert supplier.metrics_scope == "in-memory"
    first, second = supplier.get(), supplier.get()
    assert isinstance(first, InMemoryKeyValueStore) and first is not second
    with pytest.raises(StreamsError):
        Stores.in_memory_key_value_store("")


def test_builder_defaults_and_stack(context, json_serde) -> None:
    builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), json_serde, json_serde)
    assert builder.name == "counts"
    assert builder.logging_enabled and not builder.caching_enabled and builder.log_config == {}
    store = builder.build()
    assert isinstance(store, MeteredKeyValueStore)
    assert isinstance(store.inner, ChangeLoggingKeyValueStore)
    assert isinstance(store.inner.inner, InMemoryKeyValueStore)

    store.init(context)
    store.put("k", [1, 2])
    store.flush()
    assert context.logged == [("app-counts-changelog", 2, b'"k"', b"[1,2]", 0)]
    assert context.registered[0][0] is store
    assert context.registered[0][2] == "app-counts-changelog"


def test_default_serdes_come_from_build(json_serde) -> None:
    builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("s"))
    assert builder.key_serde is None and builder.value_serde is None
    store = builder.build(json_serde, json_serde)
    assert isinstance(store, MeteredKeyValueStore)
    logging = store.inner
    assert isinstance(logging, ChangeLoggingKeyValueStore)
    assert logging.key_serde is json_serde and logging.value_serde is json_serde


def test_logging_disabled(context) -> None:
    builder = (
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("s"))
        .with_logging_disabled()
        .with_caching_enabled()
    )
    assert not builder.logging_enabled and builder.caching_enabled
    store = builder.build()
    assert isinstance(store, MeteredKeyValueStore)
    assert isinstance(store.inner, InMemoryKeyValueStore)
    store.init(context)
    store.put("k", 1)
    assert context.logged == []
    assert context.registered == [(store, context.registered[0][1], None)]


def test_logging_config_is_recorded() -> None:
    builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("s")).with_logging_disabled()
    builder.with_logging_enabled({"min.insync.replicas": "1"})
    assert builder.logging_enabled
    assert builder.log_config == {"min.insync.replicas": "1"}
    builder.with_caching_disabled()
    assert not builder.caching_enabled


def test_serde_names_resolve(context) -> None:
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("s"), "string", "long").build()
    store.init(context)
    store.put("k", 7)
    store.flush()
    assert context.logged == [("app-s-changelog", 2, b"k", b"\x00" * 7 + b"\x07", 0)]
