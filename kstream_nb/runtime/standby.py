"""Standby tasks: warm copies of another instance's task stores, kept current from the changelogs.

A standby builds the task's stores (no processors) and applies every changelog record as it arrives. When
the group moves the active task here, the warm stores are handed to the new active task, which then only
replays the changelog from the standby's position instead of from the beginning (seed 004).
"""

from __future__ import annotations

from kstream_nb.cluster.records import FetchedBatch, TopicPartition
from kstream_nb.runtime.state_manager import RegisteredStore
from kstream_nb.runtime.task import StreamTask


class StandbyTask:
    """The stores of a task that runs elsewhere, and how far each changelog has been applied."""

    def __init__(self, shell: StreamTask) -> None:
        self.task_id = shell.task_id
        self._shell = shell
        self.stores: dict[TopicPartition, RegisteredStore] = shell.changelog_partitions()
        self.positions: dict[TopicPartition, int] = {}
        self.applied = 0

    @property
    def changelogs(self) -> set[TopicPartition]:
        return set(self.stores)

    def apply(self, tp: TopicPartition, batch: FetchedBatch) -> None:
        """Applies changelog records to the standby store (tombstones delete)."""
        self.stores[tp].restore([(r.key, r.value, r.timestamp) for r in batch.records])
        self.positions[tp] = batch.next_offset
        self.applied += len(batch)

    def adopt_into(self, task: StreamTask) -> dict[TopicPartition, int]:
        """Hands the warm stores to the new active ``task``; returns the changelog positions to restore from."""
        for registered in task.stores.values():
            registered.store.close()
        task.stores.clear()
        for registered in self._shell.stores.values():
            registered.store.init(task)  # re-registers with the active task as the store's context
        return dict(self.positions)

    def close(self) -> None:
        self._shell.close()
