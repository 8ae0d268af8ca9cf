"""The clusters the spark parity tests run on (``memory://`` or the Kafka broker), as the ``cluster`` fixture."""

from __future__ import annotations

import uuid
from typing import Any

import pandas as pd

import kstream_nb as ks


class Cluster:
    """Where a parity test runs (``memory://`` or the Kafka broker): its address, client settings, names."""

    def __init__(self, kind: str, bootstrap: str, client_config: dict[str, Any]) -> None:
        self.kind = kind
        self.bootstrap = bootstrap
        self.client_config = client_config
        self.suffix = uuid.uuid4().hex[:8]

    def name(self, base: str) -> str:
        """A topic or application id of this test's own (the broker is shared by the session)."""
        return f"{base}-{self.suffix}"

    def app(self, topology: ks.Topology, threads: int = 1) -> ks.KafkaStreams:
        """The live app of a parity test (on the broker: fast group joins, commits every 100 ms)."""
        config: dict[str, Any] = {"num_stream_threads": threads}
        if self.kind == "kafka":
            config.update(client_config=self.client_config, commit_interval_ms=100, poll_ms=20)
        return ks.KafkaStreams(
            topology, application_id=self.name("live"), bootstrap_servers=self.bootstrap, **config
        )

    def produce(self, topic: str, records: Any, partitions: int = 1, **kwargs: Any) -> None:
        ks.produce(topic, records, bootstrap_servers=self.bootstrap, partitions=partitions,
                   client_config=self.client_config or None, **kwargs)  # fmt: skip

    def read(self, topic: str) -> pd.DataFrame:
        return ks.read_topic(topic, bootstrap_servers=self.bootstrap, client_config=self.client_config or None)

    def __repr__(self) -> str:
        return f"<{self.kind} {self.bootstrap}>"
