"""ks.datagen: deterministic generators with configured disorder/lateness, and a background producer."""

from __future__ import annotations

import threading
import time
import uuid

import numpy as np
import pandas as pd
import pytest

import kstream_nb as ks
from kstream_nb import datagen
from kstream_nb.examples import seed_orders


def lateness(timestamps: pd.Series) -> np.ndarray:
    """How far each record is behind the largest timestamp before it (<= 0: in order)."""
    ts = timestamps.to_numpy(dtype=np.int64)
    before = np.maximum.accumulate(np.concatenate([[ts[0]], ts[:-1]]))
    return before - ts


@pytest.mark.parametrize("make", [datagen.generate_clicks, datagen.generate_sensor_readings])
def test_same_seed_same_records_other_seed_other_records(make) -> None:
    a, b, c = make(3000, seed=7), make(3000, seed=7), make(3000, seed=8)
    pd.testing.assert_frame_equal(a, b)
    assert a["value"].tolist() != c["value"].tolist()


def test_sequence_does_not_depend_on_how_it_is_consumed() -> None:
    whole = datagen.clickstream(seed=3, max_disorder="2s", late_fraction=0.1).take(2500)
    gen = datagen.clickstream(seed=3, max_disorder="2s", late_fraction=0.1)
    pieces = gen.take(1) + gen.take(1200) + gen.take(1299)
    assert [(r.key, r.value, r.timestamp) for r in whole] == [(r.key, r.value, r.timestamp) for r in pieces]
    gen.reset()
    assert [r.value for r in gen.take(5)] == [r.value for r in whole[:5]]


def test_in_order_without_disorder_and_keys_as_configured() -> None:
    clicks = datagen.generate_clicks(2000, seed=1, keys=7, event_interval="250ms", start="1h")
    assert clicks["timestamp"].is_monotonic_increasing
    assert clicks["timestamp"].iloc[0] == 3_600_000 and clicks["timestamp"].diff().iloc[1:].eq(250).all()
    assert set(clicks["key"]) == {f"user-{i}" for i in range(7)}
    assert not clicks["late"].any()
    first = clicks["value"].iloc[0]
    assert set(first) == {"user", "page", "action", "ts"} and first["ts"] == clicks["timestamp"].iloc[0]


def test_disorder_is_bounded_and_late_fraction_as_configured() -> None:
    n, disorder, late_by = 20_000, 5_000, 30_000
    frame = datagen.generate_sensor_readings(
        n, seed=2, max_disorder=disorder, late_fraction=0.05, late_by=late_by, event_interval="1s"
    )
    behind = lateness(frame["timestamp"])
    late = frame["late"].to_numpy()
    assert behind[~late].max() <= disorder  # on-time records stay within the max out-of-orderness
    assert behind[~late].max() > disorder - 1_000 - 200  # ...and do use it (minus one event interval)
    assert (behind[~late] > 0).mean() > 0.3  # many records are out of order
    assert (behind[late] > disorder).all() and behind[late].max() <= disorder + 1 + late_by
    assert 0.04 < late.mean() < 0.06
    # what a window with grace = max_disorder would drop is exactly the late records
    assert ((behind > disorder) == late).all()


def test_late_records_are_dropped_by_a_window_whose_grace_is_the_disorder() -> None:
    clicks = datagen.generate_clicks(3000, seed=4, keys=5, max_disorder="3s", late_fraction=0.02, late_by="1m")
    b = ks.StreamsBuilder()
    # 1 ms windows: a record's window is closed exactly when it is more than the grace behind stream time
    b.stream("clicks").group_by_key().windowed_by(ks.TimeWindows.of(1).grace("3s")).count(store="c")
    with ks.TopologyTestDriver(b.build()) as driver:
        topic = driver.create_input_topic("clicks")
        for key, value, ts in zip(clicks["key"], clicks["value"], clicks["timestamp"], strict=True):
            topic.pipe_input(key, value, timestamp=int(ts))
        dropped = driver.metrics()["dropped-records-total"]
    assert dropped == int(clicks["late"].sum()) > 0


def test_orders_match_the_seed_tables_and_expected_counts_work() -> None:
    data = datagen.generate_orders(500, seed=5, max_disorder="10m")
    reference = seed_orders.generate(5)
    pd.testing.assert_frame_equal(data["users"], reference["users"])
    pd.testing.assert_frame_equal(data["items"], reference["items"])
    orders = data["orders"]
    assert list(orders.columns) == ["key", "item", "ts", "quantity", "user"]
    assert (orders["key"] == orders["user"]).all()
    assert set(orders["user"]) <= set(data["users"]["key"])
    assert "item-unknown" in set(orders["item"])
    counts = seed_orders.expected_counts(data)
    assert counts and all(h % seed_orders.HOUR_MS == 0 for h in counts)
    assert datagen.generate_orders(500, seed=5, max_disorder="10m")["orders"].equals(orders)


def test_invalid_settings_are_named() -> None:
    with pytest.raises(ValueError, match="late_fraction"):
        datagen.clickstream(late_fraction=1.5)
    with pytest.raises(ValueError, match="max_disorder"):
        datagen.clickstream(max_disorder="soon")
    with pytest.raises(ValueError, match="rate"):
        datagen.run_in_background("t", datagen.clickstream(), "memory://x", rate=0)


def _datagen_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kstream-datagen-")]


def test_background_producer_respects_rate_and_stops_its_thread() -> None:
    url = f"memory://datagen-{uuid.uuid4().hex[:8]}"
    handle = datagen.run_in_background("clicks", datagen.clickstream(seed=1), url, rate=500, partitions=3)
    assert handle.running
    time.sleep(1.0)
    produced = handle.stop()
    assert handle.finished_at is not None and handle.started_at is not None
    elapsed = handle.finished_at - handle.started_at
    assert not handle.running and not _datagen_threads()
    assert 0.5 * 500 * elapsed <= produced <= 1.2 * 500 * elapsed + 20, (produced, elapsed)
    out = ks.read_topic("clicks", url)
    assert len(out) == produced and sorted(out["partition"].unique()) == [0, 1, 2]
    # what was written is the generator's sequence: the same as generating it directly
    expected = datagen.generate_clicks(produced, seed=1)
    assert sorted(map(str, out["value"])) == sorted(map(str, expected["value"]))
    assert handle.stop() == produced  # stopping twice is harmless


def test_max_records_and_duration_end_the_run_by_themselves() -> None:
    url = f"memory://datagen-{uuid.uuid4().hex[:8]}"
    handle = datagen.run_in_background("s", datagen.sensor_readings(), url, rate=None, max_records=2500)
    assert handle.wait(30) == 2500 and len(ks.read_topic("s", url)) == 2500
    timed = datagen.run_in_background("t", datagen.sensor_readings(), url, rate=200, duration=0.3)
    produced = timed.wait(30)
    # the duration ends the run; the rate caps what it writes (how much it reaches depends on the machine's load)
    assert not timed.running and produced <= 200 * 0.3 + 20 and len(ks.read_topic("t", url)) == produced
    with pytest.raises(ValueError, match="stop"):
        datagen.run_in_background("u", datagen.sensor_readings(), url, rate=10).wait(1)
    datagen.stop_all()
    assert not _datagen_threads()


def test_error_in_the_thread_is_raised_in_the_caller_not_printed(capsys) -> None:
    def broken(records):
        raise OSError("disk full")

    url = f"memory://datagen-{uuid.uuid4().hex[:8]}"
    handle = datagen.BackgroundProducer("x", datagen.clickstream(), url, 100.0, None, None, 1, send=broken).start()
    time.sleep(0.2)
    assert not handle.running
    with pytest.raises(RuntimeError, match="datagen into 'x' failed") as info:
        handle.stop()
    assert isinstance(info.value.__cause__, OSError)
    assert capsys.readouterr() == ("", "")
