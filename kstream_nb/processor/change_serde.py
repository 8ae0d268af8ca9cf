"""The serde of KTable changes in repartition topics (``KTable.group_by``): new and old value."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from kstream_nb.cluster.serdes import JoinedSerializers, Serde
from kstream_nb.errors import SerializationError
from kstream_nb.processor.api import Change

_LEN = struct.Struct(">i")


class ChangeSerde(Serde):
    """4-byte length of the new value (-1 = null), its bytes, then a flag byte and the old value's bytes."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self._serializers = JoinedSerializers(inner)

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> Serde:
        """Configures the value serde inside (a registry serde binds its registry)."""
        inner = self.inner.configure(configs, is_key)
        return self if inner is self.inner else ChangeSerde(inner)

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        serialize = self._serializers[topic]
        new = serialize(data.new_value)
        old = serialize(data.old_value)
        head = _LEN.pack(-1 if new is None else len(new))
        return head + (new or b"") + (b"\x01" + old if old is not None else b"\x00")

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            (n,) = _LEN.unpack_from(data)
            pos = 4 + max(n, 0)
            new = self.inner.deserialize(topic, data[4:pos]) if n >= 0 else None
            old = self.inner.deserialize(topic, data[pos + 1 :]) if data[pos] == 1 else None
        except (struct.error, IndexError) as e:
            raise SerializationError(f"corrupt change record in topic {topic!r}: {data[:32]!r}") from e
        return Change(new, old)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChangeSerde) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash(("change", self.inner))
