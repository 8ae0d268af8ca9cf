"""Records of one partition held column-wise, so built-in processors can work a batch at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kstream_nb.cluster.records import Headers
from kstream_nb.cluster.serdes import Serde


@dataclass(slots=True)
class RecordBatch:
    """Consecutive records of one input partition: keys, dict values as a DataFrame, timestamps, offsets.

    ``key_serde``/``value_serde`` are the serdes that turn the decoded keys/values back into bytes.
    """

    topic: str
    partition: int
    keys: list[Any]
    values: pd.DataFrame
    timestamps: np.ndarray
    offsets: np.ndarray
    key_serde: Serde
    value_serde: Serde
    headers: list[Headers] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def take(self, mask: np.ndarray) -> RecordBatch:
        """The rows where ``mask`` is true, in order."""
        idx = np.flatnonzero(mask)
        return self.with_values(self.values.iloc[idx].reset_index(drop=True), idx)

    def with_values(self, values: pd.DataFrame, idx: np.ndarray | None = None) -> RecordBatch:
        """Same records (or the rows ``idx``) with new values."""
        if idx is None:
            return RecordBatch(
                self.topic,
                self.partition,
                self.keys,
                values,
                self.timestamps,
                self.offsets,
                self.key_serde,
                self.value_serde,
                self.headers,
            )
        keys = [self.keys[i] for i in idx] if len(idx) != len(self.keys) else self.keys
        headers = [self.headers[i] for i in idx] if self.headers is not None else None
        return RecordBatch(
            self.topic,
            self.partition,
            keys,
            values,
            self.timestamps[idx],
            self.offsets[idx],
            self.key_serde,
            self.value_serde,
            headers,
        )

    def value_dicts(self) -> list[dict[str, Any]]:
        """The values as one dict per record (NaN/NA cells become None, numpy scalars Python ones)."""
        columns = list(self.values.columns)
        rows = self.values.itertuples(index=False, name=None)
        return [{c: None if _is_missing(v) else _py(v) for c, v in zip(columns, row)} for row in rows]


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v) or v is pd.NA or v is pd.NaT


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v
