"""The null-key filter in front of every stream repartition topic, and which joins relax it (KIP-962).

As Kafka Streams 4 builds it (``InternalStreamsBuilder.rewriteRepartitionNodes``): a repartition drops
records with a null key, silently (not counted as dropped), unless a join that accepts null keys lies
anywhere downstream of it: a left or outer stream-stream join, or a left stream-table or stream-globaltable
join. Such a repartition passes null keys on, so the join can emit its None-padded result (or count the
drop itself).
"""

from __future__ import annotations

from typing import Any

from kstream_nb.processor.stream_stateless import KStreamFilter, PassThrough
from kstream_nb.topology.topology import ProcessorSpec, SinkSpec, SourceSpec, Topology


def _key_not_null(key: Any, value: Any) -> bool:
    return key is not None


class RepartitionNullKeyFilter:
    """Supplier of a repartition's filter processor; ``keep_null_keys`` is set once a relaxed join is added
    downstream (read when the processor is made, i.e. after the topology is complete)."""

    def __init__(self) -> None:
        self.keep_null_keys = False

    def __call__(self) -> Any:
        return PassThrough() if self.keep_null_keys else KStreamFilter(_key_not_null)


def keep_null_keys_upstream(topology: Topology, *nodes: str) -> None:
    """Lets null keys through every repartition upstream of ``nodes`` (the parents of a join that accepts
    them), following processors' parents and internal repartition topics back to the sinks writing them."""
    specs = topology.node_specs
    sinks: dict[str, list[str]] = {}
    for spec in specs.values():
        if isinstance(spec, SinkSpec):
            sinks.setdefault(spec.topic, []).append(spec.name)
    repartition_topics = topology.repartition_topics
    stack, seen = list(nodes), set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        node = specs.get(name)
        if isinstance(node, ProcessorSpec):
            if isinstance(node.supplier, RepartitionNullKeyFilter):
                node.supplier.keep_null_keys = True
            stack.extend(node.parents)
        elif isinstance(node, SinkSpec):
            stack.extend(node.parents)
        elif isinstance(node, SourceSpec):
            stack.extend(s for topic in node.topics if topic in repartition_topics for s in sinks.get(topic, ()))
