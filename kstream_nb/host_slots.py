"""Numbered slots on this host, each held by one live client: ids that are stable across restarts.

Slot ``N`` of a kind is an exclusive ``flock`` on ``<folder>/.<kind>-slot-N.lock``, held while its owner
lives and released by the operating system when the process dies (even by SIGKILL). An owner takes the
lowest free slot, so a restarted instance gets back the slot its predecessor held, while owners running
at the same time never share one. Used for transactional ids and for an instance's process id.
"""

from __future__ import annotations

import os
from pathlib import Path

from kstream_nb.errors import StreamsError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: slots are unique per process, not stable
    fcntl = None  # type: ignore[assignment]

MAX_SLOTS = 1024


class HostSlot:
    """A held slot (``number``, its folder and kind) until ``release()``."""

    def __init__(self, folder: Path, kind: str, number: int, fd: int | None) -> None:
        self.folder = folder
        self.kind = kind
        self.number = number
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock

    def __repr__(self) -> str:
        return f"HostSlot({str(self.folder)!r}, {self.kind!r}, {self.number})"


def acquire_slot(folder: Path, kind: str) -> HostSlot:
    """Takes the lowest free slot of ``kind`` in ``folder`` (created if missing)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StreamsError(f"cannot create the state directory {folder}: {e}") from e
    if fcntl is None:  # pragma: no cover
        return HostSlot(folder, kind, os.getpid(), None)
    for number in range(MAX_SLOTS):
        fd = os.open(folder / f".{kind}-slot-{number}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return HostSlot(folder, kind, number, fd)
    raise StreamsError(f"all {MAX_SLOTS} {kind} slots in {folder} are taken")
