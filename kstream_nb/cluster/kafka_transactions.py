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

import socket
from pathlib import Path

from kstream_nb.host_slots import HostSlot, acquire_slot


class TransactionalIdSlot:
    """A held slot: ``transactional_id`` is valid until ``release()``."""

    def __init__(self, transactional_id: str, slot: HostSlot) -> None:
        self.transactional_id = transactional_id
        self._slot = slot

    def release(self) -> None:
        self._slot.release()

    def __repr__(self) -> str:
        return f"TransactionalIdSlot({self.transactional_id!r})"


def acquire_transactional_id(
    state_dir: str, application_id: str, client_id: str | None = None
) -> TransactionalIdSlot:
    """Takes the lowest free slot of ``application_id`` on this host and returns its transactional id."""
    owner = (client_id or socket.gethostname() or "host").replace("/", "_")
    slot = acquire_slot(Path(state_dir) / application_id, "txn")
    return TransactionalIdSlot(f"{application_id}-{owner}-{slot.number}", slot)
