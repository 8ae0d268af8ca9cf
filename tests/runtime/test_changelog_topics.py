"""Changelog topic configs, as Kafka Streams creates them: key-value stores compacted; window and session
stores compacted and deleted after the store's retention plus ``windowstore_changelog_additional_retention_ms``
(their old windows are never written again, so compaction alone would keep them for ever)."""

from __future__ import annotations

import pytest

import kstream_nb as ks
from kstream_nb.cluster.connection import connect
from kstream_nb.processor.api import Processor

DAY_MS = 86_400_000


class _Noop(Processor):
    def process(self, record: ks.Record) -> None:
        pass


def _topology() -> ks.Topology:
    b = ks.StreamsBuilder()
    events = b.stream("events")
    grouped = events.group_by_key()
    grouped.windowed_by(ks.TimeWindows.of(10_000).grace(5_000)).count(store="tumbling")
    grouped.windowed_by(ks.SessionWindows.with_gap(1_000)).count(store="sessions")
    grouped.count(store="totals")
    own = ks.Stores.window_store_builder(ks.Stores.in_memory_window_store("own", 60_000, 10_000))
    events.process(_Noop, stores=[own.with_logging_enabled({"retention.ms": "123", "segment.ms": "1000"})])
    return b.build()


def _changelog_configs(url: str, make_app, **config) -> dict[str, dict[str, str]]:
    ks.produce("events", [("a", 1)], bootstrap_servers=url, partitions=2)
    app = make_app(_topology(), application_id="logs", **config)
    app.start()
    app.wait_until_running().wait_until_idle()
    admin = connect(url).admin()
    prefix, suffix = "logs-", "-changelog"
    return {
        topic[len(prefix) : -len(suffix)]: admin.describe_topic(topic).config
        for topic in admin.list_topics()
        if topic.startswith(prefix) and topic.endswith(suffix)
    }


def test_windowed_changelogs_are_compacted_and_deleted_a_day_after_the_stores_retention(url, make_app) -> None:
    configs = _changelog_configs(url, make_app)
    assert configs["totals"] == {"cleanup.policy": "compact"}
    # the DSL's window store keeps size + grace (15 s) and one 60 s segment; the session store gap + its segment
    assert configs["tumbling"] == {"cleanup.policy": "compact,delete", "retention.ms": str(75_000 + DAY_MS)}
    assert configs["sessions"] == {"cleanup.policy": "compact,delete", "retention.ms": str(61_000 + DAY_MS)}
    # a store's own topic configs win over the defaults
    assert configs["own"] == {"cleanup.policy": "compact,delete", "retention.ms": "123", "segment.ms": "1000"}


def test_the_additional_retention_is_a_setting(url, make_app) -> None:
    configs = _changelog_configs(url, make_app, windowstore_changelog_additional_retention_ms="1h")
    assert configs["tumbling"]["retention.ms"] == str(75_000 + 3_600_000)
    with pytest.raises(ValueError, match="windowstore_changelog_additional_retention_ms must not be negative"):
        ks.KafkaStreams(_topology(), application_id="x", bootstrap_servers=url,
                        windowstore_changelog_additional_retention_ms=-1)  # fmt: skip
