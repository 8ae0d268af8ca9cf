"""``KTable.transform_values`` in the DSL (Kafka's ``KTable.transformValues``; the processor is
``kstream_nb.processor.table_transform_values``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kstream_nb.dsl.processing import check_supplier, connect_stores
from kstream_nb.processor.table_transform_values import KTableTransformValues

if TYPE_CHECKING:
    from kstream_nb.dsl.ktable import KTable


def transform_values(
    table: KTable,
    supplier: Callable[[], Any],
    store: str | None = None,
    value_serde: Any = None,
    stores: Iterable[Any] = (),
    name: str | None = None,
) -> KTable:
    """A table of ``supplier()``'s ``transform(key, value)`` per row; ``store`` materializes it (queryable,
    cached as Kafka's), ``stores`` are the transformer's own (names or store builders)."""
    from kstream_nb.dsl.ktable import KTable

    check_supplier(supplier, "transform_values")
    builder = table._builder
    names = connect_stores(builder, stores)
    if store is not None:
        builder.add_timestamped_store(store, table.key_serde, value_serde, caching=True)
        names.append(store)
    node = name or builder.new_name("KTABLE-TRANSFORMVALUES")
    builder.topology.add_processor(node, lambda: KTableTransformValues(supplier, store), table.node, stores=names)
    result = KTable(builder, node, table.key_serde, value_serde, store)
    result.window_close_ms = table.window_close_ms
    return result
