"""Record headers inside a buffered record's changelog value (the suppression and time-ordered join buffers),
laid out as Kafka's ``ProcessorRecordContext`` serializes them: per header a 4-byte name length, the UTF-8
name, a 4-byte value length (-1 for a null value), the value's bytes.
"""

from __future__ import annotations

import struct

from kstream_nb.cluster.records import Headers

_LEN = struct.Struct(">i")


def header_parts(headers: Headers) -> list[bytes]:
    """The bytes of ``headers`` (their count is the caller's to write), to join with the rest of a value."""
    parts: list[bytes] = []
    for name, value in headers:
        encoded = name.encode()
        parts += (_LEN.pack(len(encoded)), encoded)
        parts += (_LEN.pack(-1),) if value is None else (_LEN.pack(len(value)), bytes(value))
    return parts


def decode_headers(data: bytes, pos: int, count: int) -> tuple[Headers, int]:
    """``count`` headers read from ``data`` at ``pos``, and the position after them (``struct.error`` or
    ``UnicodeDecodeError`` on corrupt bytes)."""
    headers = []
    for _ in range(count):
        (n,) = _LEN.unpack_from(data, pos)
        name = data[pos + 4 : pos + 4 + n].decode()
        pos += 4 + n
        (n,) = _LEN.unpack_from(data, pos)
        headers.append((name, None if n < 0 else data[pos + 4 : pos + 4 + n]))
        pos += 4 + max(n, 0)
    return tuple(headers), pos
