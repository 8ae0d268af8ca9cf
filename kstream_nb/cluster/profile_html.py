"""The HTML of a ``TopicProfile`` (``ks.profile_topic``, ``%kstream topics TOPIC``): plain HTML, no JavaScript."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from html import escape
from typing import Any

from kstream_nb.cluster.profile import TopicProfile

_TABLE = "<table class='ks-table ks-profile-{cls}' style='border-collapse:collapse;font-size:12px;margin:4px 0'>"
_CELL = "padding:1px 8px;border-bottom:1px solid #e5e7eb"
#: longest key/value text in the records table
_MAX_TEXT = 120


def format_ms(ms: int | None) -> str:
    """Epoch milliseconds as ``2026-11-26 10:00:00.000 UTC`` (``-`` for None)."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _count(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _table(cls: str, headers: Iterable[str], rows: Iterable[Iterable[Any]], numeric: set[int]) -> str:
    head = "".join(f"<th style='text-align:left;{_CELL}'>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td style='{_CELL};text-align:{'right' if i in numeric else 'left'}'>{escape(str(c))}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"{_TABLE.format(cls=cls)}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _formats(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{escape(f)} {n:,}" for f, n in counts.items()) or "-"


def _clip(value: Any) -> str:
    text = "null" if value is None else repr(value) if not isinstance(value, str) else value
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"


def profile_html(profile: TopicProfile) -> str:
    """Summary line, partitions (records, bytes, time range), formats, columns, keys and the newest records."""
    p = profile
    estimated = "" if p.bytes_exact else " (estimated: the sample's mean record size times records)"
    summary = (
        f"<div style='font:13px sans-serif'><b>Topic</b> <code>{escape(p.topic)}</code> on "
        f"<code>{escape(p.bootstrap_servers)}</code>: <b>{p.records:,}</b> records, "
        f"<b>{_count(p.bytes)}</b> bytes{estimated} in {len(p.partitions)} partition(s); "
        f"skew (max/mean records) <b>{_ratio(p.skew)}</b>, bytes <b>{_ratio(p.bytes_skew)}</b><br>"
        f"time range <b>{format_ms(p.first_timestamp)}</b> to <b>{format_ms(p.last_timestamp)}</b></div>"
    )
    partitions = _table(
        "partitions",
        ["partition", "records", "bytes", "offsets", "first timestamp", "last timestamp", "sampled"],
        (
            [
                q.partition,
                f"{q.records:,}",
                _count(q.bytes),
                f"{q.begin_offset} to {q.end_offset}",
                format_ms(q.first_timestamp),
                format_ms(q.last_timestamp),
                f"{q.sampled:,}",
            ]
            for q in p.partitions
        ),
        {0, 1, 2, 6},
    )
    sample = (
        f"<div style='font:12px sans-serif;margin-top:6px'>Sample: {p.sampled:,} records "
        f"({escape(p.sampling_text)}).<br>Key formats: {_formats(p.key_formats)}. "
        f"Value formats: {_formats(p.value_formats)}.<br>"
        f"Distinct keys: <b>{p.distinct_keys:,}</b> in the sample of {p.sampled:,} records"
        f"{f' (and {p.null_keys:,} null keys)' if p.null_keys else ''}.</div>"
    )
    columns = ""
    if p.columns:
        columns = (
            f"<div style='font:12px sans-serif;margin-top:6px'>Columns of the {p.structured_values:,} "
            "structured values sampled:</div>"
            + _table(
                "columns",
                ["column", "dtype", "nulls", "null rate"],
                ([c.name, c.dtype, f"{c.nulls:,}", f"{c.null_rate:.1%}"] for c in p.columns),
                {2, 3},
            )
        )
    records = ""
    frame = p.records_shown
    if len(frame):
        records = (
            f"<div style='font:12px sans-serif;margin-top:6px'>The newest {len(frame)} sampled records:</div>"
            + _table(
                "records",
                ["partition", "offset", "timestamp", "key", "value"],
                (
                    [
                        r["partition"],
                        r["offset"],
                        format_ms(int(r["timestamp"].value // 1_000_000)),
                        f"{_clip(r['key'])} ({r['key_format']})",
                        f"{_clip(r['value'])} ({r['value_format']})",
                    ]
                    for r in frame.to_dict("records")
                ),
                {0, 1},
            )
        )
    return f"<div class='ks-topic-profile'>{summary}{partitions}{sample}{columns}{records}</div>"
