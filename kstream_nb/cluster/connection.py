"""Picks the cluster implementation for a bootstrap string (``memory://NAME`` or Kafka ``host:port,...``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kstream_nb.cluster.base import Cluster
from kstream_nb.cluster.memory import MEMORY_SCHEME, get_cluster
from kstream_nb.errors import StreamsError


def connect(bootstrap_servers: str = MEMORY_SCHEME, config: Mapping[str, Any] | None = None) -> Cluster:
    """The cluster behind ``bootstrap_servers``.

    ``memory://NAME`` is the embedded cluster of that name (``config`` is not used there); anything else
    is a Kafka cluster reached through confluent-kafka, ``config`` holding librdkafka settings for every
    client (``security.protocol``, ``sasl.*``, ``ssl.*``, ...). The same servers and settings give the same
    cluster object, so its admin connection is shared.
    """
    if not isinstance(bootstrap_servers, str) or not bootstrap_servers.strip():
        raise StreamsError(
            f"bootstrap_servers must be 'memory://' (or 'memory://NAME') or Kafka's 'host:port[,host:port...]', "
            f"got {bootstrap_servers!r}"
        )
    if bootstrap_servers.startswith(MEMORY_SCHEME):
        return get_cluster(bootstrap_servers)
    from kstream_nb.cluster.kafka import get_kafka_cluster

    return get_kafka_cluster(bootstrap_servers, config)
