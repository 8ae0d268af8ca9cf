"""Helpers shared by the test suites."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def backend(store: Any) -> Any:
    """The innermost layer of a store stack (metered -> caching -> change-logging -> backend)."""
    while hasattr(store, "inner"):
        store = store.inner
    return store


def wait_for(condition: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Polls ``condition`` until it returns something truthy (returned); fails naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)
