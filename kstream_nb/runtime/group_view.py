"""The group-wide task assignment as ``KafkaStreams.group_assignment()`` shows it: every task's active thread and
instance, the instances holding standby and warm-up copies, each holder's lag, and the moves of the last
rebalance.

Sources: each stream thread's ``group_view`` and the assignor's ``group_hosts`` (warm-ups, lags and moves), both
from the last assignment: the group assignor's on ``memory://``, the control topic's on Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def group_assignment(threads: Iterable[Any], group_hosts: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Task id -> {"thread", "instance", "standby", "warmup", "partitions", "lags", "moved"}, sorted by task id.

    ``lags``: instance -> records of the task's changelogs it lacked at the last assignment (0 for the
    running active, None when unknown), for the active, standby and warm-up holders of a stateful task.
    ``moved``: {"from", "to"} instances when the last assignment changed the task's active instance, else None.
    """
    warm = dict(group_hosts.get("warmups", {}))
    lags = dict(group_hosts.get("lags", {}))
    moved = dict(group_hosts.get("moved", {}))
    view: dict[str, dict[str, Any]] = {}
    for thread in list(threads):
        for tid, (member, pid, standby, partitions) in dict(thread.group_view).items():
            view[tid] = {
                "thread": member,
                "instance": pid,
                "standby": list(standby),
                "warmup": list(warm.get(tid, ())),
                "partitions": partitions,
                "lags": dict(lags.get(tid, {})),
                "moved": dict(moved[tid]) if tid in moved else None,
            }
    return dict(sorted(view.items()))
