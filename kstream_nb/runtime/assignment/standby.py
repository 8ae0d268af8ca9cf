"""Standby replicas: ``num_standby_replicas`` warm copies of each stateful task, each on another client than the
active task and its warm-up, as Kafka Streams' standby task assignors.

Rack-aware when clients set ``client.rack`` (KIP-925 uses the consumers' racks as the client tags of KIP-708's
``ClientTagAwareStandbyTaskAssignor``): a copy goes first to a client on a rack that holds no copy of the task
yet (the active's rack included), then to a client that already holds state of the task (it ran it, kept a
standby, or has it on disk: least lag first), then to the least loaded client per thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from kstream_nb.runtime.assignment.client_state import ClientAssignment, ClientState, rank

log = logging.getLogger("kstream_nb.assignor")


def assign_standbys(
    tasks: Sequence[str],
    owner: Mapping[str, str],
    clients: Mapping[str, ClientState],
    lags: Mapping[str, Mapping[str, int]],
    result: Mapping[str, ClientAssignment],
    num_standby_replicas: int,
) -> None:
    """Adds to ``result`` the standby replicas of the stateful ``tasks`` (``owner``: task -> active client)."""
    if num_standby_replicas <= 0:
        return
    names = sorted(clients)
    for task in tasks:
        active = owner[task]
        used = {active} | {c for c in names if task in result[c].warmup}
        racks = {clients[c].rack for c in used if clients[c].rack is not None}
        placed = 0
        for _ in range(num_standby_replicas):
            candidates = [c for c in names if c not in used]
            if not candidates:
                break
            choice = min(
                candidates,
                key=lambda c: (
                    clients[c].rack is not None and clients[c].rack in racks,
                    not clients[c].holds_copy(task),
                    rank(lags[c][task]),
                    result[c].load() / max(1, clients[c].capacity),
                    c,
                ),
            )
            result[choice].standby.add(task)
            used.add(choice)
            if clients[choice].rack is not None:
                racks.add(clients[choice].rack)
            placed += 1
        if placed < num_standby_replicas:
            log.warning(
                "task %s: %d of %d standby replicas placed: not enough instances besides the active one; "
                "start more instances to keep the requested number of standby replicas",
                task,
                placed,
                num_standby_replicas,
            )
