"""Event time, stream-time and wall-clock punctuation, and timestamp order across a task's partitions."""

from __future__ import annotations

import threading

import kstream_nb as ks
from tests.helpers import wait_for


class TickOnStreamTime(ks.Processor):
    """Forwards its input, and a ("tick", stream time) record every second of stream time."""

    def init(self, context):
        super().init(context)
        context.schedule(1000, ks.STREAM_TIME, self.tick)

    def tick(self, timestamp: int) -> None:
        self.context.forward(ks.Record("tick", timestamp, timestamp))

    def process(self, record):
        self.context.forward(record.with_value(record.value["v"]))


def _values(url: str, topic: str, key=None) -> list:
    frame = ks.read_topic(topic, bootstrap_servers=url)
    if key is not None:
        frame = frame[frame["key"] == key]
    return frame["value"].tolist()


def test_event_time_field_drives_stream_time_punctuation(url, make_app):
    b = ks.StreamsBuilder()
    b.stream("events").process(TickOnStreamTime, name="ticker").to("out")
    # record timestamps far in the future: only the "ts" field may drive stream time
    far = 10**12

    def feed(*times: int) -> None:
        ks.produce(
            "events",
            [("k", {"ts": t, "v": t}) for t in times],
            bootstrap_servers=url,
            timestamps=[far] * len(times),
        )

    feed(100, 500)
    app = make_app(b.build(), application_id="ticks", default_timestamp_extractor="field:ts")
    app.start()
    app.wait_until_running().wait_until_idle()
    wait_for(lambda: _values(url, "out", "tick") == [500], what="first tick")

    feed(999)
    app.wait_until_idle()
    wait_for(lambda: 999 in _values(url, "out", "k"), what="record 999")
    feed(1500)
    wait_for(lambda: _values(url, "out", "tick") == [500, 1500], what="tick at 1500")
    feed(3700)  # several intervals at once: one tick, like Kafka
    wait_for(lambda: _values(url, "out", "tick") == [500, 1500, 3700], what="tick at 3700")
    feed(3800, 200)  # out-of-order record does not move stream time back
    app.wait_until_idle()
    wait_for(lambda: 200 in _values(url, "out", "k"), what="late record")
    assert _values(url, "out", "tick") == [500, 1500, 3700]

    out = ks.read_topic("out", bootstrap_servers=url)
    records = out[out["key"] == "k"]
    # forwarded records carry the event time taken from the field
    assert records["timestamp"].tolist() == [100, 500, 999, 1500, 3700, 3800, 200]


def test_callable_timestamp_extractor(url, make_app):
    b = ks.StreamsBuilder()
    b.stream("events").process(TickOnStreamTime).to("out")
    ks.produce("events", [("k", {"when": 2.5, "v": 1})], bootstrap_servers=url, timestamps=[7])
    app = make_app(
        b.build(), application_id="callable", default_timestamp_extractor=lambda r: int(r.value["when"] * 1000)
    )
    app.start()
    app.wait_until_running().wait_until_idle()
    wait_for(lambda: _values(url, "out", "tick") == [2500], what="tick at 2500")
    out = ks.read_topic("out", bootstrap_servers=url)
    assert out[out["key"] == "k"]["timestamp"].tolist() == [2500]


def test_wall_clock_punctuation_fires_on_the_stream_thread(url, make_app):
    fired: list[tuple[str, int]] = []

    class WallTicker(ks.Processor):
        def init(self, context):
            super().init(context)
            context.schedule("20ms", ks.WALL_CLOCK_TIME, self.tick)

        def tick(self, timestamp: int) -> None:
            fired.append((threading.current_thread().name, timestamp))

        def process(self, record):
            self.context.forward(record)

    ks.produce("in", [1], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("in").process(WallTicker).to("out")
    app = make_app(b.build(), application_id="wall")
    app.start()
    app.wait_until_running()
    # fires without any new input, driven by the wall clock only
    wait_for(lambda: len(fired) >= 3, what="three wall-clock punctuations")
    stream_threads = {t.name for t in app.threads}
    assert {name for name, _ in fired} <= stream_threads
    times = [t for _, t in fired]
    assert times == sorted(times)
    assert times[-1] - times[0] >= 20
    assert app.stop(10) is True
    assert all(not t.is_alive() for t in app.threads)


def test_task_with_two_topics_processes_lowest_timestamp_first(url, make_app):
    ks.produce("left", [("l", t) for t in (1, 4, 7, 10)], bootstrap_servers=url, timestamps=[1, 4, 7, 10])
    ks.produce("right", [("r", t) for t in (2, 3, 8, 9)], bootstrap_servers=url, timestamps=[2, 3, 8, 9])
    b = ks.StreamsBuilder()
    b.stream("left").merge(b.stream("right")).to("merged")
    app = make_app(b.build(), application_id="merge")
    app.start()
    app.wait_until_running().wait_until_idle()
    assert [tid for tasks in app.assignment().values() for tid in tasks] == ["0_0"]
    out = ks.read_topic("merged", bootstrap_servers=url)
    assert out["value"].tolist() == [1, 2, 3, 4, 7, 8, 9, 10]
    assert out["timestamp"].tolist() == [1, 2, 3, 4, 7, 8, 9, 10]
