"""Deterministic data generators for labs and demos: clickstream, seed 000's orders/users/items, sensors.

A generator yields an endless, reproducible sequence of ``ks.Record``s: the i-th record depends only on
the generator's settings and ``seed``, never on how the sequence is consumed (``take(10)`` twice gives
the same records as ``take(20)`` once). Event time advances by ``event_interval`` per record and can be
made messy on purpose:

* ``max_disorder``: each on-time record's timestamp lies up to this far *behind* its place in the
  sequence, so records arrive out of order, but never more than ``max_disorder`` behind the largest
  timestamp seen before them (a window grace of ``max_disorder`` keeps all of them);
* ``late_fraction``: this share of records is *late*: its timestamp is more than ``max_disorder`` (and up
  to ``max_disorder + late_by``) behind the largest timestamp seen before it, so a window whose grace is
  ``max_disorder`` drops it.

Plain helpers return data for tests and pandas: ``generate_clicks(n)``, ``generate_sensor_readings(n)``
(DataFrames with ``key, value, timestamp, late``) and ``generate_orders(n)`` (seed 000's ``users``,
``items`` and ``orders`` DataFrames, the shape ``kstream_nb.examples.seed_orders`` works with).

``run_in_background(topic, generator, bootstrap_servers=..., rate=..., duration=...)`` feeds a topic from
a background thread at ``rate`` records per second of wall-clock time; the returned handle has
``produced``, ``wait()`` and ``stop()`` (which joins the thread). The thread never prints; an error is
kept on the handle and raised by ``wait()``/``stop()`` in the caller's thread.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from kstream_nb.cluster.topic_io import produce
from kstream_nb.durations import Duration, to_millis
from kstream_nb.examples import seed_orders
from kstream_nb.processor.api import Record

BLOCK = 1024  # records are generated in blocks; block b depends only on (seed, b) and the carried max
PAGES = ("/", "/search", "/product", "/cart", "/checkout", "/help")
ACTIONS = ("view", "view", "view", "click", "click", "add_to_cart", "purchase")
Values = tuple[list[Any], list[Any]]


class Generator:
    """An endless, deterministic sequence of records with configurable event-time disorder and lateness.

    Subclasses define ``_values(rng, index, timestamps) -> (keys, values)`` for one block of records.
    ``take(n)`` continues the sequence; ``reset()`` starts it over; ``frame(n)`` is a DataFrame of the
    next ``n`` records with a ``late`` column telling which ones were made late.
    """

    name = "records"

    def __init__(
        self,
        seed: int = 0,
        keys: int = 100,
        event_interval: Duration = "100ms",
        max_disorder: Duration = 0,
        late_fraction: float = 0.0,
        late_by: Duration = "10s",
        start: Duration = 0,
    ) -> None:
        if keys < 1:
            raise ValueError(f"keys must be >= 1, got {keys}")
        if not 0.0 <= late_fraction <= 1.0:
            raise ValueError(f"late_fraction must be between 0 and 1, got {late_fraction}")
        self.seed = int(seed)
        self.keys = int(keys)
        self.event_interval_ms = to_millis(event_interval, "event_interval")
        self.max_disorder_ms = to_millis(max_disorder, "max_disorder")
        self.late_fraction = float(late_fraction)
        self.late_by_ms = to_millis(late_by, "late_by")
        self.start_ms = to_millis(start, "start")
        self._lock = threading.Lock()
        self.reset()

    # ---- the sequence ---------------------------------------------------------------------------------

    def reset(self) -> None:
        """Starts the sequence over from record 0."""
        with self._lock:
            self.position = 0  # index of the next record take() returns
            self._block_no = 0
            self._carry_max = -1  # largest timestamp of all blocks generated so far (-1: none)
            self._buffer: list[tuple[Record, bool]] = []

    def take(self, n: int) -> list[Record]:
        """The next ``n`` records of the sequence."""
        return [r for r, _ in self._take(n)]

    def frame(self, n: int) -> pd.DataFrame:
        """The next ``n`` records as a DataFrame: ``key, value, timestamp, late``."""
        rows = self._take(n)
        return pd.DataFrame(
            {
                "key": [r.key for r, _ in rows],
                "value": [r.value for r, _ in rows],
                "timestamp": np.array([r.timestamp for r, _ in rows], dtype=np.int64),
                "late": np.array([late for _, late in rows], dtype=bool),
            }
        )

    def _take(self, n: int) -> list[tuple[Record, bool]]:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        with self._lock:
            while len(self._buffer) < n:
                self._buffer.extend(self._next_block())
            out, self._buffer = self._buffer[:n], self._buffer[n:]
            self.position += n
            return out

    def _next_block(self) -> list[tuple[Record, bool]]:
        b = self._block_no
        self._block_no += 1
        rng = np.random.default_rng([self.seed, b])
        index = np.arange(b * BLOCK, (b + 1) * BLOCK, dtype=np.int64)
        timestamps, late = self._timestamps(rng, index)
        keys, values = self._values(rng, index, timestamps)
        return [
            (Record(k, v, int(t)), bool(x))
            for k, v, t, x in zip(keys, values, timestamps.tolist(), late, strict=True)
        ]

    def _timestamps(self, rng: np.random.Generator, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """On-time: place in the sequence minus up to ``max_disorder``; late: more than ``max_disorder``
        behind the largest earlier timestamp."""
        n = len(index)
        disorder = self.max_disorder_ms
        true = self.start_ms + index * self.event_interval_ms
        on_time = np.maximum(true - (rng.integers(0, disorder + 1, n) if disorder else 0), 0)
        wants_late = rng.random(n) < self.late_fraction
        extra = rng.integers(0, self.late_by_ms + 1, n)
        # a lower bound of the largest timestamp before each record: the on-time records before it
        # (late ones stay below it; a record that cannot be late, early on, only raises the real maximum)
        counted = np.where(wants_late, -1, on_time)
        before = np.maximum.accumulate(np.concatenate([[self._carry_max], counted[:-1]]))
        late = wants_late & (before - disorder - 1 >= 0)
        late_ts = np.maximum(before - disorder - 1 - extra, 0)
        timestamps = np.where(late, late_ts, on_time).astype(np.int64)
        self._carry_max = int(max(self._carry_max, counted.max(initial=-1)))
        return timestamps, late

    def _values(self, rng: np.random.Generator, index: np.ndarray, timestamps: np.ndarray) -> Values:
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(seed={self.seed}, keys={self.keys}, "
            f"event_interval={self.event_interval_ms}ms, "
            f"max_disorder={self.max_disorder_ms}ms, late_fraction={self.late_fraction}, position={self.position})"
        )


class Clickstream(Generator):
    """Page views and clicks of ``keys`` users: key ``user-K``, value ``{user, page, action, ts}``."""

    name = "clicks"

    def _values(self, rng: np.random.Generator, index: np.ndarray, timestamps: np.ndarray) -> Values:
        n = len(index)
        users = rng.integers(0, self.keys, n)
        pages = rng.integers(0, len(PAGES), n)
        actions = rng.integers(0, len(ACTIONS), n)
        keys = [f"user-{u}" for u in users.tolist()]
        values = [
            {"user": k, "page": PAGES[p], "action": ACTIONS[a], "ts": t}
            for k, p, a, t in zip(keys, pages.tolist(), actions.tolist(), timestamps.tolist(), strict=True)
        ]
        return keys, values


class SensorReadings(Generator):
    """Readings of ``keys`` sensors: key ``sensor-K``, value ``{sensor, temperature, humidity, ts}``.

    Each sensor has its own base temperature (from the seed); readings add noise to it.
    """

    name = "sensors"

    def __init__(self, seed: int = 0, keys: int = 10, event_interval: Duration = "1s", **options: Any) -> None:
        super().__init__(seed, keys, event_interval, **options)
        base = np.random.default_rng([self.seed, 1 << 30])
        self.base_temperature = np.round(base.uniform(15.0, 30.0, self.keys), 1)

    def _values(self, rng: np.random.Generator, index: np.ndarray, timestamps: np.ndarray) -> Values:
        n = len(index)
        sensors = rng.integers(0, self.keys, n)
        temperature = np.round(self.base_temperature[sensors] + rng.normal(0.0, 1.5, n), 2)
        humidity = np.round(rng.uniform(20.0, 90.0, n), 1)
        keys = [f"sensor-{s}" for s in sensors.tolist()]
        values = [
            {"sensor": k, "temperature": c, "humidity": h, "ts": t}
            for k, c, h, t in zip(keys, temperature.tolist(), humidity.tolist(), timestamps.tolist(), strict=True)
        ]
        return keys, values


class SeedOrders(Generator):
    """Seed 000's orders: key = user, value ``{user, item, ts, quantity}``; ``users``/``items`` are tables.

    ``users`` and ``items`` come from ``kstream_nb.examples.seed_orders.generate`` (same seed, same
    tables); orders pick a user and an item (or ``item-unknown``, which no item row matches).
    """

    name = "orders"

    def __init__(
        self,
        seed: int = 0,
        users: int = 50,
        items: int = 30,
        event_interval: Duration = "10s",
        start: Duration = seed_orders.HOUR_MS,
        **options: Any,
    ) -> None:
        super().__init__(seed, users, event_interval, start=start, **options)
        tables = seed_orders.generate(seed, users=users, items=items, orders=0)
        self.users: pd.DataFrame = tables["users"]
        self.items: pd.DataFrame = tables["items"]
        self._user_names = self.users["key"].tolist()
        self._item_names = [*self.items["key"].tolist(), "item-unknown"]

    def tables(self) -> dict[str, pd.DataFrame]:
        """``{"users": ..., "items": ...}`` (what ``seed_orders.produce_inputs`` writes)."""
        return {"users": self.users, "items": self.items}

    def _values(self, rng: np.random.Generator, index: np.ndarray, timestamps: np.ndarray) -> Values:
        n = len(index)
        users = rng.integers(0, len(self._user_names), n)
        items = rng.integers(0, len(self._item_names), n)
        quantity = rng.integers(1, 5, n)
        keys = [self._user_names[u] for u in users.tolist()]
        values = [
            {"user": k, "item": self._item_names[i], "ts": t, "quantity": q}
            for k, i, t, q in zip(keys, items.tolist(), timestamps.tolist(), quantity.tolist(), strict=True)
        ]
        return keys, values


# ---- factories and plain helpers ----------------------------------------------------------------------


def clickstream(seed: int = 0, keys: int = 100, **options: Any) -> Clickstream:
    """A clickstream generator (see ``Generator`` for ``event_interval, max_disorder, late_fraction...``)."""
    return Clickstream(seed, keys, **options)


def sensor_readings(seed: int = 0, keys: int = 10, **options: Any) -> SensorReadings:
    """A sensor-readings generator (one reading per ``event_interval``, default 1 s)."""
    return SensorReadings(seed, keys, **options)


def orders(seed: int = 0, users: int = 50, items: int = 30, **options: Any) -> SeedOrders:
    """Seed 000's orders generator; its ``users``/``items`` tables are the seed example's."""
    return SeedOrders(seed, users, items, **options)


def generate_clicks(n: int, seed: int = 0, **options: Any) -> pd.DataFrame:
    """``n`` clicks as a DataFrame ``key, value, timestamp, late``."""
    return clickstream(seed, **options).frame(n)


def generate_sensor_readings(n: int, seed: int = 0, **options: Any) -> pd.DataFrame:
    """``n`` sensor readings as a DataFrame ``key, value, timestamp, late``."""
    return sensor_readings(seed, **options).frame(n)


def generate_orders(n: int, seed: int = 0, **options: Any) -> dict[str, pd.DataFrame]:
    """Seed 000's tables and ``n`` orders: ``{"users", "items", "orders"}``, shaped like
    ``seed_orders.generate`` (orders: ``key, item, ts, quantity, user``; ``seed_orders.expected_counts``
    takes it)."""
    gen = orders(seed, **options)
    frame = gen.frame(n)
    values = pd.DataFrame(frame["value"].tolist(), columns=["user", "item", "ts", "quantity"])
    order_df = pd.DataFrame(
        {
            "key": values["user"],
            "item": values["item"],
            "ts": values["ts"].astype(np.int64),
            "quantity": values["quantity"].astype(np.int64),
            "user": values["user"],
        }
    )
    return {"users": gen.users, "items": gen.items, "orders": order_df}


# ---- background producer ------------------------------------------------------------------------------

_HANDLES: weakref.WeakSet[BackgroundProducer] = weakref.WeakSet()


class BackgroundProducer:
    """A thread that writes a generator's records to a topic at a steady rate.

    ``produced`` counts records written so far. ``wait(timeout)`` blocks until the run ends by itself
    (``duration`` or ``max_records`` reached); ``stop()`` ends it early. Both join the thread and raise
    the thread's error, if it had one, in the caller's thread.
    """

    TICK_S = 0.02

    def __init__(
        self,
        topic: str,
        generator: Generator,
        bootstrap_servers: str,
        rate: float | None,
        duration: float | None,
        max_records: int | None,
        partitions: int,
        send: Callable[[list[Record]], Any] | None = None,
    ) -> None:
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be > 0 records/s (or None: as fast as possible), got {rate}")
        if duration is not None and duration < 0:
            raise ValueError(f"duration must be >= 0 seconds, got {duration}")
        if max_records is not None and max_records < 0:
            raise ValueError(f"max_records must be >= 0, got {max_records}")
        self.topic = topic
        self.generator = generator
        self.bootstrap_servers = bootstrap_servers
        self.rate = rate
        self.duration = duration
        self.max_records = max_records
        self.partitions = partitions
        self.produced = 0
        self.error: BaseException | None = None
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self._send = send or self._produce
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kstream-datagen-{topic}", daemon=True)

    def _produce(self, records: list[Record]) -> None:
        produce(self.topic, records, bootstrap_servers=self.bootstrap_servers, partitions=self.partitions)

    def start(self) -> BackgroundProducer:
        # create the topic before the thread starts, so consumers started right after see it
        produce(self.topic, [], bootstrap_servers=self.bootstrap_servers, partitions=self.partitions)
        self.started_at = time.monotonic()
        self._thread.start()
        _HANDLES.add(self)
        return self

    def _run(self) -> None:
        assert self.started_at is not None
        chunk_cap = 5_000 if self.rate is None else max(1, int(self.rate))  # at most ~1 s of records per send
        try:
            while not self._stop.is_set():
                elapsed = time.monotonic() - self.started_at
                if self.duration is not None and elapsed >= self.duration:
                    break
                remaining = None if self.max_records is None else self.max_records - self.produced
                if remaining is not None and remaining <= 0:
                    break
                due = chunk_cap if self.rate is None else int(self.rate * elapsed) - self.produced
                if remaining is not None:
                    due = min(due, remaining)
                due = min(due, chunk_cap)
                if due > 0:
                    self._send(self.generator.take(due))
                    self.produced += due
                if self.rate is not None:
                    self._stop.wait(self.TICK_S)
        except BaseException as e:  # kept for the caller's thread; never printed here
            self.error = e
        finally:
            self.finished_at = time.monotonic()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _join(self, timeout: float | None) -> None:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"datagen thread for {self.topic!r} did not finish within {timeout}s")
        if self.error is not None:
            error, self.error = self.error, None
            raise RuntimeError(f"datagen into {self.topic!r} failed after {self.produced} records") from error

    def wait(self, timeout: float | None = 60.0) -> int:
        """Blocks until the run ends by itself (duration or max_records); returns ``produced``."""
        if self.duration is None and self.max_records is None and self._thread.is_alive():
            raise ValueError("this run has no duration and no max_records: it ends only with stop()")
        self._join(timeout)
        return self.produced

    def stop(self, timeout: float | None = 10.0) -> int:
        """Stops producing and joins the thread; returns ``produced``."""
        self._stop.set()
        if self._thread.ident is not None:
            self._join(timeout)
        return self.produced

    def __enter__(self) -> BackgroundProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        rate = "max" if self.rate is None else f"{self.rate:g}/s"
        return (
            f"<BackgroundProducer {self.generator.name} -> {self.topic!r} {state}, "
            f"{self.produced} records, {rate}>"
        )


def run_in_background(
    topic: str,
    generator: Generator,
    bootstrap_servers: str = "memory://",
    rate: float | None = 1_000.0,
    duration: float | None = None,
    max_records: int | None = None,
    partitions: int = 1,
) -> BackgroundProducer:
    """Starts producing ``generator``'s records into ``topic`` (created with ``partitions`` if missing) at
    ``rate`` records per second (``None``: as fast as possible), until ``duration`` seconds have passed,
    ``max_records`` were written, or ``stop()`` is called. Returns the running handle."""
    return BackgroundProducer(topic, generator, bootstrap_servers, rate, duration, max_records, partitions).start()


def stop_all(timeout: float = 5.0) -> None:
    """Stops every background producer of this process (also at interpreter exit)."""
    for handle in list(_HANDLES):
        with contextlib.suppress(Exception):  # best effort at shutdown
            handle.stop(timeout)


atexit.register(stop_all)

__all__ = [
    "BackgroundProducer",
    "Clickstream",
    "Generator",
    "SeedOrders",
    "SensorReadings",
    "clickstream",
    "generate_clicks",
    "generate_orders",
    "generate_sensor_readings",
    "orders",
    "run_in_background",
    "sensor_readings",
    "stop_all",
]
