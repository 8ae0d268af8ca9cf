"""The conformance cases (tests/conformance) on a real broker give the test driver's expected results.

Every applicable case runs in ONE KafkaStreams app on Kafka (one group join): each case is an independent
sub-graph of one topology, with its topic and store names suffixed by a per-case tag. The inputs are
produced in lock-step rounds (record i of every case, then wait until the app is idle), so each record is
processed completely, repartition topics included, before the case's next one: the order the test driver
gives, even across a case's input topics. The harness's Capture processors run in the app's process and
are checked with the harness's ``check`` after each step, as on the driver; ``table_state`` is read from
the app's stores, and dropped records per case from the tasks of its sub-topologies.

Timestamp 0: librdkafka replaces a record timestamp of 0 with the current time (a timestamp left out by
the Java test is 0 in the harness). A case with such an input runs with every timestamp shifted by
``SHIFT_MS`` (a whole number of days, so a multiple of every window size and advance), its expected
timestamps and window bounds shifted alike; ``test_time_shift_is_neutral_on_the_test_driver`` checks on
the driver that the shifted case still passes, so a failure here is the broker path's. The cases of
``HEADER_TIMESTAMP`` depend on time 0 itself (no hopping window starts before 0; a sliding record at
t < d gets the clamped window [0, d]), so shifting changes their results
(``test_header_timestamp_cases_do_depend_on_time_zero``): their inputs carry the case's timestamp in a
header that their sources' timestamp extractor reads (none of them writes to a repartition topic, where
the app's own producer would put the current time on a timestamp of 0).

Cases that do not apply on a live broker are listed in ``NOT_APPLICABLE`` with the reason; there are none
at present. No case uses wall-clock punctuation, and the lock-step rounds remove the dependence on how the
broker interleaves a case's input topics.
The other restrictions of a live broker do not bite here: no case uses wall-clock punctuation, and the
lock-step rounds remove the dependence on how the broker interleaves a case's input topics.
"""

from __future__ import annotations

import copy
import os
import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

import kstream_nb as ks
from kstream_nb.cluster import connect
from kstream_nb.cluster.base import TopicSpec
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.state import VersionedRecord
from tests.conformance.harness import CaseGraph, check, run_case
from tests.conformance.test_conformance import CASES
from tests.kafka_broker import FAST_CLIENT_CONFIG

pytestmark = pytest.mark.kafka

#: 20,000 days: a multiple of every window size, advance and gap of the cases (and of an hour and a day)
SHIFT_MS = 86_400_000 * 20_000

#: the header the case's timestamp travels in for the HEADER_TIMESTAMP cases
TIMESTAMP_HEADER = "ksnb-conformance-timestamp"
_ORIGIN = "hopping/sliding windows clamped at time 0 and an input at timestamp 0: a shift changes the results"
HEADER_TIMESTAMP: dict[str, str] = {
    "hopping-aggregate-out-of-order-within-grace": _ORIGIN,
    "hopping-emit-on-window-close-per-operator-stream-time": _ORIGIN,
    "sliding-aggregate-early-records": _ORIGIN,
    "hopping-partial-drop-after-grace": _ORIGIN,
    "hopping-partial-drop-after-grace-emit-on-window-close": _ORIGIN,
    "hopping-emit-on-window-close-interval-zero": _ORIGIN,
    "hopping-emit-on-window-update-interval-zero": _ORIGIN,
}
#: case id -> why it cannot run on a live broker
NOT_APPLICABLE: dict[str, str] = {}
APPLICABLE = [c for c in CASES if c["id"] not in NOT_APPLICABLE]


def inputs_of(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [record for step in case["steps"] for record in step["input"]]


def needs_shift(case: dict[str, Any]) -> bool:
    """A case with an input at timestamp 0 (or none given, which the harness pipes at 0)."""
    return any(not record.get("timestamp_ms") for record in inputs_of(case))


def shifted(case: dict[str, Any], by: int = SHIFT_MS) -> dict[str, Any]:
    """The case with every input timestamp, expected timestamp and window bound moved ``by`` ms later."""
    moved = copy.deepcopy(case)
    for step in moved["steps"]:
        for record in step["input"]:
            record["timestamp_ms"] = (record.get("timestamp_ms") or 0) + by
        for expectation in step.get("expect", {}).values():
            for record in expectation.get("records", []):
                for field in ("timestamp_ms", "window_start_ms", "window_end_ms"):
                    if record.get(field) is not None:
                        record[field] += by
    return moved


def as_run(case: dict[str, Any]) -> dict[str, Any]:
    """The case as it runs on the broker (shifted when it has an input at timestamp 0, unless it is one of
    the HEADER_TIMESTAMP cases)."""
    return shifted(case) if needs_shift(case) and case["id"] not in HEADER_TIMESTAMP else case


def header_timestamp(record: ks.Record) -> int:
    """The case's timestamp of a HEADER_TIMESTAMP case's input, from its header."""
    return int(dict(record.headers)[TIMESTAMP_HEADER])


def test_the_cases_that_do_not_apply_are_the_listed_ones() -> None:
    """A new case is either run on the broker or listed with its reason: none is skipped silently."""
    ids = {c["id"] for c in CASES}
    for listed in (NOT_APPLICABLE, HEADER_TIMESTAMP):
        assert set(listed) <= ids, f"listed but unknown: {sorted(set(listed) - ids)}"
    assert {c["id"] for c in APPLICABLE} == ids - set(NOT_APPLICABLE)
    if "KSNB_CONFORMANCE_DIRS" not in os.environ:
        assert len(CASES) == 78, "cases added or removed: check they run here, or list them in NOT_APPLICABLE"


@pytest.mark.parametrize(
    "case", [c for c in APPLICABLE if needs_shift(c) and c["id"] not in HEADER_TIMESTAMP], ids=lambda c: c["id"]
)
def test_time_shift_is_neutral_on_the_test_driver(case: dict[str, Any]) -> None:
    """The shifted case passes on the driver: moving its timestamps does not change what it checks."""
    run_case(shifted(case))


@pytest.mark.parametrize("case", [c for c in CASES if c["id"] in HEADER_TIMESTAMP], ids=lambda c: c["id"])
def test_header_timestamp_cases_do_depend_on_time_zero(case: dict[str, Any]) -> None:
    """The cases that carry their timestamps in a header do fail when shifted (so the reason given holds)."""
    assert needs_shift(case)
    with pytest.raises(AssertionError):
        run_case(shifted(case))


class BrokerCase:
    """One case inside the shared app: its sub-graph, inputs, step checks and drop accounting."""

    def __init__(self, case: dict[str, Any], builder: ks.StreamsBuilder, tag: str) -> None:
        self.case = as_run(case)
        self.id = case["id"]
        self.header_timestamps = case["id"] in HEADER_TIMESTAMP
        before, repartitions = set(builder.topology.node_specs), set(builder.topology.repartition_topics)
        self.graph = CaseGraph(
            self.case,
            builder,
            rename=lambda name: f"{name}-{tag}",
            timestamp_extractor=header_timestamp if self.header_timestamps else None,
        )
        self.nodes = set(builder.topology.node_specs) - before
        # a repartition topic would carry the broker's timestamps, not the header's
        assert not self.header_timestamps or set(builder.topology.repartition_topics) == repartitions, self.id
        self.captured = self.graph.captured
        self.stores = self.graph.stores
        self.topics = self.graph.input_topics()
        self.inputs = inputs_of(self.case)
        self.checkpoints: dict[int, list[dict[str, Any]]] = defaultdict(list)
        count = 0
        for step in self.case["steps"]:
            count += len(step["input"])
            self.checkpoints[count].append(step.get("expect", {}))
        self.history: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.dropped_inputs: list[int] = []
        self.dropped_total = 0
        self.failure: str | None = None
        self.app: ks.KafkaStreams | None = None

    def tasks(self) -> list[Any]:
        assert self.app is not None
        return [t for th in self.app.threads for t in th.tasks.values() if self.nodes & set(t.subtopology.nodes)]

    def dropped(self) -> int:
        return sum(t.dropped_total for t in self.tasks())

    def table_entry(self, store: str, key: Any) -> Any:
        """The ``ValueAndTimestamp`` of ``key`` in the app's store; the public view must agree on the value."""
        assert self.app is not None
        found = [t.stores[store].store.get(key) for t in self.tasks() if store in t.stores]
        assert len(found) == 1, f"store {store!r} in {len(found)} tasks"
        entry = found[0]
        public = self.app.store(store).get(key)
        if isinstance(public, VersionedRecord):  # a versioned store's query answers the version
            assert (public.value, public.timestamp) == (entry.value, entry.timestamp)
            return entry
        assert public == (None if entry is None else entry.value)
        return entry

    def after_input(self, index: int, dropped_before: int) -> None:
        """Accounts input ``index`` (processed) and runs the checks of a step that ends with it."""
        now = self.dropped()
        if now > dropped_before:
            self.dropped_inputs.append(index)
        self.dropped_total = now
        self.run_checks(index + 1)

    def run_checks(self, count: int) -> None:
        if self.failure is not None:
            return
        try:
            for expect in self.checkpoints.get(count, []):
                for node, expectation in expect.items():
                    check(self, node, expectation, self.history)
            if count == len(self.inputs):
                metrics = self.case.get("expect_metrics") or {}
                if "dropped_records_total" in metrics:
                    assert self.dropped_total == metrics["dropped_records_total"], f"dropped {self.dropped_total}"
                if "expect_dropped_inputs" in self.case:
                    assert self.dropped_inputs == self.case["expect_dropped_inputs"], (
                        f"dropped inputs {self.dropped_inputs}"
                    )
        except AssertionError as e:
            self.failure = f"after {count} input(s): {e}"


@pytest.fixture
def conformance_app(kafka_bootstrap: str) -> Iterator[tuple[ks.KafkaStreams, list[BrokerCase]]]:
    """Every applicable case in one app on the broker (its topics created, the app running)."""
    suffix = uuid.uuid4().hex[:6]
    builder = ks.StreamsBuilder()
    cases = [BrokerCase(case, builder, f"c{i}-{suffix}") for i, case in enumerate(APPLICABLE)]
    topics = {t for c in cases for t in [*c.topics.values(), *c.graph.output_topics()]}
    connect(kafka_bootstrap).admin().create_topics([TopicSpec(t, 1) for t in sorted(topics)])
    app = ks.KafkaStreams(
        builder.build(),
        application_id=f"conformance-{suffix}",
        bootstrap_servers=kafka_bootstrap,
        commit_interval_ms=100,
        poll_ms=10,
        statestore_cache_max_bytes=0,
        client_config=FAST_CLIENT_CONFIG,
    )
    for c in cases:
        c.app = app
    try:
        app.start().wait_until_running(60)
        yield app, cases
    finally:
        app.stop(timeout=15)


def test_conformance_cases_on_the_broker(conformance_app: tuple[ks.KafkaStreams, list[BrokerCase]]) -> None:
    """Record i of every case per round, each round processed fully, each case's steps checked as it ends."""
    app, cases = conformance_app
    cluster = connect(app.config.bootstrap_servers)
    producer = cluster.producer()
    key_serde, value_serde = serde_from("string_or_json"), serde_from("json")
    for c in cases:
        c.run_checks(0)
    for index in range(max(len(c.inputs) for c in cases)):
        active = [c for c in cases if index < len(c.inputs)]
        dropped_before = {c.id: c.dropped() for c in active}
        for c in active:
            record = c.inputs[index]
            topic = c.topics[record["topic"]]
            producer.send(
                topic,
                key_serde.serialize(topic, record["key"]),
                value_serde.serialize(topic, record["value"]),
                record["timestamp_ms"],
                ((TIMESTAMP_HEADER, str(record["timestamp_ms"]).encode()),) if c.header_timestamps else (),
                partition=0,
            )
        producer.flush()
        app.wait_until_idle(60)
        for c in active:
            c.after_input(index, dropped_before[c.id])
    producer.close()
    failures = {c.id: c.failure for c in cases if c.failure}
    assert not failures, "\n".join(f"{cid}: {why}" for cid, why in failures.items())
