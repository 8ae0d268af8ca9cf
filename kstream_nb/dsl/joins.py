"""How the DSL wires joins into the topology: stores, the two join sides, co-partitioning."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstream_nb.dsl.repartition import keep_null_keys_upstream
from kstream_nb.durations import Duration, to_millis
from kstream_nb.errors import TopologyError
from kstream_nb.processor.stream_stateless import PassThrough
from kstream_nb.processor.stream_stream_join import KStreamKStreamJoinSide
from kstream_nb.processor.table_joins import (
    NOT_VERSIONED,
    JoinGetter,
    KStreamKTableJoin,
    KTableKTableJoinSide,
    getter_stores,
)
from kstream_nb.processor.windows import JoinWindows
from kstream_nb.state.builders import WindowStoreBuilder
from kstream_nb.state.join_buffer import JoinBuffer
from kstream_nb.state.time_ordered_buffer import TimeOrderedJoinBufferBuilder
from kstream_nb.state.window_store import InMemoryWindowStore

if TYPE_CHECKING:
    from kstream_nb.dsl.kstream import KStream
    from kstream_nb.dsl.ktable import GlobalKTable, KTable, TableStore

_SEGMENT_MS = 60_000


class _BufferBuilder:
    """Store builder of a join's unmatched-record buffer (no changelog)."""

    logging_enabled = False
    caching_enabled = False
    log_config: dict[str, str] = {}

    def __init__(self, name: str) -> None:
        self.name = name

    def build(self, *defaults: Any) -> JoinBuffer:
        return JoinBuffer(self.name)


def stream_stream_join(left: KStream, right: KStream, joiner: Callable[[Any, Any], Any],
                       windows: JoinWindows, kind: str) -> KStream:  # fmt: skip
    """Both sides store their records in a window store and look up the other's; results are merged."""
    from kstream_nb.dsl.kstream import KStream

    if not isinstance(windows, JoinWindows):
        raise TypeError(f"a stream-stream join needs JoinWindows, got {windows!r}")
    builder = left._builder
    topology = builder.topology
    # Kafka's names (KStreamImplJoin): the repartitions (<stream's node>-repartition), two KSTREAM-WINDOWED
    # numbers (its store-writing nodes, which kstream_nb folds into the join sides), the sides (OUTERTHIS for an
    # outer join, OUTEROTHER for a left or outer one), the shared store (on the this side's number), the merge
    left = left.repartitioned_if_required()
    right = right.repartitioned_if_required()
    builder.new_name("KSTREAM-WINDOWED")
    builder.new_name("KSTREAM-WINDOWED")
    this_name = builder.new_name("KSTREAM-OUTERTHIS" if kind == "outer" else "KSTREAM-JOINTHIS")
    other_name = builder.new_name("KSTREAM-JOINOTHER" if kind == "inner" else "KSTREAM-OUTEROTHER")
    left_store, right_store = f"{this_name}-store", f"{other_name}-store"
    retention = windows.retention_ms + max(windows.retention_ms // 2, _SEGMENT_MS)
    for store, stream in ((left_store, left), (right_store, right)):
        topology.add_state_store(
            WindowStoreBuilder(
                store, lambda s=store: InMemoryWindowStore(s, retention, 0, retain_duplicates=True),  # type: ignore[misc]
                stream.key_serde, stream.value_serde, timestamped=False,
            )
        )  # fmt: skip
    buffer = None
    if kind != "inner":
        buffer = f"KSTREAM-OUTERSHARED-{this_name.rsplit('-', 1)[1]}-store"
        topology.add_state_store(_BufferBuilder(buffer))
    stores = [left_store, right_store] + ([buffer] if buffer else [])
    topology.add_processor(
        this_name,
        lambda: KStreamKStreamJoinSide(True, windows, joiner, left_store, right_store, buffer, kind != "inner"),
        left.node, stores=stores,
    )  # fmt: skip
    topology.add_processor(
        other_name,
        lambda: KStreamKStreamJoinSide(False, windows, joiner, right_store, left_store, buffer, kind == "outer"),
        right.node, stores=stores,
    )  # fmt: skip
    merge = builder.new_name("KSTREAM-MERGE")
    topology.add_processor(merge, PassThrough, this_name, other_name)
    topology.add_copartition_group(left.node, right.node)
    if kind != "inner":
        keep_null_keys_upstream(topology, left.node, right.node)
    return KStream(builder, merge, left.key_serde, None)


def stream_table_join(stream: KStream, table: KTable, joiner: Callable[[Any, Any], Any], left_join: bool,
                      grace: Duration | None = None) -> KStream:  # fmt: skip
    """Each stream record looks up the table's row (as of its timestamp when the table is versioned); table
    updates emit nothing. With ``grace`` (a versioned table only, as in Kafka) stream records wait up to the
    grace period in a time-ordered buffer ``<join>-Buffer`` and join in timestamp order."""
    from kstream_nb.dsl.kstream import KStream

    builder = stream._builder
    grace_ms = None if grace is None else to_millis(grace, "grace period")
    if grace_ms is not None and not table.versioned:
        raise TopologyError(NOT_VERSIONED)
    if grace_ms is not None and table.history_retention_ms is not None and grace_ms > table.history_retention_ms:
        raise TopologyError("History retention must be at least grace period.")
    stream = stream.repartitioned_if_required()
    store = table.value_getter(send_old_values=False)
    node = builder.new_name("KSTREAM-LEFTJOIN" if left_join else "KSTREAM-JOIN")
    stores = getter_stores(store)
    buffer = None
    if grace_ms is not None:
        buffer = f"{node}-Buffer"
        builder.topology.add_state_store(
            TimeOrderedJoinBufferBuilder(buffer, grace_ms, stream.key_serde, stream.value_serde)
        )
        stores.append(buffer)
    builder.topology.add_processor(
        node, lambda: KStreamKTableJoin(store, joiner, left_join, buffer_store=buffer), stream.node, stores=stores
    )
    builder.topology.add_copartition_group(stream.node, table.node)
    if left_join:
        keep_null_keys_upstream(builder.topology, stream.node)
    return KStream(builder, node, stream.key_serde, None)


def stream_global_table_join(stream: KStream, table: GlobalKTable, key_selector: Callable[[Any, Any], Any],
                             joiner: Callable[[Any, Any], Any], left_join: bool) -> KStream:  # fmt: skip
    """Each stream record looks up ``key_selector(key, value)`` in the fully replicated global table."""
    from kstream_nb.dsl.kstream import KStream

    builder = stream._builder
    node = builder.new_name("KSTREAM-LEFTJOIN")  # Kafka names an inner global-table join so too
    store = table.store_name
    builder.topology.add_processor(
        node, lambda: KStreamKTableJoin(store, joiner, left_join, key_selector), stream.node, stores=[store]
    )
    if left_join:
        keep_null_keys_upstream(builder.topology, stream.node)
    return KStream(builder, node, stream.key_serde, None, stream.repartition_required)


def table_table_join(left: KTable, right: KTable, joiner: Callable[[Any, Any], Any], kind: str,
                     store: TableStore | None) -> KTable:  # fmt: skip
    """Either side's update joins with the other side's current (latest) row; an out-of-order update of a
    versioned side is dropped. The result is not versioned unless ``store`` is a versioned supplier."""
    from kstream_nb.dsl.ktable import KTable

    builder = left._builder
    topology = builder.topology
    # Kafka: a left (outer) join asks the left (both) side(s) for old values; an inner join only reads them
    left_store = left.value_getter(send_old_values=kind != "inner")
    right_store = right.value_getter(send_old_values=kind == "outer")
    merge = builder.new_name("KTABLE-MERGE")  # Kafka names the merge first
    this_name = builder.new_name("KTABLE-JOINTHIS")
    other_name = builder.new_name("KTABLE-JOINOTHER")
    topology.add_processor(
        this_name,
        lambda: KTableKTableJoinSide(kind, True, right_store, joiner),
        left.node,
        stores=getter_stores(right_store),
    )
    topology.add_processor(
        other_name,
        lambda: KTableKTableJoinSide(kind, False, left_store, joiner),
        right.node,
        stores=getter_stores(left_store),
    )
    topology.add_processor(merge, PassThrough, this_name, other_name)
    topology.add_copartition_group(left.node, right.node)
    result = KTable(builder, merge, left.key_serde, None)
    result.old_value_parents = (left, right)  # asked for old values, the join asks both sides
    # looked up (not materialized), its rows are computed from both sides' (Kafka's join value getters)
    result.join_getter = JoinGetter(kind, joiner, left_store, right_store)
    return result.materialize(store, cached=True) if store else result
