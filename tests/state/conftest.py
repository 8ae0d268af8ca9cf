"""Fixtures for state tests: a fake StateStoreContext that records changelog writes, a JSON serde."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.state.caching import ThreadCache
from kstream_nb.state.store import StateStore


class FakeContext:
    """Records what stores log and register; the timestamp is settable; ``cache`` is the record cache that
    cached stores take their part of (a stream thread's)."""

    def __init__(
        self,
        application_id: str = "app",
        partition: int = 0,
        state_dir: str | None = None,
        cache: ThreadCache | None = None,
    ) -> None:
        self.application_id = application_id
        self.task_id = f"0_{partition}"
        self.partition = partition
        self.state_dir: str | None = state_dir
        self.timestamp = 0
        self.logged: list[tuple[str, int, bytes | None, bytes | None, int]] = []
        self.registered: list[tuple[StateStore, Callable[..., None], str | None]] = []
        self.cache = cache if cache is not None else ThreadCache(10_000_000)

    def changelog_topic(self, store_name: str) -> str:
        return f"{self.application_id}-{store_name}-changelog"

    def changelog_writer(self, topic: str) -> Callable[[bytes | None, bytes | None, int], None]:
        def write(key: bytes | None, value: bytes | None, timestamp: int) -> None:
            self.logged.append((topic, self.partition, key, value, timestamp))

        return write

    def register(self, store: StateStore, restore: Callable[..., None], changelog_topic: str | None) -> None:
        self.registered.append((store, restore, changelog_topic))


@pytest.fixture
def context() -> FakeContext:
    return FakeContext(partition=2)


@pytest.fixture
def make_context() -> Callable[..., FakeContext]:
    return FakeContext


@pytest.fixture
def json_serde() -> Serde:
    return serde_from("json")
