"""The sticky, balanced task assignment: tasks stay put when balance allows; newcomers get their share."""

import uuid
from collections.abc import Callable

import pytest

import kstream_nb as ks
from kstream_nb.cluster.base import Subscription, TopicSpec
from kstream_nb.cluster.memory import get_cluster
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import TopologyError
from kstream_nb.runtime.assignor import StreamsPartitionAssignor, TaskInfo, balanced_sticky_assignment


def tasks(sub: int, n: int) -> list[TaskInfo]:
    return [TaskInfo(f"{sub}_{p}", sub, p, ()) for p in range(n)]


def member(*prev: str) -> Subscription:
    return Subscription(frozenset(), {"prev_tasks": list(prev)})


def loads(owners: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in owners.values():
        out[m] = out.get(m, 0) + 1
    return out


def test_a_new_member_gets_its_share_and_the_others_keep_theirs() -> None:
    owners = balanced_sticky_assignment(
        tasks(0, 4), {"a1": member("0_0", "0_1"), "a2": member("0_2", "0_3"), "b1": member()}
    )
    assert sorted(loads(owners).values()) == [1, 1, 2]
    assert loads(owners)["b1"] == 1
    moved = [t for t, m in owners.items() if m == "b1"]
    assert len(moved) == 1  # only one task moved; the rest stayed where they were


def test_a_leaving_member_spreads_its_tasks_and_nothing_else_moves() -> None:
    owners = balanced_sticky_assignment(tasks(0, 6), {"a": member("0_0", "0_1"), "b": member("0_2", "0_3")})
    assert loads(owners) == {"a": 3, "b": 3}
    assert all(owners[t] == "a" for t in ("0_0", "0_1")) and all(owners[t] == "b" for t in ("0_2", "0_3"))


def test_each_subtopology_is_spread_over_the_members() -> None:
    owners = balanced_sticky_assignment(tasks(0, 4) + tasks(1, 4), {"a": member(), "b": member()})
    for sub in (0, 1):
        per_member = loads({t: m for t, m in owners.items() if t.startswith(f"{sub}_")})
        assert per_member == {"a": 2, "b": 2}


def _local_assignor(build: Callable[[ks.StreamsBuilder], object], **topics: int) -> StreamsPartitionAssignor:
    cluster = get_cluster(f"memory://assign-local-{uuid.uuid4().hex[:8]}")
    cluster.admin().create_topics([TopicSpec(t, n) for t, n in topics.items()])
    b = ks.StreamsBuilder()
    build(b)
    return StreamsPartitionAssignor(b.build(), "app", cluster.admin())


def test_a_joined_task_split_over_members_waits_for_the_next_rebalance() -> None:
    """librdkafka subscribes to the topics its metadata knows: a member that joined before it saw a topic
    leaves that topic's partitions to the others, splitting co-partitioned tasks for one rebalance."""
    assignor = _local_assignor(
        lambda b: b.stream("orders").join(b.table("users"), lambda o, u: (o, u)), orders=4, users=4
    )
    got = {TopicPartition("orders", 2), TopicPartition("orders", 3), TopicPartition("users", 3)}
    assignment = assignor.assign_local({"orders": 4, "users": 4}, got, Subscription(frozenset()))
    assert assignment.userdata["pending_tasks"] == ["0_2"]
    assert assignment.partitions == {TopicPartition("orders", 3), TopicPartition("users", 3)}


def test_the_tasks_of_a_repartition_topic_created_at_this_rebalance_wait_for_the_next_one() -> None:
    """The source topic appeared after the app subscribed: the rebalance it causes creates the repartition
    topic, which no member was given yet; the counting tasks are pending (so the app is not idle without
    them) until the group assigns the new topic's partitions."""
    assignor = _local_assignor(lambda b: b.stream("lines").group_by(lambda k, v: v).count(), lines=2)
    got = {TopicPartition("lines", 0), TopicPartition("lines", 1)}
    assignment = assignor.assign_local({"lines": 2}, got, Subscription(frozenset()))
    assert assignment.userdata["pending_tasks"] == ["1_0", "1_1"]
    assert assignment.partitions == got


def test_a_stateful_task_over_topics_of_different_counts_is_refused() -> None:
    """A merge of a 2- and a 4-partition topic feeding a count: the range assignor splits the tasks."""
    assignor = _local_assignor(lambda b: b.stream("a").merge(b.stream("b")).group_by_key().count(), a=2, b=4)
    got = {TopicPartition("a", 1), TopicPartition("b", 2)}
    with pytest.raises(TopologyError, match=r"task 0_1 reads 'a' \(2 partitions\), 'b' \(4 partitions\)"):
        assignor.assign_local({"a": 2, "b": 4}, got, Subscription(frozenset()))
