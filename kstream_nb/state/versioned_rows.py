"""How a versioned store keeps one key's versions, and its put and as-of rules (Kafka's ``RocksDBVersionedStore``).

A key has at most one *latest* version (timestamp, value), never a tombstone, and older versions in *rows*, one
row per segment (``timestamp // segment_interval``, truncated as Java divides). A row holds contiguous versions:
each is valid from its timestamp to the next one's, the last one to the row's ``next_ts``; a tombstone is a
version whose value is None. Versions land in the segment of their valid-to timestamp, so different rows may
leave gaps between them (no version: no value). A row whose only version is a tombstone with ``next_ts`` equal
to its timestamp is *degenerate*: it only records that the key was deleted then.

These are the rules Kafka Streams applies, including their edge cases: e.g. a tombstone put at the timestamp of
the latest version removes that version, and the deletion is remembered only when a row ends at that timestamp
(so an out-of-order value put afterwards may become the latest). Rows of segments older than the segment of
stream time minus history retention expire (``expire``).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, NamedTuple

#: ``put`` return code: the new version is the latest (it has no ``valid_to``)
PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1
#: ``put`` return code: the write was older than the grace period (history retention) and was not put
PUT_RETURN_CODE_NOT_PUT = -(2**63)
_NO_VERSION_FOUND = -(2**63) + 1  # Kafka's SENTINEL_TIMESTAMP: no later version found (yet)


class VersionedRecord(NamedTuple):
    """One version of a key: its value, the timestamp it is valid from and, unless it is the latest, the
    timestamp it is valid to (exclusive)."""

    value: Any
    timestamp: int
    valid_to: int | None = None


def segment_id(timestamp: int, interval: int) -> int:
    """The segment of a timestamp, as Java's ``timestamp / interval`` (truncating towards zero)."""
    quotient = abs(timestamp) // interval
    return quotient if timestamp >= 0 else -quotient


class Row:
    """One segment's versions of a key: ``versions`` ascending by valid-from, the last valid to ``next_ts``."""

    __slots__ = ("next_ts", "versions")

    def __init__(self, value: Any, valid_from: int, valid_to: int) -> None:
        self.versions: list[tuple[int, Any]] = [(valid_from, value)]
        self.next_ts = valid_to

    @property
    def min_ts(self) -> int:
        return self.versions[0][0]

    @property
    def degenerate(self) -> bool:
        return self.next_ts == self.min_ts

    def copy(self) -> Row:
        row = Row.__new__(Row)
        row.versions, row.next_ts = list(self.versions), self.next_ts
        return row

    def find(self, timestamp: int) -> tuple[int, int, int, Any]:
        """(position, valid_from, valid_to, value) of the version valid at ``timestamp`` (``min_ts <= timestamp <
        next_ts``)."""
        versions = self.versions
        i = bisect_right(versions, timestamp, key=_valid_from) - 1
        valid_to = versions[i + 1][0] if i + 1 < len(versions) else self.next_ts
        return i, versions[i][0], valid_to, versions[i][1]

    def insert_as_latest(self, valid_from: int, valid_to: int, value: Any) -> None:
        """Adds a version after the row's last one (a gap before it becomes a tombstone version)."""
        versions = self.versions
        if valid_from < self.next_ts:  # Kafka's recovery from a half-done write: cut the row back first
            while versions and versions[-1][0] >= valid_from:
                versions.pop()
            if not versions:
                versions.append((valid_from, None))
            self.next_ts = valid_from
        degenerate = self.degenerate
        if self.next_ts == valid_from:
            if degenerate:
                versions.clear()
        elif not degenerate:
            versions.append((self.next_ts, None))
        versions.append((valid_from, value))
        self.next_ts = valid_to

    def insert_as_earliest(self, valid_from: int, value: Any) -> None:
        """Adds a version before the row's first one (it replaces a degenerate row's tombstone)."""
        if self.degenerate:
            self.versions = [(valid_from, value)]
        else:
            self.versions.insert(0, (valid_from, value))


def _valid_from(version: tuple[int, Any]) -> int:
    return version[0]


class KeyVersions:
    """All versions of one key: the latest (never a tombstone) and the rows of older ones by segment."""

    __slots__ = ("latest", "rows")

    def __init__(self, latest: tuple[int, Any] | None = None, rows: dict[int, Row] | None = None) -> None:
        self.latest = latest
        self.rows: dict[int, Row] = {} if rows is None else rows

    def copy(self) -> KeyVersions:
        return KeyVersions(self.latest, {sid: row.copy() for sid, row in self.rows.items()})

    def __bool__(self) -> bool:
        return self.latest is not None or bool(self.rows)

    def expire(self, min_live_segment: int) -> None:
        """Drops the rows of segments older than ``min_live_segment`` (Kafka drops such segments whole)."""
        for sid in [sid for sid in self.rows if sid < min_live_segment]:
            del self.rows[sid]

    def _rows_from(self, first_segment: int) -> list[tuple[int, Row]]:
        """The rows of segment ``first_segment`` and later ones, newest first."""
        return sorted(((sid, row) for sid, row in self.rows.items() if sid >= first_segment), reverse=True)

    def latest_record(self) -> VersionedRecord | None:
        return None if self.latest is None else VersionedRecord(self.latest[1], self.latest[0])

    def as_of(self, as_of: int, interval: int) -> VersionedRecord | None:
        """The version valid at ``as_of`` (the caller applies the history-retention bound)."""
        latest = self.latest
        if latest is not None and latest[0] <= as_of:
            return VersionedRecord(latest[1], latest[0])
        for _, row in self._rows_from(segment_id(as_of, interval)):
            if row.next_ts <= as_of:
                return None  # this row and every older one end before as_of
            if row.min_ts > as_of:
                continue
            _, valid_from, valid_to, value = row.find(as_of)
            return None if value is None else VersionedRecord(value, valid_from, valid_to)
        return None

    def put(self, timestamp: int, value: Any, stream_time: int, retention: int, interval: int) -> int:
        """Adds a version (None: a tombstone); returns its valid_to, VALID_TO_UNDEFINED or NOT_PUT. The caller
        has checked the grace period and advanced ``stream_time`` (used for the liveness of segments)."""
        min_live = segment_id(stream_time - retention, interval)
        self.expire(min_live)
        found = _NO_VERSION_FOUND
        latest = self.latest
        if latest is not None:
            if timestamp >= latest[0]:
                if timestamp > latest[0]:  # the latest moves into the segment of its new valid-to
                    self._add_as_latest(segment_id(timestamp, interval), min_live, latest[0], timestamp, latest[1])
                self.latest = None if value is None else (timestamp, value)
                return PUT_RETURN_CODE_VALID_TO_UNDEFINED
            found = latest[0]
        for sid, row in self._rows_from(segment_id(timestamp, interval)):
            if row.next_ts <= timestamp:
                break  # the version goes before found, in no existing row's range
            if row.min_ts <= timestamp:
                return self._put_in_row(sid, row, timestamp, value, min_live, interval)
            if row.min_ts < stream_time - retention:
                return PUT_RETURN_CODE_NOT_PUT  # (restores only) it could not change what reads see
            found = row.min_ts
        return self._finish_put(timestamp, value, found, min_live, interval)

    def _add_as_latest(self, sid: int, min_live: int, valid_from: int, valid_to: int, value: Any) -> None:
        if sid < min_live:
            return  # the segment expired: nothing there is read any more
        row = self.rows.get(sid)
        if row is None:
            self.rows[sid] = Row(value, valid_from, valid_to)
        else:
            row.insert_as_latest(valid_from, valid_to, value)

    def _put_in_row(self, sid: int, row: Row, timestamp: int, value: Any, min_live: int, interval: int) -> int:
        pos, valid_from, valid_to, old_value = row.find(timestamp)
        if valid_from == timestamp:  # replaces that version
            row.versions[pos] = (timestamp, value)
            return valid_to
        own_segment = segment_id(timestamp, interval)
        if own_segment != sid:
            # the version it splits now ends at this timestamp: its older part moves to that segment
            self._add_as_latest(own_segment, min_live, valid_from, timestamp, old_value)
            row.versions[pos] = (timestamp, value)
            return valid_to
        row.versions.insert(pos + 1, (timestamp, value))
        return valid_to

    def _finish_put(self, timestamp: int, value: Any, found: int, min_live: int, interval: int) -> int:
        if found == _NO_VERSION_FOUND:
            if value is not None:
                self.latest = (timestamp, value)
                return PUT_RETURN_CODE_VALID_TO_UNDEFINED
            sid = segment_id(timestamp, interval)
            if sid < min_live:
                return PUT_RETURN_CODE_NOT_PUT
            row = self.rows.get(sid)
            if row is None:
                self.rows[sid] = Row(None, timestamp, timestamp)  # a degenerate row: deleted then
            elif row.next_ts != timestamp:  # (equal: that row already says the key is deleted then)
                row.insert_as_latest(row.next_ts, timestamp, None)
            return PUT_RETURN_CODE_VALID_TO_UNDEFINED
        sid = segment_id(found, interval)
        if sid < min_live:
            return PUT_RETURN_CODE_NOT_PUT
        row = self.rows.get(sid)
        if row is None:
            self.rows[sid] = Row(value, timestamp, found)
        elif row.next_ts <= timestamp:
            row.insert_as_latest(timestamp, found, value)
        else:
            row.insert_as_earliest(timestamp, value)
        return found
