"""``log_and_continue`` on a topic full of garbage: a bounded number of warning lines (the first few records
in full, then a count per interval), while every skipped record still counts in the metrics (issue 24)."""

from __future__ import annotations

import logging
import random
import re
import time

import pytest

import kstream_nb as ks

SUMMARY = re.compile(r"skipped (\d+) more record\(s\) that could not be read \((\d+) in total\); the last: (\S+)")


def _doubling() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v * 2).to("out")
    return b.build()


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kstream_nb.task" and r.levelno == logging.WARNING]


def test_first_five_in_full_then_a_count_per_interval_of_the_tasks_clock(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="kstream_nb.task")
    config = {"default_deserialization_exception_handler": "log_and_continue"}
    with ks.TopologyTestDriver(_doubling(), config) as driver:
        raw = driver.create_input_topic("in", value_serde="bytes")
        good = driver.create_input_topic("in")
        for _ in range(3000):
            raw.pipe_input(None, b"\xffgarbage")
        good.pipe_input(None, 21)
        driver.advance_wall_clock_time("5s")  # the summary interval: the next bad record writes a count
        for _ in range(3000):
            raw.pipe_input(None, b"\xffgarbage")
        assert driver.create_output_topic("out").read_values_to_list() == [42]
        lines = _lines(caplog)
        assert len(lines) == 6  # the first 5, then one count once the interval passed
    lines = _lines(caplog)
    assert len(lines) == 7  # and closing the task writes the count since the last line
    for offset, line in enumerate(lines[:5]):
        assert line.startswith(f"task 0_0: skipping record in-0@{offset}: ")
        assert "not valid UTF-8" in line  # the reason: the JSON value serde's error
    assert "then a count every 5 s" in lines[4]
    counts = [SUMMARY.search(line) for line in lines[5:]]
    assert [(int(m[1]), int(m[2]), m[3]) for m in counts] == [
        (2996, 3001, "in-0@3001:"),
        (2999, 6000, "in-0@6000:"),
    ]


def test_an_app_counts_every_skipped_record_in_its_metrics(url, make_app, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="kstream_nb.task")
    rng = random.Random(24)
    values = [b"\xffgarbage" if rng.random() < 0.6 else b"%d" % i for i in range(10_000)]
    bad = sum(v.startswith(b"\xff") for v in values)
    ks.produce("in", values, bootstrap_servers=url, value_serde="bytes", partitions=1)
    app = make_app(
        _doubling(), application_id="garbage", default_deserialization_exception_handler="log_and_continue"
    )
    started = time.monotonic()
    app.start()
    app.wait_until_running().wait_until_idle()
    metrics = app.metrics()
    assert metrics["skipped-deserialization-total"] == bad > 5_900
    assert metrics["process-total"] == 10_000 - bad
    app.stop(10)
    elapsed_s = time.monotonic() - started
    lines = _lines(caplog)
    # 5 in full, then at most one count per 5 s of the run, and one at close
    assert 5 < len(lines) <= 5 + int(elapsed_s / 5) + 1
    assert sum(int(m[1]) for m in map(SUMMARY.search, lines[5:]) if m) == bad - 5
