"""Pandas-style ``agg`` on windowed streams (tumbling, hopping, sliding, session), checked against a pandas
recount of the same records in each window."""

import pandas as pd
import pytest

import kstream_nb as ks

# (key, timestamp ms, amount): two keys, a null amount, gaps that split sessions and a late record (a, 2000)
# that bridges two of a's sessions, so they merge
RECORDS = [
    ("a", 0, 1.0), ("b", 300, 2.0), ("a", 900, 3.5), ("a", 1500, None), ("b", 2100, -4.0),
    ("a", 2600, 10.0), ("a", 4800, 0.5), ("b", 5000, 7.0), ("a", 5200, 2.0), ("b", 9000, 1.0), ("a", 2000, 6.0),
]  # fmt: skip
FRAME = pd.DataFrame(RECORDS, columns=["key", "ts", "amount"])
NAMED = {
    "total": ("amount", "sum"), "n": ("amount", "count"), "avg": ("amount", "mean"), "lo": ("amount", "min"),
    "hi": ("amount", "max"), "first": ("amount", "first"), "last": ("amount", "last"),
}  # fmt: skip


def run(windows):
    """The app's final row per (key, window start, window end), from the table's updates."""
    b = ks.StreamsBuilder()
    grouped = b.stream("orders").group_by_key().windowed_by(windows)
    updates = []
    grouped.agg(store="sums", **NAMED).to_stream().foreach(lambda w, value: updates.append((w, value)))
    with ks.TopologyTestDriver(b.build()) as driver:
        topic = driver.create_input_topic("orders")
        for key, ts, amount in RECORDS:
            topic.pipe_input(key, {"amount": amount}, timestamp=ts)
        final = {(w.key, w.start, w.end): value for w, value in updates}
        stored = {(w.key, w.start, w.end): v for w, v in driver.get_key_value_store("sums").all()}
    rows = {k: v for k, v in final.items() if v is not None}  # merged sessions' tombstones drop out
    assert stored == rows
    return rows


def expected(key, start, end, end_included):
    """pandas' own aggregation of ``key``'s records in the window (its end included or not)."""
    before_end = (FRAME.ts <= end) if end_included else (FRAME.ts < end)
    in_window = (FRAME.key == key) & (FRAME.ts >= start) & before_end
    amounts = FRAME[in_window]["amount"].dropna()
    if amounts.empty:  # only null amounts: pandas' NaN is the app's None
        return {"total": 0, "n": 0, "avg": None, "lo": None, "hi": None, "first": None, "last": None}
    return {
        "total": amounts.sum(), "n": amounts.count(), "avg": amounts.mean(), "lo": amounts.min(),
        "hi": amounts.max(), "first": amounts.iloc[0], "last": amounts.iloc[-1],
    }  # fmt: skip


def check(got, want):
    assert got["n"] == want["n"]
    for name in ("total", "avg", "lo", "hi", "first", "last"):
        assert got[name] == (None if want[name] is None else pytest.approx(want[name])), name


def check_time_windows(rows, size, advance):
    # every window that holds a record of its key, [start, start + size), starts at multiples of advance
    windows = {
        (key, start, start + size)
        for key, ts, _ in RECORDS
        for start in range(0, ts + 1, advance)
        if start <= ts < start + size
    }
    assert set(rows) == windows
    for (key, start, end), got in rows.items():
        check(got, expected(key, start, end, False))


def test_tumbling_windows_equal_pandas_per_window():
    check_time_windows(run(ks.TimeWindows.of("2s").grace("1h")), 2000, 2000)


def test_hopping_windows_equal_pandas_per_window():
    check_time_windows(run(ks.TimeWindows.of("2s").advance_by("500ms").grace("1h")), 2000, 500)


def test_sliding_windows_equal_pandas_per_window():
    rows = run(ks.SlidingWindows.of_time_difference_and_grace("1s", "1h"))
    # a record at ts >= 1s ends a window [ts - 1s, ts] of its key (both ends included); earlier ones fall in
    # [0, 1s], Kafka's window for early records
    for key, ts, _ in RECORDS:
        assert (key, ts - 1000, ts) in rows if ts >= 1000 else (key, 0, 1000) in rows
    for (key, start, end), got in rows.items():
        check(got, expected(key, start, end, True))


def test_session_windows_merge_and_equal_pandas_per_session():
    rows = run(ks.SessionWindows.of_inactivity_gap_and_grace("1s", "1h"))
    # pandas sessions: a key's next record more than the gap after its previous one starts a new session
    sessions = {}
    for key, group in FRAME.sort_values("ts").groupby("key"):
        session_id = (group["ts"].diff() > 1000).cumsum()
        for _, part in group.groupby(session_id):
            sessions[(key, int(part["ts"].min()), int(part["ts"].max()))] = part
    assert set(rows) == set(sessions)
    for (key, start, end), got in rows.items():
        check(got, expected(key, start, end, True))


def test_windowed_agg_rejects_unknown_function():
    w = ks.StreamsBuilder().stream("orders").group_by_key().windowed_by(ks.TimeWindows.of("2s"))
    with pytest.raises(ValueError, match="median"):
        w.agg(x=("amount", "median"))
