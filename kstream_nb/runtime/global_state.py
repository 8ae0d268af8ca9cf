"""Global stores: every instance keeps a full copy of a topic (all partitions), kept up to date by a thread.

Before stream threads process anything the global stores are bootstrapped to the topic's end; then a
background thread applies new records (upsert, null value deletes), as Kafka's GlobalStreamThread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kstream_nb.cluster.base import Cluster
from kstream_nb.cluster.records import FetchedBatch, TopicPartition
from kstream_nb.cluster.schema_registry import configure_serde
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import MissingSourceTopicError, ProcessingError
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.state.store import StateStore
from kstream_nb.state.timestamped import ValueAndTimestamp
from kstream_nb.topology.topology import GlobalStoreSpec, Topology

log = logging.getLogger("kstream_nb.global")


class _GlobalContext:
    """The store context of a global store: no changelog (its topic is its changelog)."""

    def __init__(self, config: StreamsConfig) -> None:
        self.application_id = config.application_id
        self.task_id = "global"
        self.partition = -1
        self.state_dir = config.state_dir
        self.timestamp = -1

    def changelog_topic(self, store_name: str) -> str:
        return ""

    def changelog_writer(self, topic: str) -> Any:
        raise RuntimeError("global stores have no changelog")

    def register(self, *args: Any) -> None:
        pass


class GlobalStores:
    """The instance's global stores and how records of their topics are applied to them."""

    def __init__(self, topology: Topology, config: StreamsConfig) -> None:
        self.specs: dict[str, GlobalStoreSpec] = topology.global_stores
        self.config = config
        self.stores: dict[str, StateStore] = {}
        #: records skipped for a null key (Kafka's KTableSource of a global table counts them as dropped)
        self.dropped_total = 0
        self._by_topic: dict[str, tuple[GlobalStoreSpec, StateStore]] = {}
        self._serdes: dict[str, tuple[Serde, Serde]] = {}
        context = _GlobalContext(config)
        serde_configs = config.serde_configs()
        for name, spec in self.specs.items():
            store = spec.builder.build(
                config.default_key_serde, config.default_value_serde, None, False, serde_configs
            )
            store.init(context)
            self.stores[name] = store
            self._by_topic[spec.topic] = (spec, store)
            self._serdes[spec.topic] = (
                configure_serde(spec.key_serde or config.default_key_serde, serde_configs, True),
                configure_serde(spec.value_serde or config.default_value_serde, serde_configs, False),
            )

    @property
    def topics(self) -> list[str]:
        return list(self._by_topic)

    def apply(self, batch: FetchedBatch) -> None:
        """Upserts a batch of records into the topic's global store (null value deletes; null key: dropped and
        counted)."""
        spec, store = self._by_topic[batch.topic]
        key_serde, value_serde = self._serdes[batch.topic]
        for r in batch.records:
            try:
                key = key_serde.deserialize(r.topic, r.key)
                value = value_serde.deserialize(r.topic, r.value)
            except Exception as e:
                raise ProcessingError(
                    f"cannot deserialize record for global store {spec.builder.name!r}: {e}",
                    topic=r.topic, partition=r.partition, offset=r.offset,
                ) from e  # fmt: skip
            if key is None:
                self.dropped_total += 1
                continue
            store.put(key, None if value is None else ValueAndTimestamp(value, r.timestamp))  # type: ignore[attr-defined]

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


class GlobalStreamThread(threading.Thread):
    """Bootstraps the global stores to the end of their topics, then keeps applying new records."""

    def __init__(self, stores: GlobalStores, cluster: Cluster, config: StreamsConfig,
                 on_error: Callable[[BaseException], None]) -> None:  # fmt: skip
        super().__init__(name=f"{config.application_id}-GlobalStreamThread", daemon=True)
        self._on_error = on_error
        self.stores = stores
        self.config = config
        self.admin = cluster.admin()
        self.consumer = cluster.consumer(None, {"client.id": f"{config.application_id}-global"})
        self.bootstrapped = threading.Event()
        self.error: BaseException | None = None
        self._shutdown = threading.Event()

    def shutdown(self) -> None:
        self._shutdown.set()

    def _partitions(self) -> list[TopicPartition]:
        missing = [t for t in self.stores.topics if self.admin.partition_count(t) is None]
        if missing:
            raise MissingSourceTopicError(missing)
        return [
            TopicPartition(t, p) for t in self.stores.topics for p in range(self.admin.partition_count(t) or 0)
        ]

    def bootstrap(self) -> None:
        """Reads every partition of the global topics from the beginning to its current end."""
        partitions = self._partitions()
        self.consumer.assign(partitions)
        for tp, offset in self.admin.beginning_offsets(partitions).items():
            self.consumer.seek(tp, offset)
        ends = self.admin.end_offsets(partitions)
        deadline = time.monotonic() + self.config.missing_source_topic_timeout_ms / 1000 + 300
        while any(self.consumer.position(tp) < end for tp, end in ends.items()):
            if self._shutdown.is_set() or time.monotonic() > deadline:
                return
            for batch in self.consumer.poll(0.1):
                self.stores.apply(batch)
        self.bootstrapped.set()

    def run(self) -> None:
        try:
            self.bootstrap()
            while not self._shutdown.is_set():
                for batch in self.consumer.poll(self.config.poll_ms / 1000):
                    self.stores.apply(batch)
        except BaseException as e:
            self.error = e
            log.error("global stream thread failed: %s", e)
        finally:
            self.consumer.close()
        if self.error is not None:
            self._on_error(self.error)
