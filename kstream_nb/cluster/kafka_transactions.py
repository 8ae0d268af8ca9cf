"""Transactional ids for exactly_once_v2 on Kafka: one per stream thread, stable across restarts.

A transactional producer is fenced by a newer one that registers the same ``transactional.id``
(``init_transactions``); the broker also closes the transaction the old one left open. So the id must
be the same when a crashed instance comes back (its zombie transaction is closed at once instead of
holding back read_committed readers until it times out), yet differ between the threads and instances
that run at the same time (two live producers with one id fence each other forever).

A stream thread takes the lowest free *slot* of its application on this host: slot ``N`` is an
exclusive ``flock`` on ``<state_dir>/<application_id>/.txn-slot-N.lock``, held while the thread lives and
released by the operating system when the process dies (even by SIGKILL). The id is
``<application_id>-<client_id or host name>-<N>``: a restarted instance takes the slots its predecessor
held, and threads running at the same time never share one.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from kstream_nb.errors import StreamsError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: ids are still unique per process, not stable
    fcntl = None  # type: ignore[assignment]

MAX_SLOTS = 1024


class TransactionalIdSlot:
    """A held slot: ``transactional_id`` is valid until ``release()``."""

    def __init__(self, transactional_id: str, fd: int | None) -> None:
        self.transactional_id = transactional_id
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock

    def __repr__(self) -> str:
        return f"TransactionalIdSlot({self.transactional_id!r})"


def acquire_transactional_id(
    state_dir: str, application_id: str, client_id: str | None = None
) -> TransactionalIdSlot:
    """Takes the lowest free slot of ``application_id`` on this host and returns its transactional id."""
    owner = (client_id or socket.gethostname() or "host").replace("/", "_")
    if fcntl is None:  # pragma: no cover
        return TransactionalIdSlot(f"{application_id}-{owner}-{os.getpid()}", None)
    folder = Path(state_dir) / application_id
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StreamsError(f"cannot create the state directory {folder}: {e}") from e
    for slot in range(MAX_SLOTS):
        fd = os.open(folder / f".txn-slot-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return TransactionalIdSlot(f"{application_id}-{owner}-{slot}", fd)
    raise StreamsError(f"all {MAX_SLOTS} transactional id slots of {application_id!r} in {folder} are taken")
