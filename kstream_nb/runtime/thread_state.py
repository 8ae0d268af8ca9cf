"""``ThreadState``: a stream thread's life cycle, as Kafka Streams' ``StreamThread.State``.

The states compare equal to their names ("RUNNING"), which metrics, widgets and tests show; ``check``
holds the legal transitions in one place.
"""

from __future__ import annotations

from enum import Enum

from kstream_nb.errors import IllegalStateError


class ThreadState(str, Enum):
    """CREATED, STARTING, (PARTITIONS_REVOKED | PARTITIONS_ASSIGNED, RUNNING)*, PENDING_SHUTDOWN, DEAD."""

    CREATED = "CREATED"
    STARTING = "STARTING"
    PARTITIONS_REVOKED = "PARTITIONS_REVOKED"
    PARTITIONS_ASSIGNED = "PARTITIONS_ASSIGNED"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    DEAD = "DEAD"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return self.value.__format__(spec)

    @property
    def rebalancing(self) -> bool:
        """Between starting and holding its tasks (the client counts as REBALANCING meanwhile)."""
        return self in (ThreadState.STARTING, ThreadState.PARTITIONS_REVOKED, ThreadState.PARTITIONS_ASSIGNED)

    def check(self, new: ThreadState) -> bool:
        """Whether the thread moves from this state to ``new``: False for a request Kafka Streams ignores
        (after PENDING_SHUTDOWN only DEAD; nothing after DEAD); raises ``IllegalStateError`` on any other
        transition not in the table."""
        if self is ThreadState.DEAD or (self is ThreadState.PENDING_SHUTDOWN and new is not ThreadState.DEAD):
            return False
        if new not in _NEXT[self]:
            raise IllegalStateError(f"stream thread cannot go from {self.value} to {new.value}")
        return True


_S = ThreadState
#: Kafka Streams' table, plus DEAD from every state: a thread that fails (or is stopped while it waits for
#: the global stores) closes and ends without passing through PENDING_SHUTDOWN
_NEXT: dict[ThreadState, frozenset[ThreadState]] = {
    _S.CREATED: frozenset({_S.STARTING, _S.PENDING_SHUTDOWN, _S.DEAD}),
    _S.STARTING: frozenset({_S.PARTITIONS_REVOKED, _S.PARTITIONS_ASSIGNED, _S.PENDING_SHUTDOWN, _S.DEAD}),
    _S.PARTITIONS_REVOKED: frozenset(
        {_S.PARTITIONS_REVOKED, _S.PARTITIONS_ASSIGNED, _S.PENDING_SHUTDOWN, _S.DEAD}
    ),
    _S.PARTITIONS_ASSIGNED: frozenset(
        {_S.PARTITIONS_REVOKED, _S.PARTITIONS_ASSIGNED, _S.RUNNING, _S.PENDING_SHUTDOWN, _S.DEAD}
    ),
    _S.RUNNING: frozenset(
        {_S.PARTITIONS_REVOKED, _S.PARTITIONS_ASSIGNED, _S.RUNNING, _S.PENDING_SHUTDOWN, _S.DEAD}
    ),
    _S.PENDING_SHUTDOWN: frozenset({_S.DEAD}),
    _S.DEAD: frozenset(),
}
