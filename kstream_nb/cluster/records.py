"""Records as they live in a topic partition: raw bytes plus metadata, or decoded columns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from kstream_nb.cluster.serdes import Serde

CREATE_TIME = 0
LOG_APPEND_TIME = 1

Headers = tuple[tuple[str, "bytes | None"], ...]


class TopicPartition(NamedTuple):
    """One partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(slots=True)
class ConsumerRecord:
    """A record read from a partition: serialized key and value with offset, timestamp and headers."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_type: int = CREATE_TIME


@dataclass(slots=True)
class ColumnarBatch:
    """Records held as decoded columns: keys, dict values as a DataFrame (one column per field).

    ``key_serde``/``value_serde`` are the serdes whose ``deserialize`` would have produced these objects,
    so the batch can be turned into bytes (and a reader using the same serdes can skip the round trip).
    """

    keys: list[Any]
    values: pd.DataFrame
    timestamps: np.ndarray
    key_serde: Serde
    value_serde: Serde
    headers: list[Headers] | None = None

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(slots=True)
class FetchedBatch:
    """Consecutive records of one partition returned by a poll.

    ``records`` always holds the records (serialized); ``columnar`` is set when the log stored them as
    decoded columns, so a reader can process the batch column-wise without deserializing.
    """

    topic: str
    partition: int
    base_offset: int
    records: list[ConsumerRecord]
    columnar: ColumnarBatch | None = field(default=None)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)
