"""``KTable``: a changelog stream read as a table (latest value per key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstream_nb.dsl.functions import check_callable, takes_key
from kstream_nb.errors import TopologyError
from kstream_nb.processor import table_ops
from kstream_nb.state.builders import VersionedKeyValueStoreBuilder
from kstream_nb.state.suppliers import VersionedKeyValueStoreSupplier

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


def table_source(builder: StreamsBuilder, parent: str, store: TableStore | None, default_store: str,
                 key_serde: Any, value_serde: Any, name: str | None = None) -> KTable:  # fmt: skip
    """A table read from ``parent``'s records (``builder.table``, ``KStream.to_table``): Kafka's KTableSource.

    Named (``store``), it is materialized at once, in a cached store; unnamed, it gets a store named
    ``default_store`` only when a later operation needs one (a join's lookups, old values for a group_by,
    suppress or a left/outer join), as Kafka materializes a source KTable only then.
    """
    flags = table_ops.TableFlags(send_old_values=False, materialized=store is not None)
    store_name, versioned = default_store, None
    stores: list[str] = []
    if store is not None:
        store_name, versioned = add_table_store(builder, store, key_serde, value_serde, caching=True)
        stores.append(store_name)
    node = name or builder.new_name("KTABLE-SOURCE")
    queryable = store is not None

    def supplier() -> table_ops.KTableSource:
        return table_ops.KTableSource(store_name, queryable, flags)

    builder.topology.add_processor(node, supplier, parent, stores=stores)
    table = KTable(builder, node, _serde(key_serde), _serde(value_serde), store_name if queryable else None)
    table.flags = flags
    table.versioned_supplier = versioned
    table._source_store = (store_name, key_serde, value_serde)
    return table


def _serde(spec: Any) -> Any:
    from kstream_nb.cluster.serde_specs import serde_from

    return None if spec is None else serde_from(spec)


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

    ``flags`` say whether the table's processor forwards old values (Kafka's ``sendOldValues``): a table source,
    filter, map_values or transform_values only when a downstream operation asks (``enable_sending_old_values``);
    other tables (aggregations, joins) always do.
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
        #: read by the table's processor when a task creates it (old values; a source's store)
        self.flags = table_ops.TableFlags()
        #: a table source: its store's name and serdes, to add the store when it is needed
        self._source_store: tuple[str, Any, Any] | None = None
        #: a filter, map_values or transform_values: the table it reads (old values come from it)
        self._parent: KTable | None = None
        #: a table-table join: both sides (sending old values asks both for them)
        self.old_value_parents: tuple[KTable, ...] = ()
        #: the store the table's own processor keeps (a filter/map_values/transform_values with ``store=``)
        self._own_store = False
        #: a suppressed table: the view its suppress processor keeps when a lookup needs one
        self._suppressed_view: Any = None
        #: an unmaterialized table-table join: how its rows are computed from its sides' at lookup time
        self.join_getter: Any = None
        #: a filter or map_values: its row as a function of its parent's ``(key, value)`` (None: no row)
        self._row: Callable[[Any, Any], Any] | None = None

    def enable_sending_old_values(self, force_materialization: bool = True) -> bool:
        """Asks this table's processor to forward old values (Kafka's ``KTableImpl.enableSendingOldValues``);
        False when it cannot without materializing an upstream source and ``force_materialization`` is False.
        """
        flags = self.flags
        if flags.send_old_values and not self.old_value_parents:
            return True
        if self._source_store is not None:
            if not force_materialization and not flags.materialized:
                return False
            self._materialize_source()
        elif self._parent is not None:
            if not self._own_store and not self._parent.enable_sending_old_values(force_materialization):
                return False
        else:
            parents, self.old_value_parents = self.old_value_parents, ()
            for parent in parents:
                parent.enable_sending_old_values(True)
        flags.send_old_values = True
        return True

    def _materialize_source(self) -> None:
        """Gives a table source its store (Kafka's ``KTableSource.materialize``), once."""
        assert self._source_store is not None
        if self.flags.materialized:
            return
        name, key_serde, value_serde = self._source_store
        add_table_store(self._builder, name, key_serde, value_serde, caching=True)
        self._builder.topology.connect_processor_and_state_stores(self.node, name)
        self.flags.materialized = True

    @property
    def versioned(self) -> bool:
        """Whether the table is versioned (materialized in, or inheriting from, a versioned store)."""
        return self.versioned_supplier is not None

    @property
    def history_retention_ms(self) -> int | None:
        """The history retention of the table's versioned store (None when not versioned)."""
        return None if self.versioned_supplier is None else self.versioned_supplier.history_retention_ms

    def _derive(self, prefix: str, make: Callable[[table_ops.TableFlags, str | None], Any],
                store: TableStore | None, name: str | None, value_serde: Any) -> KTable:  # fmt: skip
        """A filter/map_values of this table: ``make(flags, store_name)`` makes its processor, which keeps the
        table in ``store`` (cached, as Kafka's Materialized) when given."""
        builder = self._builder
        node = name or builder.new_name(prefix)
        flags = table_ops.TableFlags(send_old_values=False)
        store_name, versioned = None, self.versioned_supplier
        if store:
            store_name, versioned = add_table_store(builder, store, self.key_serde, value_serde, caching=True)
        builder.topology.add_processor(
            node, lambda: make(flags, store_name), self.node, stores=[store_name] if store_name else []
        )
        table = KTable(builder, node, self.key_serde, value_serde, store_name)
        table.flags = flags
        table._parent = self
        table._own_store = store_name is not None
        table.window_close_ms = self.window_close_ms
        table.versioned_supplier = versioned
        return table

    def materialize(self, store: TableStore, cached: bool = False) -> KTable:
        """This table kept in ``store`` (queryable, and readable by joins): a store name, or a versioned store
        supplier (``ks.Stores.persistent_versioned_key_value_store``) for a versioned table. ``cached``: the
        store has a record cache, which forwards the changes (as Kafka's Materialized store of a join)."""
        builder = self._builder
        name, versioned = add_table_store(builder, store, self.key_serde, self.value_serde, caching=cached)
        # Kafka keeps the store on the operation's own node and takes no number for it: the node that keeps it
        # here is named after the operation's
        node = f"{self.node}-materialize"
        if node in builder.topology.node_specs:
            node = builder.new_name("KTABLE-MATERIALIZE")
        table = KTable(builder, node, self.key_serde, self.value_serde, name)
        flags = table.flags if cached else None
        builder.topology.add_processor(
            node, lambda: table_ops.KTableMaterialize(name, flags), self.node, stores=[name]
        )
        table.window_close_ms = self.window_close_ms
        table.versioned_supplier = versioned
        table._parent = self  # passes the changes on as they come: old values when this table sends them
        table.flags.send_old_values = False
        return table

    def materialized_store(self, send_old_values: bool = True) -> str:
        """The store holding this table's rows, materializing it under a generated name if needed (a versioned
        store like the upstream one when the table inherits versioned semantics). A table source is materialized
        itself (Kafka's value getter). ``send_old_values``: the caller also reads the table's changes and needs
        their old values (a foreign-key join, a left side of a left join)."""
        if send_old_values:
            self.enable_sending_old_values(True)
        if self._source_store is not None:
            self._materialize_source()
            self.store_name = self._source_store[0]
        elif self._suppressed_view is not None and self.store_name is None:
            # Kafka reads such a table through value getters, with no store and no number: this store is named
            # after the table's node, so the names generated after it stay Kafka's
            self.store_name = self._suppressed_view.store_name = f"{self.node}-STATE-STORE"
            self._builder.add_timestamped_store(self.store_name, self.key_serde, self.value_serde)
            self._builder.topology.connect_processor_and_state_stores(self.node, self.store_name)
        else:
            self._materialize_upstream_source()
        if self.store_name is None:
            name = f"{self.node}-STATE-STORE"  # as above: Kafka has a value getter here, no store
            supplier = self.versioned_supplier
            materialized = self.materialize(name if supplier is None else supplier.renamed(name))
            self.store_name = materialized.store_name
        assert self.store_name is not None
        return self.store_name

    def value_getter(self, send_old_values: bool = True) -> Any:
        """What a join looks this table up through (Kafka's ``valueGetterSupplier``): ``materialized_store``'s
        store, but for an unmaterialized table-table join the join of its sides' getters (no store)."""
        getter = self._computed_getter()
        if getter is None:
            return self.materialized_store(send_old_values)
        if send_old_values:
            self.enable_sending_old_values(True)
        return getter

    def _computed_getter(self) -> Any:
        """The getter of an unmaterialized join, or of a filter/map_values chain over one or over a suppressed
        table; else None."""
        from kstream_nb.processor.table_joins import RowGetter

        if self.store_name is not None:
            return None
        if self.join_getter is not None:
            return self.join_getter
        if self._row is None or self._parent is None or self._own_store:
            return None
        parent = self._parent._computed_getter()
        if parent is None and self._parent._suppressed_view is not None:
            # a suppressed table answers lookups from its view (Kafka's suppress value getter), not its output
            parent = self._parent.materialized_store(False)
        return None if parent is None else RowGetter(self._row, parent)

    def _materialize_upstream_source(self) -> None:
        """Materializes the source a filter/map_values chain reads, as Kafka's value getters do."""
        table: KTable | None = self
        while table is not None and not table._own_store:
            if table._source_store is not None:
                table._materialize_source()
                return
            table = table._parent

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
        return self._filter(predicate, False, store, name)

    def filter_not(
        self, predicate: Callable[[Any, Any], Any], store: TableStore | None = None, name: str | None = None
    ) -> KTable:
        """Rows where ``predicate(key, value)`` does not hold."""
        check_callable(predicate, "filter_not")
        return self._filter(predicate, True, store, name)

    def _filter(self, predicate: Callable[[Any, Any], Any], negate: bool, store: TableStore | None,
                name: str | None) -> KTable:  # fmt: skip
        versioned = self.versioned

        def make(flags: table_ops.TableFlags, store_name: str | None) -> table_ops.KTableFilter:
            return table_ops.KTableFilter(predicate, negate, flags, store_name, versioned)

        table = self._derive("KTABLE-FILTER", make, store, name, self.value_serde)
        table._row = lambda key, value: None if bool(predicate(key, value)) is negate else value
        # Kafka's KTableFilter: old values when the parent sends them without materializing anything
        table.flags.send_old_values = self.enable_sending_old_values(False)
        return table

    def map_values(self, mapper: Callable[..., Any], store: TableStore | None = None, name: str | None = None,
                   value_serde: Any = None) -> KTable:  # fmt: skip
        """``mapper(value)`` or ``mapper(key, value)`` for every row; deletes stay deletes. ``value_serde``: the
        mapped values' serde (for ``store``; default: the app's)."""
        with_key = takes_key(mapper, "map_values")

        def make(flags: table_ops.TableFlags, store_name: str | None) -> table_ops.KTableMapValues:
            return table_ops.KTableMapValues(mapper, with_key, flags, store_name)

        table = self._derive("KTABLE-MAPVALUES", make, store, name, value_serde)
        table._row = (lambda key, value: mapper(key, value)) if with_key else (lambda key, value: mapper(value))
        return table

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
        self.enable_sending_old_values(True)
        self._builder.topology.add_processor(node, lambda: table_ops.KTableRepartitionMap(selector), self.node)
        return KGroupedTable(self._builder, node, key_serde, value_serde, name)

    def suppress(self, suppressed: Any, name: str | None = None) -> KTable:
        """Holds updates back: ``ks.until_window_closes()`` (final results) or ``ks.until_time_limit(d)``."""
        from kstream_nb.processor.suppress import KTableSuppress, Suppressed, SuppressedView
        from kstream_nb.state.suppression_buffer import SuppressionBufferBuilder

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
        self.enable_sending_old_values(True)  # Kafka's KTableSuppressProcessorSupplier
        node = name or self._builder.new_name("KTABLE-SUPPRESS")
        # Kafka's names: "<name>-store", else KTABLE-SUPPRESS-STATE-STORE-<index>
        store = f"{name}-store" if name else self._builder.new_name("KTABLE-SUPPRESS-STATE-STORE")
        topology = self._builder.topology
        view = SuppressedView()
        topology.add_processor(node, lambda: KTableSuppress(suppressed, close_ms, store, view), self.node)
        topology.add_state_store(SuppressionBufferBuilder(store, self.key_serde, self.value_serde), node)
        table = KTable(self._builder, node, self.key_serde, self.value_serde)
        table.window_close_ms = self.window_close_ms
        table._suppressed_view = view
        return table

    def transform_values(self, supplier: Callable[[], Any], store: str | None = None, value_serde: Any = None,
                         stores: Any = (), name: str | None = None) -> KTable:  # fmt: skip
        """``supplier()``'s ``transform(key, value)`` for every update, deletes too (Kafka's ``transformValues``);
        see ``kstream_nb.dsl.table_transform``."""
        from kstream_nb.dsl.table_transform import transform_values

        table = transform_values(self, supplier, store, value_serde, stores, name)
        table._parent = self  # old values as Kafka's KTableTransformValues: its own store's, or from upstream
        table._own_store = store is not None
        table.flags.send_old_values = False
        return table

    def queryable_store_name(self) -> str | None:
        """The name ``app.store(...)`` answers to, when the table was materialized with ``store=``."""
        return self.store_name

    def __repr__(self) -> str:
        return f"KTable({self.node}{', store=' + repr(self.store_name) if self.store_name else ''})"

    def _repr_html_(self) -> str:
        """In notebooks: this table's node, store, sub-topology and upstream topics in the topology so far."""
        from html import escape

        from kstream_nb.topology.place_html import node_place_html

        store = f", store <code>{escape(self.store_name)}</code>" if self.store_name else ""
        return node_place_html(self._builder.topology, self.node, "KTable", store)


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
