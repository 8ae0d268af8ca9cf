"""``KTable``: a changelog stream read as a table (latest value per key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstream_nb.dsl.functions import check_callable, takes_key
from kstream_nb.errors import TopologyError
from kstream_nb.processor import table_ops
from kstream_nb.state.versioned_builders import VersionedKeyValueStoreBuilder, VersionedKeyValueStoreSupplier

if TYPE_CHECKING:
    from kstream_nb.dsl.builder import StreamsBuilder
    from kstream_nb.dsl.grouped import KGroupedTable
    from kstream_nb.dsl.kstream import KStream

#: what ``store=`` takes where a table is materialized: a store name, or a versioned store supplier
TableStore = str | VersionedKeyValueStoreSupplier

SUPPRESS_VERSIONED = (
    "suppress() is only supported for non-versioned KTables (note that version semantics might be inherited "
    "from upstream)"
)


def add_table_store(builder: StreamsBuilder, store: TableStore, key_serde: Any, value_serde: Any,
                    caching: bool = False) -> tuple[str, VersionedKeyValueStoreSupplier | None]:  # fmt: skip
    """Adds the store a table is materialized in: a timestamped key-value store named ``store``, or a versioned
    store from a supplier (no record cache). Returns the store's name and the versioned supplier, if any."""
    if isinstance(store, VersionedKeyValueStoreSupplier):
        builder.topology.add_state_store(VersionedKeyValueStoreBuilder(store, key_serde, value_serde))
        return store.name, store
    if not isinstance(store, str):
        raise TypeError(
            f"store= takes a store name or ks.Stores.persistent_versioned_key_value_store(...), got {store!r}"
        )
    builder.add_timestamped_store(store, key_serde, value_serde, caching=caching)
    return store, None


def _store_name(store: TableStore | None) -> str | None:
    """A foreign-key join's result store: a name only."""
    if store is None or isinstance(store, str):
        return store
    raise TypeError(f"a foreign-key join result is materialized in a named store, not {store!r}")


class KTable:
    """A table: each key's latest value; updates flow downstream as changes (new value, old value).

    ``store_name`` is set when the table is materialized under a name a user can query. ``versioned_supplier``
    is set when the table's rows come from a versioned store (KIP-914): its own, or, for a filter or map_values
    not materialized, its parent's ("versioned semantics are inherited from upstream").
    """

    def __init__(
        self,
        builder: StreamsBuilder,
        node: str,
        key_serde: Any = None,
        value_serde: Any = None,
        store_name: str | None = None,
    ) -> None:
        self._builder = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.store_name = store_name
        #: For windowed tables: how long after a window's end it closes (grace, plus the gap for sessions).
        self.window_close_ms: int | None = None
        #: the versioned store this table's rows come from (its own or an upstream one), None if not versioned
        self.versioned_supplier: VersionedKeyValueStoreSupplier | None = None

    @property
    def versioned(self) -> bool:
        """Whether the table is versioned (materialized in, or inheriting from, a versioned store)."""
        return self.versioned_supplier is not None

    @property
    def history_retention_ms(self) -> int | None:
        """The history retention of the table's versioned store (None when not versioned)."""
        return None if self.versioned_supplier is None else self.versioned_supplier.history_retention_ms

    def _then(
        self, prefix: str, processor: Callable[[], Any], store: TableStore | None, name: str | None
    ) -> KTable:
        builder = self._builder
        node = name or builder.new_name(prefix)
        builder.topology.add_processor(node, processor, self.node)
        table = KTable(builder, node, self.key_serde, self.value_serde)
        table.versioned_supplier = self.versioned_supplier
        return table.materialize(store) if store else table

    def materialize(self, store: TableStore) -> KTable:
        """This table kept in ``store`` (queryable, and readable by joins): a store name, or a versioned store
        supplier (``ks.Stores.persistent_versioned_key_value_store``) for a versioned table."""
        builder = self._builder
        name, versioned = add_table_store(builder, store, self.key_serde, self.value_serde)
        node = builder.new_name("KTABLE-MATERIALIZE")
        builder.topology.add_processor(node, lambda: table_ops.KTableMaterialize(name), self.node, stores=[name])
        table = KTable(builder, node, self.key_serde, self.value_serde, name)
        table.window_close_ms = self.window_close_ms
        table.versioned_supplier = versioned
        return table

    def materialized_store(self) -> str:
        """The store holding this table's rows, materializing it under a generated name if needed (a versioned
        store like the upstream one when the table inherits versioned semantics)."""
        if self.store_name is None:
            name = self._builder.new_name("KTABLE-STATE-STORE")
            supplier = self.versioned_supplier
            materialized = self.materialize(name if supplier is None else supplier.renamed(name))
            self.store_name = materialized.store_name
        assert self.store_name is not None
        return self.store_name

    # ---- joins ---------------------------------------------------------------------------------

    def join(self, other: KTable, joiner: Callable[[Any, Any], Any], store: TableStore | None = None,
             foreign_key_extractor: Callable[..., Any] | None = None) -> KTable:  # fmt: skip
        """Inner table-table join: a row exists when both sides have the key; either side triggers.

        With ``foreign_key_extractor`` (``fn(value)`` or ``fn(key, value)``) it is a foreign-key join:
        each row joins the ``other`` row whose key ``fn`` returns, keyed by this table's key.
        """
        from kstream_nb.dsl.joins import table_table_join

        if foreign_key_extractor is not None:
            from kstream_nb.dsl.fk_join import foreign_key_join

            return foreign_key_join(self, other, foreign_key_extractor, joiner, False, _store_name(store))
        check_callable(joiner, "join")
        return table_table_join(self, other, joiner, "inner", store)

    def left_join(self, other: KTable, joiner: Callable[[Any, Any], Any], store: TableStore | None = None,
                  foreign_key_extractor: Callable[..., Any] | None = None) -> KTable:  # fmt: skip
        """Left table-table join: every left row, joined with the right row or None.

        With ``foreign_key_extractor`` it is a foreign-key left join (see ``join``).
        """
        from kstream_nb.dsl.joins import table_table_join

        if foreign_key_extractor is not None:
            from kstream_nb.dsl.fk_join import foreign_key_join

            return foreign_key_join(self, other, foreign_key_extractor, joiner, True, _store_name(store))
        check_callable(joiner, "left_join")
        return table_table_join(self, other, joiner, "left", store)

    def outer_join(
        self, other: KTable, joiner: Callable[[Any, Any], Any], store: TableStore | None = None
    ) -> KTable:
        """Outer table-table join: a row while either side has the key (the missing side is None)."""
        from kstream_nb.dsl.joins import table_table_join

        check_callable(joiner, "outer_join")
        return table_table_join(self, other, joiner, "outer", store)

    def filter(
        self, predicate: Callable[[Any, Any], Any], store: TableStore | None = None, name: str | None = None
    ) -> KTable:
        """Rows where ``predicate(key, value)`` holds; a row that stops matching is deleted downstream."""
        check_callable(predicate, "filter")
        return self._then("KTABLE-FILTER", lambda: table_ops.KTableFilter(predicate), store, name)

    def filter_not(
        self, predicate: Callable[[Any, Any], Any], store: TableStore | None = None, name: str | None = None
    ) -> KTable:
        """Rows where ``predicate(key, value)`` does not hold."""
        check_callable(predicate, "filter_not")
        return self._then("KTABLE-FILTER", lambda: table_ops.KTableFilter(predicate, negate=True), store, name)

    def map_values(
        self, mapper: Callable[..., Any], store: TableStore | None = None, name: str | None = None
    ) -> KTable:
        """``mapper(value)`` or ``mapper(key, value)`` for every row; deletes stay deletes."""
        with_key = takes_key(mapper, "map_values")
        return self._then("KTABLE-MAPVALUES", lambda: table_ops.KTableMapValues(mapper, with_key), store, name)

    def to_stream(self, name: str | None = None) -> KStream:
        """Every update of the table as a stream record (a delete is a record with a None value)."""
        from kstream_nb.dsl.kstream import KStream

        node = name or self._builder.new_name("KTABLE-TOSTREAM")
        self._builder.topology.add_processor(node, table_ops.KTableToStream, self.node)
        return KStream(self._builder, node, self.key_serde, self.value_serde)

    def group_by(
        self,
        selector: Callable[[Any, Any], Any],
        key_serde: Any = None,
        value_serde: Any = None,
        name: str | None = None,
    ) -> KGroupedTable:
        """Re-keys rows with ``selector(key, value) -> (new_key, new_value)`` for aggregation."""
        from kstream_nb.dsl.grouped import KGroupedTable

        check_callable(selector, "group_by")
        node = self._builder.new_name("KTABLE-SELECT")
        self._builder.topology.add_processor(node, lambda: table_ops.KTableRepartitionMap(selector), self.node)
        return KGroupedTable(self._builder, node, key_serde, value_serde, name)

    def suppress(self, suppressed: Any, name: str | None = None) -> KTable:
        """Holds updates back: ``ks.until_window_closes()`` (final results) or ``ks.until_time_limit(d)``."""
        from kstream_nb.processor.suppress import KTableSuppress, Suppressed, SuppressionBufferBuilder

        if self.versioned:
            raise TopologyError(SUPPRESS_VERSIONED)
        if not isinstance(suppressed, Suppressed):
            raise TypeError(
                f"suppress needs ks.until_window_closes(...) or ks.until_time_limit(...), got {suppressed!r}"
            )
        if suppressed.until_window_closes and self.window_close_ms is None:
            raise TypeError(
                "suppress(until_window_closes) needs a windowed KTable (group_by_key().windowed_by(...))"
            )
        close_ms = self.window_close_ms or 0
        node = name or self._builder.new_name("KTABLE-SUPPRESS")
        # Kafka's names: "<name>-store", else KTABLE-SUPPRESS-STATE-STORE-<index>
        store = f"{name}-store" if name else self._builder.new_name("KTABLE-SUPPRESS-STATE-STORE")
        topology = self._builder.topology
        topology.add_processor(node, lambda: KTableSuppress(suppressed, close_ms, store), self.node)
        topology.add_state_store(SuppressionBufferBuilder(store, self.key_serde, self.value_serde), node)
        table = KTable(self._builder, node, self.key_serde, self.value_serde)
        table.window_close_ms = self.window_close_ms
        return table

    def transform_values(self, supplier: Callable[[], Any], store: str | None = None, value_serde: Any = None,
                         stores: Any = (), name: str | None = None) -> KTable:  # fmt: skip
        """``supplier()``'s ``transform(key, value)`` for every update, deletes too (Kafka's ``transformValues``);
        see ``kstream_nb.dsl.table_transform``."""
        from kstream_nb.dsl.table_transform import transform_values

        return transform_values(self, supplier, store, value_serde, stores, name)

    def queryable_store_name(self) -> str | None:
        """The name ``app.store(...)`` answers to, when the table was materialized with ``store=``."""
        return self.store_name

    def __repr__(self) -> str:
        return f"KTable({self.node}{', store=' + repr(self.store_name) if self.store_name else ''})"


class GlobalKTable:
    """A table fully replicated on every instance (all partitions), joinable from any stream by a key selector."""

    def __init__(self, builder: StreamsBuilder, topic: str, store_name: str) -> None:
        self._builder = builder
        self.topic = topic
        self.store_name = store_name

    def queryable_store_name(self) -> str:
        return self.store_name

    def __repr__(self) -> str:
        return f"GlobalKTable({self.topic!r}, store={self.store_name!r})"
