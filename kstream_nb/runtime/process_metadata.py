"""An instance's process id, stable across restarts of the instance on the same state directory.

The process id names the instance in the group (its stream threads' client ids, standby placement, the
all-instances view). Like Kafka Streams' ``kafka-streams-process-metadata`` file, it is kept in the state
directory, so a restarted instance comes back under the same name and gets back the tasks whose state it
holds on disk. Several instances may share one state directory: each holds its own host slot
(``kstream_nb.host_slots``) and the id stored for that slot.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from kstream_nb.host_slots import HostSlot, acquire_slot

_VALID = re.compile(r"^[0-9a-f]{8,32}$")


def acquire_process_id(state_dir: str, application_id: str) -> tuple[str, HostSlot]:
    """The process id of the lowest free instance slot of ``application_id`` here, and the held slot."""
    slot = acquire_slot(Path(state_dir) / application_id, "process")
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
