"""Picks the cluster implementation for a bootstrap string (``memory://NAME`` or Kafka ``host:port``)."""

from __future__ import annotations

from kstream_nb.cluster.base import Cluster
from kstream_nb.cluster.memory import MEMORY_SCHEME, get_cluster
from kstream_nb.errors import StreamsError


def connect(bootstrap_servers: str = MEMORY_SCHEME) -> Cluster:
    """The cluster behind ``bootstrap_servers``; only the embedded ``memory://`` cluster exists so far."""
    if isinstance(bootstrap_servers, str) and bootstrap_servers.startswith(MEMORY_SCHEME):
        return get_cluster(bootstrap_servers)
    raise StreamsError(
        f"cannot connect to {bootstrap_servers!r}: the Kafka adapter is not available yet; "
        "use bootstrap_servers='memory://' (or 'memory://NAME') for the embedded cluster"
    )
