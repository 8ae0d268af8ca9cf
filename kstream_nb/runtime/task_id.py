"""``TaskId``: which sub-topology and partition number a task runs, as Kafka Streams' ``processor.TaskId``.

Task ids travel as strings ("1_0": in assignments, metrics, state directories); ``parse`` reads one back.
"""

from __future__ import annotations

from typing import NamedTuple


class TaskId(NamedTuple):
    """A task's sub-topology id and partition number; ``str()`` gives Kafka's "<subtopology>_<partition>"."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """The id that ``str()`` wrote as ``text`` ("1_0" -> TaskId(1, 0))."""
        subtopology, sep, partition = text.partition("_")
        if not sep:
            raise ValueError(f"not a task id: {text!r} (expected '<subtopology>_<partition>')")
        return cls(int(subtopology), int(partition))
