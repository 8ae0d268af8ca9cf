"""Restart: a new app with the same application id resumes from committed offsets and restored stores."""

from __future__ import annotations

import time
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
    assert dict(zip(changelog["key"], changelog["value"])) == {"x": b"3", "y": b"1"}  # the latest per key last


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


def _poisoned_count(poison: list[bool]) -> ks.Topology:
    """Counts keys; fails the thread on the value "boom" while ``poison[0]`` is set."""

    def check(value: str) -> str:
        if poison[0] and value == "boom":
            raise ValueError("poisoned record")
        return value

    b = ks.StreamsBuilder()
    b.stream("words").map_values(check).group_by_key().count(store="counts")
    return b.build()


def test_exactly_once_wipes_persistent_stores_after_an_unclean_stop(url, make_app, tmp_path):
    """Under exactly_once_v2 the checkpoint exists only after a clean close; after a failure the RocksDB
    store may hold writes of the aborted transaction, so it is wiped and restored from the changelog."""
    settings = {
        "processing_guarantee": "exactly_once_v2",
        "default_dsl_store": "rocksdb",
        "state_dir": str(tmp_path),
    }
    poison = [True]
    ks.produce("words", [("a", "x"), ("b", "x")], bootstrap_servers=url, partitions=1)
    first = make_app(_poisoned_count(poison), application_id="eos-wipe", **settings).start()
    first.wait_until_running().wait_until_idle()
    assert first.stop(10) is True
    checkpoint = tmp_path / "eos-wipe" / "0_0" / ".checkpoint"
    assert checkpoint.exists(), "a clean close under exactly-once writes the checkpoint"

    # "fresh" is counted into RocksDB, then "boom" fails the thread: the transaction is aborted
    ks.produce("words", [("fresh", "x"), ("b", "x"), ("bad", "boom")], bootstrap_servers=url, partitions=1)
    # one transaction for the whole batch: no commit before the poisoned record
    second = make_app(
        _poisoned_count(poison), application_id="eos-wipe", **{**settings, "commit_interval_ms": 60_000}
    )
    second.start()
    deadline = time.monotonic() + 10
    while second.state != ks.State.ERROR and time.monotonic() < deadline:
        time.sleep(0.02)
    assert second.state == ks.State.ERROR
    assert not checkpoint.exists(), "no checkpoint is left while running, nor after a failure"
    second.stop(10)

    poison[0] = False
    third = make_app(_poisoned_count(poison), application_id="eos-wipe", **settings).start()
    third.wait_until_running().wait_until_idle()
    # without the wipe "fresh" would count 2 (the aborted write left in RocksDB, then the reprocessing)
    assert dict(third.store("counts").all()) == {"a": 1, "b": 2, "fresh": 1, "bad": 1}
    assert third.metrics()["restored-records-total"] == 2  # the committed changelog: a and b


def test_restore_progress_in_metrics_and_a_progress_bar(url, make_app, capfd):
    """A restarted app restores its in-memory store from the changelog: progress in offsets per task in
    app.metrics(), and a text progress bar while wait_until_running waits (progress=True)."""
    words = [f"w{i % 500}" for i in range(3000)]
    ks.produce("sentences", [" ".join(words[i : i + 10]) for i in range(0, len(words), 10)], bootstrap_servers=url)
    first = _run(make_app, application_id="progress")
    first.stop(10)
    capfd.readouterr()
    second = make_app(word_count_topology(), application_id="progress").start()
    second.wait_until_running(progress=True)
    bar = capfd.readouterr().err
    changelog_records = len(ks.read_topic("progress-counts-changelog", bootstrap_servers=url))
    assert "progress: restoring stores" in bar
    assert f"{changelog_records}/{changelog_records}" in bar
    progress = second.metrics()["restore-progress"]
    assert sum(done for done, _ in progress.values()) == changelog_records
    assert all(done == total for done, total in progress.values())
