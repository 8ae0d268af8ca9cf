"""``ks.compare``: a backtest against a live app (running, then stopped) and against its output topic.

The live app runs the same topology over the same records, then one more record arrives live only: the
comparison must name exactly the key and the window it changed, with both values as a pandas recount
gives them, and nothing else; before that record, every comparison is empty.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

import kstream_nb as ks
from kstream_nb.spark.compare import COLUMNS

MINUTE = 60_000
BASE = 1_700_000_040_000  # a minute boundary


def build() -> ks.Topology:
    b = ks.StreamsBuilder()
    grouped = b.stream("events").group_by_key()
    grouped.agg(total=("amount", "sum"), store="totals").to_stream().to("totals")
    grouped.windowed_by(ks.TimeWindows.of_size_and_grace(MINUTE, 10 * MINUTE)).count(store="per-minute")
    return b.build()


def history() -> pd.DataFrame:
    rows = [(f"user-{i % 4}", {"amount": i}, BASE + i * 7_000) for i in range(40)]
    return pd.DataFrame(rows, columns=["key", "value", "timestamp"])


def test_compare_with_app_and_topic(spark: Any, url: str) -> None:
    events = history()
    records = [ks.Record(k, v, ts) for k, v, ts in events.itertuples(index=False)]
    ks.produce("events", records, bootstrap_servers=url, partitions=2)
    ks.produce("totals", [], bootstrap_servers=url, partitions=2)
    settings = {"statestore_cache_max_bytes": 0}
    result = ks.backtest(build(), spark, bootstrap_servers=url, **settings)
    app = ks.KafkaStreams(build(), application_id="compare-live", bootstrap_servers=url, **settings)
    app.start()
    try:
        app.wait_until_idle(timeout=60)
        same = ks.compare(result, app)
        assert list(same.columns) == COLUMNS and same.empty
        assert ks.compare(result, "totals", bootstrap_servers=url).empty

        late = BASE + 40 * 7_000 + MINUTE  # a new minute for user-1, seen live only
        ks.produce("events", [ks.Record("user-1", {"amount": 1000}, late)], bootstrap_servers=url)
        app.wait_until_idle(timeout=60)
        before = int(events.loc[events["key"] == "user-1", "value"].map(lambda v: v["amount"]).sum())
        window = late - late % MINUTE
        expected = pd.DataFrame(
            [
                ("store 'per-minute'", "user-1", window, window + MINUTE, None, 1, "live only"),
                ("store 'totals'", "user-1", None, None, {"total": before}, {"total": before + 1000}, "differs"),
                # the aggregation's running state (a store of its own) holds the same sum
                (
                    "store 'totals-agg-state'",
                    "user-1",
                    None,
                    None,
                    {"total": before},
                    {"total": before + 1000},
                    "differs",
                ),
            ],
            columns=COLUMNS,
        ).astype({"window_start": "Int64", "window_end": "Int64"})
        running = ks.compare(result, app)
        _assert_rows(running, expected)
        on_topic = ks.compare(result, "totals", bootstrap_servers=url)
        _assert_rows(on_topic, expected.iloc[[1]].assign(where="topic 'totals'"))
    finally:
        app.stop()
    stopped = ks.compare(result, app)  # the stores rebuilt from their changelogs
    _assert_rows(stopped, expected)


def _assert_rows(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    def rows(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
        return [tuple(None if v is None or v is pd.NA else v for v in r) for r in frame.itertuples(index=False)]

    assert rows(got) == rows(expected.reset_index(drop=True))
