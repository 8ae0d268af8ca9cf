"""Restart: a new app with the same application id resumes from committed offsets and restored stores."""

from __future__ import annotations

from collections import Counter

from runtime_helpers import expected_counts, latest_per_key, store_dict, word_count_topology

import kstream_nb as ks
from kstream_nb.cluster.connection import connect


def _run(make_app, application_id: str = "restart", **config) -> ks.KafkaStreams:
    app = make_app(word_count_topology(), application_id=application_id, num_stream_threads=2, **config)
    app.start()
    app.wait_until_running().wait_until_idle()
    return app


def test_new_app_resumes_from_committed_offsets_and_restored_counts(url, make_app):
    first_batch = ["a b a", "c a", "b b d"]
    second_batch = ["a d", "e a b"]
    ks.produce("sentences", first_batch, bootstrap_servers=url, partitions=3)

    app = _run(make_app)
    assert store_dict(app) == expected_counts(first_batch)
    assert app.stop(10) is True
    out_before = ks.read_topic("word-counts", bootstrap_servers=url)
    words_first = sum(len(s.split()) for s in first_batch)
    assert len(out_before) == words_first

    ks.produce("sentences", second_batch, bootstrap_servers=url, partitions=3)
    app2 = _run(make_app)
    everything = first_batch + second_batch
    assert store_dict(app2) == expected_counts(everything)

    out = ks.read_topic("word-counts", bootstrap_servers=url)
    # a clean stop committed everything: the second app processed only the new sentences, once each
    assert len(out) == words_first + sum(len(s.split()) for s in second_batch)
    assert latest_per_key(url, "word-counts") == expected_counts(everything)
    # no (word, count) update was emitted twice
    updates = Counter(zip(out["key"], out["value"]))
    assert max(updates.values()) == 1
    # the counts continued from the restored values: e.g. "a" went 1, 2, 3 (first app) then 4, 5
    a_updates = out[out["key"] == "a"].sort_values("offset")["value"].tolist()
    assert a_updates == [1, 2, 3, 4, 5]

    metrics = app2.metrics()
    assert metrics["restored-records-total"] >= len(expected_counts(first_batch))
    assert metrics["process-total"] == len(second_batch) + sum(len(s.split()) for s in second_batch)


def test_changelog_topic_is_compacted_and_holds_the_counts(url, make_app):
    ks.produce("sentences", ["x y x", "x"], bootstrap_servers=url, partitions=2)
    app = _run(make_app, application_id="clog")
    app.stop(10)
    admin = connect(url).admin()
    topic = "clog-counts-changelog"
    assert topic in admin.list_topics()
    description = admin.describe_topic(topic)
    assert description.config.get("cleanup.policy") == "compact"
    assert description.partitions == 2
    changelog = ks.read_topic(topic, bootstrap_servers=url, value_serde="bytes")
    assert set(changelog["key"]) == {"x", "y"}
    assert len(changelog) == 4  # one change per counted word


def test_restart_with_nothing_new_reprocesses_nothing(url, make_app):
    ks.produce("sentences", ["p q", "q"], bootstrap_servers=url, partitions=2)
    app = _run(make_app, application_id="idle-restart")
    app.stop(10)
    before = len(ks.read_topic("word-counts", bootstrap_servers=url))

    app2 = _run(make_app, application_id="idle-restart")
    assert store_dict(app2) == {"p": 1, "q": 2}
    assert app2.metrics()["process-total"] == 0
    assert all(lag == 0 for lag in app2.lag().values())
    app2.stop(10)
    assert len(ks.read_topic("word-counts", bootstrap_servers=url)) == before
