"""What a client (one instance, all its stream threads) brings to an assignment, and what it gets.

As Kafka Streams' ``ClientState`` and ``SubscriptionInfo``: a client reports per stateful task the sum of the
changelog offsets its local copy holds (``task_offset_sums``; ``LATEST_OFFSET`` for a task it runs as active);
the assignor turns them into lags against the changelogs' end offsets. A task the client holds no copy of
lags by the whole changelog.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: the offset sum of a task the client runs as active (Kafka Streams' ``Task.LATEST_OFFSET``)
LATEST_OFFSET = -2
#: an offset sum the client could not tell (Kafka Streams' ``SubscriptionInfo.UNKNOWN_OFFSET_SUM``)
UNKNOWN_OFFSET_SUM = -3


@dataclass(frozen=True)
class AssignmentConfigs:
    """The settings of the assignor (Kafka Streams' ``AssignorConfiguration.AssignmentConfigs``), with Kafka
    Streams 4.x defaults: acceptable.recovery.lag 10000, max.warmup.replicas 2, probing 10 minutes."""

    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    num_standby_replicas: int = 0
    probing_rebalance_interval_ms: int = 600_000

    @classmethod
    def of(cls, config: Any) -> AssignmentConfigs:
        """The assignor's settings from a ``StreamsConfig``."""
        return cls(
            acceptable_recovery_lag=config.acceptable_recovery_lag,
            max_warmup_replicas=config.max_warmup_replicas,
            num_standby_replicas=config.num_standby_replicas,
            probing_rebalance_interval_ms=config.probing_rebalance_interval_ms,
        )


@dataclass(frozen=True)
class ClientState:
    """One client as its subscriptions describe it: ``capacity`` stream threads, the tasks it ran (active,
    standby), its task offset sums and ``client.rack`` (None when unset)."""

    client_id: str
    capacity: int
    prev_active: frozenset[str] = frozenset()
    prev_standby: frozenset[str] = frozenset()
    #: task id -> offset sum; None when the client reported none (then the tasks it ran count as running)
    offset_sums: Mapping[str, int] | None = None
    rack: str | None = None

    def lag_for(self, task_id: str, end_offset_sum: int) -> int:
        """The records this client would replay to take ``task_id`` over: ``LATEST_OFFSET`` when it runs the
        task, the end offset sum when it holds nothing (or a copy ahead of the log, as Kafka Streams treats a
        truncated changelog), ``UNKNOWN_OFFSET_SUM`` when it could not tell."""
        if self.offset_sums is None:
            return LATEST_OFFSET if task_id in self.prev_active else end_offset_sum
        offset_sum = self.offset_sums.get(task_id, 0)
        if offset_sum == LATEST_OFFSET:
            return LATEST_OFFSET
        if offset_sum == UNKNOWN_OFFSET_SUM:
            return UNKNOWN_OFFSET_SUM
        if offset_sum < 0 or offset_sum > end_offset_sum:
            return end_offset_sum
        return end_offset_sum - offset_sum

    def holds_copy(self, task_id: str) -> bool:
        """Whether the client has some state of the task (it ran it, kept a standby, or has it on disk)."""
        held = task_id in self.prev_active or task_id in self.prev_standby
        return held or (self.offset_sums or {}).get(task_id, 0) > 0


def is_caught_up(lag: int, acceptable_recovery_lag: int) -> bool:
    """A client whose lag is within ``acceptable_recovery_lag`` (or that runs the task) may take it over now."""
    return lag == LATEST_OFFSET or 0 <= lag <= acceptable_recovery_lag


def rank(lag: int) -> float:
    """The lag as a sort key: running active first, then by lag; an unknown lag after every known one."""
    return float("inf") if lag == UNKNOWN_OFFSET_SUM else float(lag)


@dataclass
class ClientAssignment:
    """What one client gets: active tasks, standby replicas, and warm-up replicas (standbys that are there to
    catch up before a probing rebalance moves the active task to this client)."""

    active: set[str] = field(default_factory=set)
    standby: set[str] = field(default_factory=set)
    warmup: set[str] = field(default_factory=set)

    def load(self) -> int:
        return len(self.active) + len(self.standby) + len(self.warmup)


@dataclass
class TaskAssignment:
    """The assignment of every client, the lags it was computed from, and whether a probing rebalance is due
    (warm-ups are catching up, or a move waits for a free warm-up slot)."""

    clients: dict[str, ClientAssignment]
    lags: dict[str, dict[str, int]]
    probing_rebalance_needed: bool = False
    #: moves the balance wanted that wait for a warm-up to catch up: task -> (from client, to client)
    pending_moves: dict[str, tuple[str, str]] = field(default_factory=dict)
