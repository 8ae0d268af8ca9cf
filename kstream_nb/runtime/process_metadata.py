"""An instance's process id, stable across restarts of the instance on the same state directory.

The process id names the instance in the group: its stream threads' client ids (the order of the range
assignment, so a restarted instance gets its tasks back), its exactly-once transactional ids (a restarted
instance fences its zombies), standby placement and the all-instances view. Like Kafka Streams'
``kafka-streams-process-metadata`` file it is kept in the state directory. Several instances may share a
state directory: each holds a numbered *slot* there, an exclusive ``flock`` on
``<state_dir>/<application_id>/.process-slot-N.lock`` released by the operating system when the process
dies (even by SIGKILL), and uses the id stored for its slot. An instance takes the lowest free slot, so a
restarted instance gets its predecessor's id back, and instances running at the same time never share one.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from kstream_nb.errors import StreamsError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: ids are unique per process, not stable
    fcntl = None  # type: ignore[assignment]

MAX_SLOTS = 1024
_VALID = re.compile(r"^[0-9a-f]{8,32}$")


class ProcessSlot:
    """A held slot of the state directory (its ``number``) until ``release()``."""

    def __init__(self, folder: Path, number: int, fd: int | None) -> None:
        self.folder = folder
        self.number = number
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock

    def __repr__(self) -> str:
        return f"ProcessSlot({str(self.folder)!r}, {self.number})"


def _acquire_slot(folder: Path) -> ProcessSlot:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StreamsError(f"cannot create the state directory {folder}: {e}") from e
    if fcntl is None:  # pragma: no cover
        return ProcessSlot(folder, os.getpid(), None)
    for number in range(MAX_SLOTS):
        fd = os.open(folder / f".process-slot-{number}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return ProcessSlot(folder, number, fd)
    raise StreamsError(f"all {MAX_SLOTS} instance slots in {folder} are taken")


def acquire_process_id(state_dir: str, application_id: str) -> tuple[str, ProcessSlot]:
    """The process id of the lowest free instance slot of ``application_id`` here, and the held slot."""
    slot = _acquire_slot(Path(state_dir) / application_id)
    path = slot.folder / f"process-{slot.number}.id"
    try:
        stored = path.read_text().strip()
    except OSError:
        stored = ""
    if _VALID.match(stored):
        return stored, slot
    process_id = uuid.uuid4().hex[:8]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(process_id + "\n")
    tmp.replace(path)
    return process_id, slot
