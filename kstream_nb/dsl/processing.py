"""Processor API operations of the DSL: the stores they connect, and ``process_values`` (Kafka's KIP-820)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kstream_nb.processor.fixed_key import KStreamProcessValues

if TYPE_CHECKING:
    from kstream_nb.dsl.builder import StreamsBuilder
    from kstream_nb.dsl.kstream import KStream


def connect_stores(builder: StreamsBuilder, stores: Iterable[Any]) -> list[str]:
    """Names of ``stores``: names added with ``builder.add_state_store``, or store builders (added here)."""
    if isinstance(stores, str):
        stores = [stores]
    names = []
    for store in stores:
        if isinstance(store, str):
            names.append(store)
        else:
            if store.name not in builder.topology.store_builders:
                builder.add_state_store(store)
            names.append(store.name)
    return names


def check_supplier(supplier: Any, op: str) -> None:
    """A processor supplier is a class or a function returning a new processor."""
    if not callable(supplier):
        raise TypeError(f"{op} needs a processor class or a supplier function, got {supplier!r}")


def process_values(
    stream: KStream, supplier: Callable[[], Any], stores: Iterable[Any], name: str | None
) -> KStream:
    """``stream.process_values``: a fixed-key processor node; the key serde is kept, the value serde is not,
    and the stream is marked for repartitioning only if it already was (Kafka's ``processValues``)."""
    from kstream_nb.dsl.kstream import KStream

    check_supplier(supplier, "process_values")
    builder = stream._builder
    names = connect_stores(builder, stores)
    node = name or builder.new_name("KSTREAM-PROCESSVALUES")
    builder.topology.add_processor(node, lambda: KStreamProcessValues(supplier), stream.node, stores=names)
    return KStream(builder, node, stream.key_serde, None, stream.repartition_required)
