"""KTable/aggregation changelogs hold the plain value, with the result timestamp on the record (as Kafka)."""

import uuid

import kstream_nb as ks


def word_count() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("words").group_by_key().count(store="counts")
    return b.build()


def test_changelog_records_carry_plain_values_and_result_timestamps():
    with ks.TopologyTestDriver(word_count(), {"application_id": "wc"}) as d:
        words = d.create_input_topic("words")
        words.pipe_input("a", "x", timestamp=10)
        words.pipe_input("a", "x", timestamp=5)  # older: the result keeps timestamp 10
        words.pipe_input("b", "x", timestamp=7)
        changelog = d.create_output_topic("wc-counts-changelog").read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in changelog] == [("a", 1, 10), ("a", 2, 10), ("b", 1, 7)]


def test_restore_keeps_values_and_timestamps():
    """Both updates of "a" fall between two commits: the changelog gets its latest only (what compaction
    would keep), with the result timestamp, and the restored store is the same."""
    url = f"memory://tsc-{uuid.uuid4().hex[:8]}"
    ks.produce("words", [("a", "x"), ("a", "x"), ("b", "x")], bootstrap_servers=url, timestamps=[10, 5, 7])
    first = ks.KafkaStreams(word_count(), "wc", url).start()
    first.wait_until_running().wait_until_idle()
    assert first.stop()
    second = ks.KafkaStreams(word_count(), "wc", url).start()
    try:
        second.wait_until_running().wait_until_idle()
        assert dict(second.store("counts").all()) == {"a": 2, "b": 1}
        assert second.metrics()["restored-records-total"] == 2
        log = ks.read_topic("wc-counts-changelog", bootstrap_servers=url)
        assert sorted(zip(log["key"], log["value"], log["timestamp"])) == [("a", 2, 10), ("b", 1, 7)]
    finally:
        assert second.stop()
