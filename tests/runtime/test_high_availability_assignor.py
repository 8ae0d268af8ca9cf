"""Kafka Streams' HighAvailabilityTaskAssignor (KIP-441) as a pure function: each scenario is worked out by hand
in its docstring (shares are floor/ceil arithmetic, lags are end offset sum - offset sum)."""

from kstream_nb.cluster.base import Subscription
from kstream_nb.runtime.assignment.client_state import (
    LATEST_OFFSET,
    AssignmentConfigs,
    ClientState,
    TaskAssignment,
)
from kstream_nb.runtime.assignment.high_availability import assign_tasks, quotas
from kstream_nb.runtime.assignor import client_states

END = 50_000  # each stateful task's changelog end offset sum in these scenarios
DEFAULTS = AssignmentConfigs()


def running(client: str, *tasks: str, threads: int = 1, **extra: int) -> ClientState:
    """A client running ``tasks`` as active (offset sum LATEST_OFFSET) plus other offset sums."""
    sums = {t: LATEST_OFFSET for t in tasks} | extra
    return ClientState(client, threads, frozenset(tasks), offset_sums=sums)


def stateful(n: int, sub: int = 1) -> list[str]:
    return [f"{sub}_{p}" for p in range(n)]


def run(
    clients: list[ClientState], tasks: list[str], stateful_tasks: list[str], configs: AssignmentConfigs = DEFAULTS
) -> TaskAssignment:
    return assign_tasks(
        tasks, stateful_tasks, dict.fromkeys(stateful_tasks, END), {c.client_id: c for c in clients}, configs
    )


def actives(result: TaskAssignment, client: str) -> set[str]:
    return result.clients[client].active


def test_the_versions_defaults_are_kafka_streams_defaults() -> None:
    """StreamsConfig.java (Kafka 4.x): acceptable.recovery.lag 10_000L, max.warmup.replicas 2,
    probing.rebalance.interval.ms 10 * 60 * 1000L, num.standby.replicas 0."""
    assert (DEFAULTS.acceptable_recovery_lag, DEFAULTS.max_warmup_replicas) == (10_000, 2)
    assert (DEFAULTS.probing_rebalance_interval_ms, DEFAULTS.num_standby_replicas) == (600_000, 0)


def test_shares_follow_thread_counts_floor_and_ceiling() -> None:
    """7 tasks over A (1 thread) and B (2 threads): A's share is 7/3 = 2.33, B's 4.67: floors 2 and 4, the one
    left over goes to the larger remainder (B): 2 and 5. Equal capacities, 5 tasks over 2: 2 and 3, the extra
    one to the client already holding more."""
    assert quotas(7, {"A": 1, "B": 2}, {}) == {"A": 2, "B": 5}
    assert quotas(5, {"A": 1, "B": 1}, {"B": 4}) == {"A": 2, "B": 3}
    assert quotas(5, {"A": 1, "B": 1}, {"A": 4}) == {"A": 3, "B": 2}


def test_a_stateful_task_stays_with_its_caught_up_owner() -> None:
    """Task 1_0 alone, lags {A: running (0), B: 50000}: A's share is 1 (it holds it), so it stays on A; nothing
    to warm up, no probing rebalance."""
    result = run([running("A", "1_0"), ClientState("B", 1, offset_sums={})], ["1_0"], ["1_0"])
    assert actives(result, "A") == {"1_0"} and actives(result, "B") == set()
    assert result.lags == {"A": {"1_0": LATEST_OFFSET}, "B": {"1_0": END}}
    assert not result.probing_rebalance_needed and result.clients["B"].warmup == set()


def test_a_new_empty_client_gets_warmups_not_stateful_actives() -> None:
    """A runs 1_0..1_5 (6 stateful tasks), B joins empty (lag 50000 > 10000 on all). Shares 3 and 3: three
    moves A -> B are wanted, none may happen now (B is not caught up); B gets max_warmup_replicas = 2 warm-ups
    (1_0, 1_1: equal lags, lowest ids first), A keeps all six actives, a probing rebalance is due. Three
    stateless tasks 0_0..0_2 fill B up to its share of the 9 tasks (4 or 5): all three go to B."""
    tasks = stateful(6) + stateful(3, sub=0)
    result = run([running("A", *stateful(6)), ClientState("B", 1, offset_sums={})], tasks, stateful(6))
    assert actives(result, "A") == set(stateful(6))
    assert actives(result, "B") == {"0_0", "0_1", "0_2"}
    assert result.clients["B"].warmup == {"1_0", "1_1"}
    assert result.probing_rebalance_needed
    assert result.pending_moves == {"1_0": ("A", "B"), "1_1": ("A", "B"), "1_2": ("A", "B")}


def test_a_caught_up_warmup_takes_the_active_at_the_probing_rebalance() -> None:
    """Next round: B's warm-ups of 1_0 and 1_1 report offset sums 49_990 (lag 10 <= 10000): both move to B
    now; the third move (1_2) gets the freed warm-up slot. A: 1_2..1_5, B: 1_0, 1_1 + warm-up 1_2."""
    b = ClientState("B", 1, prev_standby=frozenset({"1_0", "1_1"}), offset_sums={"1_0": END - 10, "1_1": END - 10})
    result = run([running("A", *stateful(6)), b], stateful(6), stateful(6))
    assert actives(result, "B") == {"1_0", "1_1"}
    assert actives(result, "A") == {"1_2", "1_3", "1_4", "1_5"}
    assert result.clients["B"].warmup == {"1_2"} and result.probing_rebalance_needed
    # the round after: 1_2 caught up too -> 3 and 3, nothing pending, no further probing
    b = ClientState("B", 1, frozenset({"1_0", "1_1"}), frozenset({"1_2"}), {"1_0": -2, "1_1": -2, "1_2": END})
    result = run([running("A", *stateful(6)[2:]), b], stateful(6), stateful(6))
    assert actives(result, "B") == {"1_0", "1_1", "1_2"} and actives(result, "A") == {"1_3", "1_4", "1_5"}
    assert not result.probing_rebalance_needed and result.clients["B"].warmup == set()


def test_acceptable_recovery_lag_decides_between_warmup_and_move() -> None:
    """B holds copies of 1_0 and 1_1 at lag 400. With acceptable_recovery_lag 1000 B is caught up: one task
    moves now (A 1, B 1). With 100 it is not: the task stays on A and B warms it up."""
    b = ClientState(
        "B", 1, prev_standby=frozenset({"1_0", "1_1"}), offset_sums={"1_0": END - 400, "1_1": END - 400}
    )
    moved = run([running("A", "1_0", "1_1"), b], stateful(2), stateful(2), AssignmentConfigs(1000))
    assert len(actives(moved, "A")) == 1 and len(actives(moved, "B")) == 1 and not moved.probing_rebalance_needed
    held = run([running("A", "1_0", "1_1"), b], stateful(2), stateful(2), AssignmentConfigs(100))
    assert actives(held, "A") == {"1_0", "1_1"} and held.clients["B"].warmup == {"1_0"}


def test_a_task_whose_owner_left_goes_to_the_least_lagging_client() -> None:
    """A is gone; of 1_0's candidates B lags 30000 and C 20000 (neither caught up): C takes it (least lag)."""
    b = ClientState("B", 1, offset_sums={"1_0": END - 30_000})
    c = ClientState("C", 1, offset_sums={"1_0": END - 20_000})
    result = run([b, c], ["1_0"], ["1_0"])
    assert actives(result, "C") == {"1_0"} and not result.probing_rebalance_needed


def test_a_fresh_group_spreads_each_subtopology_over_threads() -> None:
    """No state anywhere, 2 stateful sub-topologies x 4 tasks, A with 1 thread and B with 3: B's share of 8 is
    6, A's 2; and each sub-topology's 4 tasks split 1/3 (not 2/0 or 0/4 on A)."""
    tasks = stateful(4, sub=0) + stateful(4, sub=1)
    clients = [ClientState("A", 1, offset_sums={}), ClientState("B", 3, offset_sums={})]
    result = run(clients, tasks, tasks)
    assert len(actives(result, "A")) == 2 and len(actives(result, "B")) == 6
    for sub in ("0_", "1_"):
        assert len([t for t in actives(result, "A") if t.startswith(sub)]) == 1


def test_stateless_tasks_stay_where_they_ran_when_balanced() -> None:
    """A ran 0_0, 0_1 and B 0_2, 0_3 (stateless): shares 2 and 2, nothing moves; C joins: shares of 4 over 3
    are 2, 1, 1 (the extra one to a client holding 2: A, the lower id), so one of B's moves to C."""
    a = ClientState("A", 1, frozenset({"0_0", "0_1"}), offset_sums={})
    b = ClientState("B", 1, frozenset({"0_2", "0_3"}), offset_sums={})
    result = run([a, b], stateful(4, sub=0), [])
    assert actives(result, "A") == {"0_0", "0_1"} and actives(result, "B") == {"0_2", "0_3"}
    result = run([a, b, ClientState("C", 1, offset_sums={})], stateful(4, sub=0), [])
    assert actives(result, "A") == {"0_0", "0_1"}
    assert len(actives(result, "B")) == 1 and len(actives(result, "C")) == 1


def test_standbys_go_to_another_rack_then_to_the_copy_holders() -> None:
    """One standby each; A and B on rack r1, C on r2; A runs 1_0, B 1_1, C 1_2. The standby of 1_0 and 1_1
    (actives on r1) must be on C (r2) although B holds a copy of 1_0; that of 1_2 (r2) on r1: B, which holds
    a copy (lag 0), rather than A."""
    a = ClientState("A", 1, frozenset({"1_0"}), offset_sums={"1_0": LATEST_OFFSET}, rack="r1")
    b = ClientState(
        "B", 1, frozenset({"1_1"}), offset_sums={"1_1": LATEST_OFFSET, "1_0": END, "1_2": END}, rack="r1"
    )
    c = ClientState("C", 1, frozenset({"1_2"}), offset_sums={"1_2": LATEST_OFFSET}, rack="r2")
    result = run([a, b, c], stateful(3), stateful(3), AssignmentConfigs(num_standby_replicas=1))
    assert result.clients["C"].standby == {"1_0", "1_1"}
    assert result.clients["B"].standby == {"1_2"} and result.clients["A"].standby == set()


def test_standbys_never_share_a_client_with_their_active_or_warmup() -> None:
    """2 standbys of 1_0 with 3 clients: the two that do not run it. With 1_0 and 1_1 on A, shares 1/1/0
    give B a warm-up of 1_0: 1_0's standbys may only go to C (one placed), 1_1's to B and C."""
    clients = [
        running("A", "1_0", "1_1"),
        ClientState("B", 1, offset_sums={}),
        ClientState("C", 1, offset_sums={}),
    ]
    result = run(clients, ["1_0"], ["1_0"], AssignmentConfigs(num_standby_replicas=2))
    assert result.clients["B"].standby == {"1_0"} and result.clients["C"].standby == {"1_0"}
    result = run(clients, stateful(2), stateful(2), AssignmentConfigs(num_standby_replicas=2))
    assert result.clients["B"].warmup == {"1_0"} and result.clients["B"].standby == {"1_1"}
    for task in stateful(2):
        holders = [c for c, a in result.clients.items() if task in a.active | a.standby | a.warmup]
        assert len(holders) == len(set(holders)) == 3


def test_a_third_empty_client_warms_up_one_task_of_each_other_client() -> None:
    """A runs 1_0..1_2, B 1_3..1_5, C joins empty: shares 2/2/2, so one task leaves A and one leaves B; C is
    not caught up on either, so A and B keep their actives and C warms up the lowest id of each (1_0, 1_3)."""
    clients = [
        running("A", "1_0", "1_1", "1_2"),
        running("B", "1_3", "1_4", "1_5"),
        ClientState("C", 1, offset_sums={}),
    ]
    result = run(clients, stateful(6), stateful(6))
    assert actives(result, "A") == {"1_0", "1_1", "1_2"} and actives(result, "B") == {"1_3", "1_4", "1_5"}
    assert actives(result, "C") == set() and result.clients["C"].warmup == {"1_0", "1_3"}


def test_an_instance_is_the_union_of_its_threads_subscriptions() -> None:
    """Two threads of process P: one runs 1_0 (LATEST_OFFSET), the other keeps a standby of 1_0 at 500 and has
    1_1's checkpoint at 700. P: 2 threads, 1_0 LATEST_OFFSET (running wins), 1_1 700, rack from client.rack."""
    subscriptions = {
        "p-1": Subscription(
            frozenset(), {"process_id": "P", "prev_tasks": ["1_0"], "task_offset_sums": {"1_0": -2}, "rack": "r1"}
        ),
        "p-2": Subscription(
            frozenset(),
            {"process_id": "P", "prev_standbys": ["1_0"], "task_offset_sums": {"1_0": 500, "1_1": 700}},
        ),
        "q-1": Subscription(frozenset(), {"process_id": "Q"}),
    }
    clients, members = client_states(subscriptions)
    assert members == {"P": ["p-1", "p-2"], "Q": ["q-1"]}
    p = clients["P"]
    assert (p.capacity, p.rack, dict(p.offset_sums or {})) == (2, "r1", {"1_0": LATEST_OFFSET, "1_1": 700})
    assert p.prev_active == {"1_0"} and p.prev_standby == {"1_0"}
    assert clients["Q"].offset_sums is None  # reported nothing: lags from what it ran only
