"""Fixtures: each test gets a fresh, uniquely named embedded cluster."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kstream_nb.cluster.memory import MemoryCluster, get_cluster, reset_cluster


@pytest.fixture
def bootstrap() -> Iterator[str]:
    """A unique ``memory://test-<uuid>`` address, dropped after the test."""
    address = f"memory://test-{uuid.uuid4().hex}"
    yield address
    reset_cluster(address)


@pytest.fixture
def cluster(bootstrap: str) -> MemoryCluster:
    return get_cluster(bootstrap)
