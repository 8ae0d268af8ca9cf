"""``ProcessorStateManager``: a task's registered state stores, their changelog partitions and the checkpoint
of the persistent ones, as Kafka Streams' ``ProcessorStateManager``.

The checkpoint file (``<state_dir>/<application_id>/<task_id>/.checkpoint``) records the changelog offsets
that the persistent stores on disk hold, so that a restore replays only what follows them.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from kstream_nb.cluster.records import TopicPartition
from kstream_nb.state.caching import caching_layer
from kstream_nb.state.store import RestoreCallback, StateStore, rocksdb_format_is_stale, task_state_dir

log = logging.getLogger("kstream_nb.task")


class RegisteredStore:
    """A store of the task with its restore callback and changelog partition."""

    __slots__ = ("changelog", "restore", "store")

    def __init__(self, store: StateStore, restore: RestoreCallback, changelog: TopicPartition | None) -> None:
        self.store = store
        self.restore = restore
        self.changelog = changelog


class ProcessorStateManager:
    """The stores of one task (``stores``, by name) and the checkpoint of its persistent stores."""

    def __init__(
        self, task_id: str, partition: int, application_id: str, state_dir: str | None, exactly_once: bool
    ) -> None:
        self.task_id = task_id
        self.partition = partition
        self.application_id = application_id
        self.state_dir = state_dir
        self.exactly_once = exactly_once
        self.stores: dict[str, RegisteredStore] = {}
        #: under exactly-once the checkpoint is removed while the task runs and written on a clean close:
        #: after a crash, stores on disk may hold writes of an aborted transaction, so they are wiped and
        #: restored from the changelog (what Kafka Streams does). Taken before the stores open.
        self._checkpoint = self._take_checkpoint()

    def register(self, store: StateStore, restore: RestoreCallback, changelog_topic: str | None) -> None:
        changelog = TopicPartition(changelog_topic, self.partition) if changelog_topic else None
        self.stores[store.name] = RegisteredStore(store, restore, changelog)

    def changelog_partitions(self) -> dict[TopicPartition, RegisteredStore]:
        return {r.changelog: r for r in self.stores.values() if r.changelog is not None}

    def persistent_changelogs(self) -> list[TopicPartition]:
        """Changelog partitions of stores that keep their data on disk (they need a checkpoint)."""
        return [r.changelog for r in self.stores.values() if r.changelog is not None and r.store.persistent]

    def flush(self) -> None:
        for registered in self.stores.values():
            registered.store.flush()

    def has_cached_changes(self) -> bool:
        """Whether a record cache holds updates not yet written and forwarded (they go at the next commit)."""
        for registered in list(self.stores.values()):
            layer = caching_layer(registered.store)
            if layer is not None and layer.cache.pending():
                return True
        return False

    def close(self) -> list[Exception]:
        """Closes every store (a failing one does not keep the others open); returns the failures."""
        errors = []
        for registered in self.stores.values():
            try:
                registered.store.close()
            except Exception as e:
                errors.append(e)
        return errors

    # ---- checkpoint of persistent stores ---------------------------------------------------------

    @property
    def checkpoint_file(self) -> Path:
        assert self.state_dir is not None, "a checkpoint needs a state directory"
        return task_state_dir(self.state_dir, self.application_id, self.task_id) / ".checkpoint"

    def read_checkpoint(self) -> dict[TopicPartition, int]:
        """Changelog offsets up to which the persistent stores already hold the data (read at creation)."""
        return dict(self._checkpoint)

    def _take_checkpoint(self) -> dict[TopicPartition, int]:
        if self.state_dir is None:
            return {}
        path = self.checkpoint_file
        if rocksdb_format_is_stale(path.parent):
            log.warning(
                "task %s: the RocksDB stores in %s were written by an older kstream_nb, whose default key "
                "format differed: wiping them and restoring them from their changelogs",
                self.task_id,
                path.parent,
            )
            shutil.rmtree(path.parent / "rocksdb")
            path.unlink(missing_ok=True)
        try:
            data = json.loads(path.read_text())
            offsets = {TopicPartition(t, int(p)): int(o) for t, p, o in data.get("offsets", [])}
        except (FileNotFoundError, ValueError, TypeError, KeyError):
            offsets = {}
        if self.exactly_once:
            if offsets:
                path.unlink()
            else:
                wiped = path.parent / "rocksdb"
                if wiped.exists():
                    log.warning(
                        "task %s: no checkpoint after an unclean stop under exactly-once: wiping %s "
                        "and restoring it from the changelog",
                        self.task_id,
                        wiped,
                    )
                    shutil.rmtree(wiped)
        return offsets

    def write_checkpoint(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Records the changelog end offsets the flushed persistent stores correspond to (atomic rename)."""
        path = self.checkpoint_file
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({"version": 1, "offsets": [[tp.topic, tp.partition, o] for tp, o in offsets.items()]})
        )
        os.replace(tmp, path)
