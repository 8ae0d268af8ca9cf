"""``BrokerHealth``: whether a stream thread's broker answers, and since when it has not.

While the broker is away the thread keeps its tasks and state, stops processing and retries (librdkafka
reconnects by itself); ``KafkaStreams.metrics()`` reports "broker unreachable" meanwhile.
"""

from __future__ import annotations

import logging
import time

from kstream_nb.cluster.base import Cluster, Consumer

log = logging.getLogger("kstream_nb.thread")


class BrokerHealth:
    """Notes "broker away" errors (consumer, producer, commits) and asks the broker, once a second while it
    is away, whether it is back."""

    def __init__(self, name: str, cluster: Cluster, consumer: Consumer) -> None:
        self.name = name
        self.cluster = cluster
        self.consumer = consumer
        #: since when (monotonic s) the broker has not answered, None while it answers
        self.unreachable_since: float | None = None
        self._checked = 0.0

    def away_now(self) -> bool:
        """Whether the broker is away at this moment (asked again: a report may be a second old)."""
        return self.unreachable_since is not None and not self.cluster.reachable(0.5)

    def lost(self, error: object) -> None:
        if self.unreachable_since is None:
            self.unreachable_since = time.monotonic()
            log.warning("%s: broker unreachable, keeping state and retrying: %s", self.name, error)

    def back(self) -> None:
        if self.unreachable_since is not None:
            log.info(
                "%s: broker reachable again after %.1fs",
                self.name,
                time.monotonic() - self.unreachable_since,
            )
            self.unreachable_since = None

    def watch(self) -> None:
        """Notes the consumer's "broker away" errors; while away, asks the broker once a second."""
        error = self.consumer.take_broker_error()
        if error is not None:
            self.lost(error)
        if self.unreachable_since is None or time.monotonic() - self._checked < 1.0:
            return
        self._checked = time.monotonic()
        if self.cluster.reachable(0.5):
            self.back()
