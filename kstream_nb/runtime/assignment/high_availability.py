"""Kafka Streams' ``HighAvailabilityTaskAssignor`` (KIP-441): active tasks where their state is, warm-up
replicas where the balance wants them, and a probing rebalance to move them once warm.

Per stateful task each client has a lag (``ClientState.lag_for``); it is *caught up* when the lag is at most
``acceptable_recovery_lag`` or it runs the task. A stateful active task goes to its previous owner if that one
is caught up, else to the caught-up client with the fewest tasks, else to the least-lagging client. The tasks
are then balanced over the clients by thread count with as few moves as possible: a move to a caught-up client
happens now; a move to a client that is not caught up becomes a *warm-up* replica there (the active stays;
at most ``max_warmup_replicas`` in the group) and the assignment asks for a probing rebalance after
``probing_rebalance_interval_ms``, when the warm-up, caught up by then, takes the active over. Stateless tasks
fill the clients up to their share, staying where they ran. Standby replicas: ``standby.assign_standbys``.

A pure function of what the clients reported: the memory:// group assignor and the leader of a Kafka group
(docs/design/task_assignment_on_kafka.md §3.6) both call ``assign_tasks``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from kstream_nb.runtime.assignment.client_state import (
    AssignmentConfigs,
    ClientAssignment,
    ClientState,
    TaskAssignment,
    is_caught_up,
    rank,
)
from kstream_nb.runtime.assignment.standby import assign_standbys
from kstream_nb.runtime.task_id import TaskId

log = logging.getLogger("kstream_nb.assignor")


def quotas(n: int, capacity: Mapping[str, int], held: Mapping[str, int]) -> dict[str, int]:
    """How many of ``n`` tasks each client should run, in proportion to its threads (``capacity``): the floor
    of its share, plus one for the clients with the largest remainders; among equal remainders the clients
    that hold more already (``held``) get the extra ones, so that fewer tasks move."""
    total = sum(capacity.values())
    if total <= 0:
        return dict.fromkeys(capacity, 0)
    result = {c: n * cap // total for c, cap in capacity.items()}
    extra = n - sum(result.values())
    order = sorted(capacity, key=lambda c: (-(n * capacity[c] % total), -held.get(c, 0), c))
    for client in order[:extra]:
        result[client] += 1
    return result


def assign_tasks(
    tasks: Sequence[str],
    stateful: Collection[str],
    end_offset_sums: Mapping[str, int],
    clients: Mapping[str, ClientState],
    configs: AssignmentConfigs,
) -> TaskAssignment:
    """Every task's active client, the standby and warm-up replicas, and whether a probing rebalance is due.

    ``tasks``: all task ids ("<subtopology>_<partition>"); ``stateful``: those with changelogged stores;
    ``end_offset_sums``: per stateful task the sum of its changelog partitions' end offsets.
    """
    names = sorted(clients)
    result = {c: ClientAssignment() for c in names}
    if not names:
        return TaskAssignment(result, {})
    ordered = sorted(tasks, key=TaskId.parse)
    stateful_tasks = [t for t in ordered if t in set(stateful)]
    lags = {c: {t: clients[c].lag_for(t, end_offset_sums.get(t, 0)) for t in stateful_tasks} for c in names}
    capacity = {c: max(1, clients[c].capacity) for c in names}
    caught_up = {
        t: {c for c in names if is_caught_up(lags[c][t], configs.acceptable_recovery_lag)} for t in stateful_tasks
    }
    owner = _state_constrained_owners(stateful_tasks, names, clients, lags, caught_up, capacity)
    pending, warmups = _balance_stateful(stateful_tasks, names, owner, lags, caught_up, capacity, configs)
    for task, client in owner.items():
        result[client].active.add(task)
    for task, client in warmups.items():
        result[client].warmup.add(task)
    _assign_stateless([t for t in ordered if t not in owner], names, clients, result, capacity, len(ordered))
    assign_standbys(stateful_tasks, owner, clients, lags, result, configs.num_standby_replicas)
    if pending:
        log.info(
            "moves waiting for warm-up replicas to catch up (probing rebalance in %d ms): %s",
            configs.probing_rebalance_interval_ms,
            ", ".join(f"{t} {a}->{b}" for t, (a, b) in sorted(pending.items())),
        )
    return TaskAssignment(result, lags, bool(pending), pending)


def _load(counts: Mapping[str, int], capacity: Mapping[str, int], client: str) -> float:
    return counts.get(client, 0) / capacity[client]


def _state_constrained_owners(
    tasks: Sequence[str],
    names: Sequence[str],
    clients: Mapping[str, ClientState],
    lags: Mapping[str, Mapping[str, int]],
    caught_up: Mapping[str, set[str]],
    capacity: Mapping[str, int],
) -> dict[str, str]:
    """Stateful task -> client: the previous owner if caught up, else the caught-up client with the fewest
    tasks per thread, else the least-lagging client (ties: fewest tasks per thread, then fewest of the same
    sub-topology, so that a fresh start spreads the tasks evenly)."""
    owner: dict[str, str] = {}
    counts: dict[str, int] = {}
    sub_counts: dict[tuple[str, int], int] = {}
    for task in tasks:
        sub = TaskId.parse(task).subtopology
        previous = [c for c in names if task in clients[c].prev_active and c in caught_up[task]]
        if previous:
            choice = previous[0]
        else:
            pool = sorted(caught_up[task]) or list(names)
            choice = min(
                pool,
                key=lambda c: (
                    rank(lags[c][task]) if not caught_up[task] else 0.0,
                    _load(counts, capacity, c),
                    sub_counts.get((c, sub), 0),
                    c,
                ),
            )
        owner[task] = choice
        counts[choice] = counts.get(choice, 0) + 1
        sub_counts[choice, sub] = sub_counts.get((choice, sub), 0) + 1
    return owner


def _balance_stateful(
    tasks: Sequence[str],
    names: Sequence[str],
    owner: dict[str, str],
    lags: Mapping[str, Mapping[str, int]],
    caught_up: Mapping[str, set[str]],
    capacity: Mapping[str, int],
    configs: AssignmentConfigs,
) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """Moves stateful tasks from clients above their share to clients below it, fewest moves first: to a
    caught-up client the active moves now (``owner`` is updated); otherwise the task stays and the target
    gets a warm-up replica while warm-up slots last. Returns (pending moves, warm-up task -> client)."""
    counts = {c: 0 for c in names}
    for client in owner.values():
        counts[client] += 1
    share = quotas(len(tasks), capacity, counts)
    subs = {t: TaskId.parse(t).subtopology for t in tasks}
    per_sub: dict[tuple[str, int], int] = {}
    for task, client in owner.items():
        per_sub[client, subs[task]] = per_sub.get((client, subs[task]), 0) + 1

    def sub_count(client: str, sub: int) -> int:
        return per_sub.get((client, sub), 0)

    planned = dict(owner)  # where each task is after the balance (the moves, whether now or later)
    pending: dict[str, tuple[str, str]] = {}
    warmups: dict[str, str] = {}
    while True:
        donors = [c for c in names if counts[c] > share[c]]
        takers = [c for c in names if counts[c] < share[c]]
        if not donors or not takers:
            break
        candidates = [(t, r) for t in tasks if planned[t] in donors and t not in pending for r in takers]
        if not candidates:
            break
        task, taker = min(
            candidates,
            key=lambda tr: (
                tr[1] not in caught_up[tr[0]],
                rank(lags[tr[1]][tr[0]]),
                sub_count(tr[1], subs[tr[0]]) - sub_count(planned[tr[0]], subs[tr[0]]),
                TaskId.parse(tr[0]),
                tr[1],
            ),
        )
        donor = planned[task]
        counts[donor] -= 1
        counts[taker] += 1
        per_sub[donor, subs[task]] -= 1
        per_sub[taker, subs[task]] = sub_count(taker, subs[task]) + 1
        planned[task] = taker
        if taker in caught_up[task]:
            owner[task] = taker
        else:
            pending[task] = (donor, taker)
            if len(warmups) < configs.max_warmup_replicas:
                warmups[task] = taker
    return pending, warmups


def _assign_stateless(
    tasks: Sequence[str],
    names: Sequence[str],
    clients: Mapping[str, ClientState],
    result: Mapping[str, ClientAssignment],
    capacity: Mapping[str, int],
    total: int,
) -> None:
    """Stateless tasks fill each client up to its share of all tasks: a task stays with the client that ran it
    while that one is below its share; the others go to the client furthest below its share (then the one
    with the fewest tasks of that sub-topology)."""
    counts = {c: len(result[c].active) for c in names}
    held = {c: counts[c] + sum(1 for t in tasks if t in clients[c].prev_active) for c in names}
    share = quotas(total, capacity, held)
    per_sub: dict[tuple[str, int], int] = {}
    for client in names:
        for task in result[client].active:
            key = (client, TaskId.parse(task).subtopology)
            per_sub[key] = per_sub.get(key, 0) + 1

    def give(task: str, client: str) -> None:
        result[client].active.add(task)
        counts[client] += 1
        key = (client, TaskId.parse(task).subtopology)
        per_sub[key] = per_sub.get(key, 0) + 1

    placed: set[str] = set()
    for task in tasks:
        previous = [c for c in names if task in clients[c].prev_active and counts[c] < share[c]]
        if previous:
            give(task, previous[0])
            placed.add(task)
    for task in tasks:
        if task in placed:
            continue
        sub = TaskId.parse(task).subtopology
        choice = min(
            names,
            key=lambda c: (counts[c] - share[c], per_sub.get((c, sub), 0), _load(counts, capacity, c), c),
        )
        give(task, choice)
