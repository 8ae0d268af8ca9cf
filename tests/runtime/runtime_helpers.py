"""Helpers shared by the runtime tests (polling with a deadline, word count topology, topic views)."""

from __future__ import annotations

from typing import Any

import kstream_nb as ks


def word_count_topology(store: str = "counts") -> ks.Topology:
    b = ks.StreamsBuilder()
    (
        b.stream("sentences")
        .flat_map_values(str.split)
        .group_by(lambda k, w: w)
        .count(store=store)
        .to_stream()
        .to("word-counts")
    )
    return b.build()


def expected_counts(sentences: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for sentence in sentences:
        for word in sentence.split():
            counts[word] = counts.get(word, 0) + 1
    return counts


def latest_per_key(url: str, topic: str) -> dict[Any, Any]:
    """The last value of each key in ``topic`` (the final count per word of a count's output)."""
    frame = ks.read_topic(topic, bootstrap_servers=url)
    frame = frame.sort_values(["partition", "offset"])
    return dict(zip(frame["key"], frame["value"]))


def store_dict(app: ks.KafkaStreams, store: str = "counts") -> dict[Any, Any]:
    frame = app.store(store).to_pandas()
    return dict(zip(frame["key"], frame["value"]))
