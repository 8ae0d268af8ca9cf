"""How stream tasks are assigned to the members of a Kafka group. Two ways, by ``kafka_task_assignment``:

- ``"leader"``: the classic group gives membership, generations and commit fencing only; each stream thread
  has a group member that fetches nothing (``kafka_group_member.py``) and a fetch consumer for its tasks'
  partitions (``kafka_fetch_consumer.py``); the member that got the control topic's partition assigns the
  tasks with kstream_nb's own assignor and publishes them on ``<application_id>-assignment``, moving a task
  only once its old owner committed and released it (``runtime/control_topic.py``,
  ``runtime/assignment_leader.py``, ``runtime/task_handover.py``). Balanced over threads and sub-topologies,
  sticky, lag-aware; unmoved tasks keep running through a rebalance; topics of one sub-topology may have
  different partition counts.
- ``"range"`` (the default for now), described below: each member derives its own tasks.

On the embedded cluster the group leader runs our own ``GroupAssignor`` (``StreamsPartitionAssignor``:
tasks from the topology, balanced and sticky over all stream threads of all instances). librdkafka
cannot run a custom assignor written in Python on the group leader, so on Kafka:

1. Before joining, the member creates the internal topics (repartition topics with the partition
   count of the sub-topology that writes them, compacted changelogs with one partition per task):
   ``assignor.prepare(partition_counts)``.
2. It subscribes to every source topic of the topology, user and internal, with librdkafka's
   **range** assignor (eager protocol: every rebalance revokes everything, then assigns).
   ``partition.assignment.strategy`` is forced to ``range``.
3. In the assignment callback the member derives its tasks from the partitions it got:
   ``assignor.assign_local(partition_counts, partitions, subscription)``. Task ``p`` of a
   sub-topology reads partition ``p`` of the sub-topology's source topics. The range assignor gives each
   topic's partitions to the members (sorted by member id) in contiguous ranges computed from the
   partition count and the number of subscribers only, so topics with the same partition count are split
   identically: a member that gets partition ``p`` of one of them gets partition ``p`` of all of them.
   Topics read by the same sub-topology are co-partitioned (same partition count: Kafka Streams'
   co-partitioning requirement, checked before the app starts, and internal topics are created to
   match), hence every task lands whole on exactly one member.

Consequences: tasks are balanced per sub-topology (each member gets a contiguous range of partition
numbers of every topic) but not across sub-topologies, and not sticky (the ranges depend only on the
member ids); a member only knows its own tasks. A sub-topology that merges topics with different
partition counts would have its tasks split across members: that is accepted when the sub-topology has
no state store (each member processes the partitions it got) and refused with an error naming the
topics otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from kstream_nb.cluster.base import Assignment, Subscription
from kstream_nb.cluster.records import TopicPartition


@runtime_checkable
class LocalGroupAssignor(Protocol):
    """A ``GroupAssignor`` that can also run on each member, from the partitions the broker gave it."""

    def prepare(self, partition_counts: Mapping[str, int]) -> None:
        """Creates what must exist before joining (internal topics), given the existing source topics."""

    def assign_local(
        self, partition_counts: Mapping[str, int], partitions: set[TopicPartition], subscription: Subscription
    ) -> Assignment:
        """This member's assignment (partitions and userdata for the listener) from its partitions."""
