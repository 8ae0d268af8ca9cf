"""CPython's cyclic garbage collector while stream threads run: a higher generation-0 threshold.

A stream thread keeps many long-lived containers (store entries, record-cache entries, records waiting in
task queues or for a transaction's commit). At CPython's default threshold of 700 allocations the
collector runs every few hundred records, promotes those containers, and every full collection rescans
all of them: 5-16% of the run in ``bench/bench_kafka_ab.py``'s word count and windowed sum, the most
under exactly-once, where records wait longer. Reference counting frees almost everything; only
reference cycles wait for the collector, so a higher threshold costs little memory. Dask's workers raise
theirs for the same reason.

While at least one stream thread runs, generation 0's threshold is at least the largest
``python_gc_threshold`` of the running threads; when the last one stops, the threshold it found is put
back (unless someone changed it meanwhile).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
#: the threshold each running stream thread asked for (0: leave the interpreter's alone)
_holders: list[int] = []
#: the thresholds found before the first holder raised them, and what was set last
_found: tuple[int, int, int] | None = None
_set: tuple[int, int, int] | None = None


@contextmanager
def raised_gc_threshold(threshold0: int) -> Iterator[None]:
    """Holds generation 0's collection threshold at ``threshold0`` or above for the ``with`` block."""
    global _found, _set
    with _lock:
        _holders.append(threshold0)
        _apply()
    try:
        yield
    finally:
        with _lock:
            _holders.remove(threshold0)
            if _holders:
                _apply()
            else:
                if _found is not None and gc.get_threshold() == _set:
                    gc.set_threshold(*_found)
                _found = _set = None


def _apply() -> None:
    """Sets the threshold to the largest one held (under ``_lock``), never below the one found."""
    global _found, _set
    wanted = max(_holders)
    current = gc.get_threshold()
    if _set is not None and current != _set:
        _found, _set = None, None  # changed by someone else meanwhile: theirs becomes the one to restore
    if wanted <= current[0] and _found is None:
        return
    if _found is None:
        _found = current
    _set = (max(wanted, _found[0]), *_found[1:])
    gc.set_threshold(*_set)
