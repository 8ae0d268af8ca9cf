"""``StreamsBuilder``: the entry point of the DSL; it only builds a ``Topology``, never runs it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kstream_nb.state.builders import Stores
from kstream_nb.state.timestamped import TimestampedKeyValueStoreBuilder
from kstream_nb.topology.naming import repartition_topic
from kstream_nb.topology.topology import Topology, default_name_factory

if TYPE_CHECKING:
    from kstream_nb.dsl.kstream import KStream
    from kstream_nb.dsl.ktable import GlobalKTable, KTable
    from kstream_nb.state.builders import StoreBuilder


#: a name Kafka Streams generated for a node (``InternalStreamsBuilder.newProcessorName``)
_GENERATED = re.compile(r"KSTREAM.*-\d{10}")


class StreamsBuilder:
    """Builds a topology from KStream/KTable operations; ``build()`` returns it."""

    def __init__(self) -> None:
        self.topology = Topology()
        self.new_name = default_name_factory()

    def stream(
        self,
        topics: str | list[str],
        key_serde: Any = None,
        value_serde: Any = None,
        timestamp_extractor: Any = None,
        name: str | None = None,
    ) -> KStream:
        """A KStream over one or more topics (insert-only: every record is an event)."""
        from kstream_nb.dsl.kstream import KStream

        names = [topics] if isinstance(topics, str) else list(topics)
        source = name or self.new_name("KSTREAM-SOURCE")
        self.topology.add_source(
            source,
            *names,
            key_serde=key_serde,
            value_serde=value_serde,
            timestamp_extractor=timestamp_extractor,
        )
        return KStream(self, source, _serde(key_serde), _serde(value_serde))

    def table(
        self,
        topic: str,
        key_serde: Any = None,
        value_serde: Any = None,
        timestamp_extractor: Any = None,
        store: Any = None,
    ) -> KTable:
        """A KTable over a topic: upsert by key, a null value deletes, null keys are dropped. ``store``: a store
        name, or ``ks.Stores.persistent_versioned_key_value_store(name, history_retention)`` for a versioned
        table (updates kept by timestamp; out-of-order ones are history, not the latest row)."""
        from kstream_nb.dsl.ktable import table_source

        # Kafka's order: the generated store name (<topic>-STATE-STORE-<n>) first, then the two nodes
        chosen = store or f"{topic}-STATE-STORE-{self.new_name('')[1:]}"
        source = self.new_name("KSTREAM-SOURCE")
        self.topology.add_source(
            source,
            topic,
            key_serde=key_serde,
            value_serde=value_serde,
            timestamp_extractor=timestamp_extractor,
        )
        return table_source(self, source, store, chosen, key_serde, value_serde)

    def global_table(self, topic: str, key_serde: Any = None, value_serde: Any = None,
                     store: str | None = None) -> GlobalKTable:  # fmt: skip
        """A GlobalKTable: every instance holds all partitions of ``topic``; join it with ``key_selector``."""
        from kstream_nb.dsl.ktable import GlobalKTable

        store_name = store or f"{topic}-STATE-STORE-{self.new_name('')[1:]}"
        # the numbers of Kafka's global source and KTABLE-SOURCE nodes (a global store has no nodes here)
        self.new_name("KSTREAM-SOURCE")
        self.new_name("KTABLE-SOURCE")
        builder = TimestampedKeyValueStoreBuilder(
            Stores.in_memory_key_value_store(store_name), key_serde, value_serde
        ).with_logging_disabled()
        self.topology.add_global_store(builder, topic, key_serde, value_serde)
        return GlobalKTable(self, topic, store_name)

    def repartition_node_names(self, base: str) -> tuple[str, str, str]:
        """The sink, null-key filter and source of the repartition topic ``<base>-repartition``, as Kafka's
        ``KStreamImpl.createRepartitionedSource`` names them: three numbers are always taken; a generated
        ``base`` (``KSTREAM-...-<n>``) gives the generated names, a user's ``<topic>-sink/-filter/-source``."""
        generated = self.new_name("KSTREAM-SINK"), self.new_name("KSTREAM-FILTER"), self.new_name("KSTREAM-SOURCE")
        if _GENERATED.fullmatch(base):
            return generated
        topic = repartition_topic(base)
        return f"{topic}-sink", f"{topic}-filter", f"{topic}-source"

    def add_state_store(self, builder: StoreBuilder) -> StreamsBuilder:
        """Adds a store that ``process(..., stores=[name])`` processors can use."""
        self.topology.add_state_store(builder)
        return self

    def add_timestamped_store(self, name: str, key_serde: Any, value_serde: Any, caching: bool = False) -> None:
        """The store of a KTable or aggregation: values with the timestamp of their last update.

        ``caching`` (Kafka's default for table sources and aggregations) puts a record cache in front when
        the app's ``statestore_cache_max_bytes`` is above 0.
        """
        builder = TimestampedKeyValueStoreBuilder(Stores.in_memory_key_value_store(name), key_serde, value_serde)
        self.topology.add_state_store(builder.with_caching_enabled() if caching else builder)

    def build(self) -> Topology:
        """The topology built so far, validated."""
        self.topology.validate()
        return self.topology


def _serde(spec: Any) -> Any:
    from kstream_nb.cluster.serde_specs import serde_from

    return None if spec is None else serde_from(spec)
