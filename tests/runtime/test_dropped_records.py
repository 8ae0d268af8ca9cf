"""Late-data visibility: ``dropped_records()`` lists the records dropped for closed windows, with the window
and by how much they were late; ``metrics()["task-time"]`` gives each task's stream time and oldest open window.

Every expectation is worked out by hand in the comments: a time window ``[s, e)`` closes when stream time
reaches ``e + grace``, a sliding window ``[s, e]`` when stream time passes ``e + grace``, a session ``[s, e]``
when stream time passes ``e + gap + grace``; lateness = stream time - that close time.
"""

from __future__ import annotations

from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.processor.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows

COLUMNS = ["key", "timestamp", "window_start", "window_end", "stream_time", "lateness_ms"]


def _count(windows: Any, topic: str = "clicks", store: str = "counts") -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream(topic).group_by_key().windowed_by(windows).count(store=store).to_stream().to(f"{topic}-out")
    return b.build()


def _pipe(driver: ks.TopologyTestDriver, topic: str, records: list[tuple[str, int]]) -> None:
    source = driver.create_input_topic(topic)
    for key, ts in records:
        source.pipe_input(key, 1, timestamp=ts)


def _rows(frame: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in frame[COLUMNS].itertuples(index=False)]


def test_tumbling_windows_with_grace_list_each_late_record_with_its_window_and_lateness() -> None:
    with ks.TopologyTestDriver(_count(TimeWindows(10, grace_ms=5))) as d:
        _pipe(
            d,
            "clicks",
            [
                ("a", 1),  # [0,10)
                ("a", 12),  # [10,20)
                ("b", 25),  # stream time 25: [0,10) closed at 15, [10,20) at 25
                ("a", 8),  # [0,10): late by 25 - 15 = 10
                ("b", 14),  # [10,20): closes exactly at 25: late by 0, dropped
                ("a", 21),  # [20,30) closes at 35: kept
                ("c", 40),  # stream time 40
                ("b", 29),  # [20,30): late by 40 - 35 = 5
                ("c", 33),  # [30,40) closes at 45: kept
            ],
        )
        dropped = d.dropped_records()
        assert _rows(dropped) == [  # newest first
            ("b", 29, 20, 30, 40, 5),
            ("b", 14, 10, 20, 25, 0),
            ("a", 8, 0, 10, 25, 10),
        ]
        assert list(dropped["task"]) == ["0_0"] * 3
        assert list(dropped["topic"]) == ["clicks"] * 3
        assert list(dropped["offset"]) == [7, 4, 3]  # the input records' offsets
        assert set(dropped["processor"]) == {next(n.name for n in d.tasks[0].nodes if "AGGREGATE" in n.name)}
        assert d.metrics()["dropped-records-total"] == 3
        assert _rows(d.dropped_records(n=1)) == [("b", 29, 20, 30, 40, 5)]
        # stream time 40, close time 35: [20,30) closed, [30,40) is the oldest open window
        task = d.metrics()["task-time"]["0_0"]
        assert task["stream-time"] == 40
        oldest = task["oldest-open-window"]
        assert (oldest["store"], oldest["stream-time"], oldest["start"], oldest["end"]) == ("counts", 40, 30, 40)


def test_hopping_windows_report_each_closed_window_a_record_missed() -> None:
    # size 10, advance 5, no grace: a record at 12 belongs to [5,15) and [10,20)
    with ks.TopologyTestDriver(_count(TimeWindows(10, advance_ms=5))) as d:
        _pipe(d, "clicks", [("a", 20), ("a", 12), ("a", 17)])
        # stream time 20: [5,15) and [10,20) have closed; 17 is also in [15,25), still open: only [10,20) missed
        assert _rows(d.dropped_records()) == [
            ("a", 17, 10, 20, 20, 0),
            ("a", 12, 10, 20, 20, 0),
            ("a", 12, 5, 15, 20, 5),
        ]
        assert d.metrics()["dropped-records-total"] == 3
        oldest = d.metrics()["task-time"]["0_0"]["oldest-open-window"]
        assert (oldest["start"], oldest["end"]) == (15, 25)


def test_sliding_windows_report_the_window_the_record_missed() -> None:
    with ks.TopologyTestDriver(_count(SlidingWindows(10))) as d:
        _pipe(
            d,
            "clicks",
            [
                ("a", 5),
                ("a", 30),  # stream time 30: a window [s, s + 10] is open while s + 10 >= 30
                ("a", 15),  # every window holding 15 ends by 25: late by 30 - 25 = 5, dropped whole
                ("a", 20),  # goes into [20,30]; its own window [10,20] has closed: late by 10
            ],
        )
        assert _rows(d.dropped_records()) == [("a", 20, 10, 20, 30, 10), ("a", 15, 15, 25, 30, 5)]
        oldest = d.metrics()["task-time"]["0_0"]["oldest-open-window"]
        assert (oldest["start"], oldest["end"], oldest["stream-time"]) == (20, 30, 30)


@pytest.mark.parametrize(
    ("config", "a_start"),
    [({}, 5), ({"statestore_cache_max_bytes": 1 << 20}, 0), ({"default_dsl_store": "rocksdb"}, 5)],
    ids=["memory", "cached", "rocksdb"],
)
def test_sessions_report_the_session_and_lateness_past_gap_and_grace(config: dict[str, Any], a_start: int) -> None:
    with ks.TopologyTestDriver(_count(SessionWindows(gap_ms=10, grace_ms=2)), config) as d:
        _pipe(
            d,
            "clicks",
            [
                ("a", 0),  # session [0,0]
                ("b", 50),  # stream time 50: a session closes when its end + 10 + 2 < 50, i.e. end < 38
                # [0,0] is past the store's retention (gap + grace): a at 5 is alone, [5,5], late by 50 - 17 = 33;
                # a record cache still holds [0,0] and merges it (as Kafka's CachingSessionStore): [0,5]
                ("a", 5),
                ("c", 30),  # [30,30]: late by 50 - 42 = 8
                ("c", 38),  # [38,38]: end 38 is not < 38: kept
            ],
        )
        assert _rows(d.dropped_records()) == [("c", 30, 30, 30, 50, 8), ("a", 5, a_start, 5, 50, 33)]
        # open sessions: b [50,50] and c [38,38]; a [0,0] closed: the oldest open one is c's
        oldest = d.metrics()["task-time"]["0_0"]["oldest-open-window"]
        assert (oldest["start"], oldest["end"]) == (38, 38)


def test_stream_stream_join_reports_its_oldest_open_join_window() -> None:
    b = ks.StreamsBuilder()
    windows = JoinWindows(10, 10, grace_ms=5)
    b.stream("left").left_join(b.stream("right"), lambda lv, rv: [lv, rv], windows).to("joined")
    with ks.TopologyTestDriver(b.build()) as d:
        d.create_input_topic("left").pipe_input("a", 1, timestamp=100)
        d.create_input_topic("right").pipe_input("z", 2, timestamp=120)
        # stream time 120: a left record at t waits for matches while t + 10 + 5 >= 120, so the oldest is at
        # t = 105, whose window is [95, 115]
        task = d.metrics()["task-time"]["0_0"]
        assert task["stream-time"] == 120
        assert {(w["start"], w["end"], w["stream-time"]) for w in task["windows"]} == {(95, 115, 120)}
        assert len(task["windows"]) == 2  # both sides of the join
        assert (task["oldest-open-window"]["start"], task["oldest-open-window"]["end"]) == (95, 115)
        assert d.dropped_records().empty


def test_tasks_without_windows_have_stream_time_and_no_open_window() -> None:
    b = ks.StreamsBuilder()
    b.stream("in").filter(lambda k, v: v > 0).to("out")
    with ks.TopologyTestDriver(b.build()) as d:
        _pipe(d, "in", [("a", 7)])
        assert d.metrics()["task-time"] == {"0_0": {"stream-time": 7, "oldest-open-window": None, "windows": []}}


def test_the_ring_keeps_the_last_1000_late_records_per_task_merged_newest_first_over_tasks() -> None:
    b = ks.StreamsBuilder()
    for topic in ("x", "y"):  # two sub-topologies: tasks 0_0 and 1_0
        b.stream(topic).group_by_key().windowed_by(TimeWindows(10)).count(store=f"{topic}-counts")
    with ks.TopologyTestDriver(b.build()) as d:
        x, y = d.create_input_topic("x"), d.create_input_topic("y")
        x.pipe_input("k", 1, timestamp=100_000)
        y.pipe_input("k", 1, timestamp=100_000)
        for i in range(1500):  # all late: window [i - i % 10, ...) ended long before 100000
            x.pipe_input("k", 1, timestamp=i)
        y.pipe_input("k", 1, timestamp=5)  # the newest drop, in the other task
        x.pipe_input("k", 1, timestamp=7)
        assert d.metrics()["dropped-records-total"] == 1502
        assert len(d.tasks[0].late_records) == 1000 and len(d.tasks[1].late_records) == 1
        everything = d.dropped_records(n=10_000)
        assert len(everything) == 1001
        newest = everything.head(3)
        assert list(zip(newest["task"], newest["timestamp"], newest["lateness_ms"], strict=True)) == [
            ("0_0", 7, 100_000 - 10),
            ("1_0", 5, 100_000 - 10),
            ("0_0", 1499, 100_000 - 1500),
        ]
        # the oldest kept of task 0_0: 1501 drops, the last 1000 kept: from timestamp 501 on
        assert everything["timestamp"].iloc[-1] == 501
        assert d.dropped_records(n=0).empty


def test_a_running_app_lists_late_records_and_task_times(url: str, make_app: Any) -> None:
    # two partitions: murmur2 puts key a on partition 0 (task 0_0) and key d on partition 1 (task 0_1)
    ks.produce("clicks", [("a", 1), ("d", 1)], bootstrap_servers=url, partitions=2, timestamps=[1_000, 1_000])
    ks.produce("clicks", [("a", 1), ("d", 1)], bootstrap_servers=url, timestamps=[990, 1_003])
    app = make_app(_count(TimeWindows(10, grace_ms=2)), application_id="late")
    app.start().wait_until_running().wait_until_idle()
    # a at 990: [990,1000) closes at 1002, stream time of 0_0 is 1000: kept; d at 1003: [1000,1010) kept
    assert app.dropped_records().empty
    ks.produce("clicks", [("a", 1)], bootstrap_servers=url, timestamps=[1_020])
    ks.produce("clicks", [("a", 1)], bootstrap_servers=url, timestamps=[1_005])  # [1000,1010) closed at 1012
    app.wait_until_idle()
    dropped = app.dropped_records()
    assert _rows(dropped) == [("a", 1_005, 1_000, 1_010, 1_020, 8)]
    assert tuple(dropped[["task", "topic", "partition"]].iloc[0]) == ("0_0", "clicks", 0)
    times = app.metrics()["task-time"]
    assert (times["0_0"]["stream-time"], times["0_1"]["stream-time"]) == (1_020, 1_003)
    # 0_0: close time 1018, [1010,1020) is open (1020 > 1018); 0_1: close time 1001, [1000,1010) is open
    a, d = times["0_0"]["oldest-open-window"], times["0_1"]["oldest-open-window"]
    assert ((a["start"], a["end"]), (d["start"], d["end"])) == ((1_010, 1_020), (1_000, 1_010))
    assert app.metrics()["dropped-records-total"] == 1
