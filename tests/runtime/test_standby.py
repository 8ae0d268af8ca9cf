"""Standby replicas: warm copies of a task's stores on another instance; failover restores nothing."""

import time
import uuid
from collections import Counter
from typing import Any

import kstream_nb as ks
from kstream_nb.cluster.base import Subscription
from kstream_nb.runtime.assignor import StreamsPartitionAssignor, TaskInfo


def topology() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("words").group_by_key().count(store="counts")
    return b.build()


def wait_for(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def last_values(frame: Any) -> dict[Any, Any]:
    return dict(zip(frame["key"], frame["value"], strict=True))


def standbys_caught_up(app: ks.KafkaStreams) -> bool:
    """``app`` keeps standby copies, each at the end offsets of its changelog partitions."""
    copies = [sb for thread in app.threads for sb in dict(thread.standbys).values()]
    ends = app.admin.end_offsets([tp for sb in copies for tp in sb.changelogs])
    return bool(copies) and all(sb.positions.get(tp, 0) >= ends[tp] for sb in copies for tp in sb.changelogs)


def test_standby_is_on_the_other_instance_and_failover_is_warm() -> None:
    url = f"memory://standby-{uuid.uuid4().hex[:8]}"
    words = [(w, 1) for w in ["a", "b", "c", "d", "a", "b", "a", "e", "f", "a"]]
    ks.produce("words", words, bootstrap_servers=url, partitions=2)
    settings = {"num_standby_replicas": 1, "commit_interval_ms": 50}
    first = ks.KafkaStreams(topology(), "sb", url, client_id="first", **settings).start()
    second = ks.KafkaStreams(topology(), "sb", url, client_id="second", **settings).start()
    try:
        for app in (first, second):
            app.wait_until_running().wait_until_idle()
        wait_for(lambda: all(app.assignment() and any(app.assignment().values()) for app in (first, second)))
        active = {tid for app in (first, second) for tasks in app.assignment().values() for tid in tasks}
        assert active == {"0_0", "0_1"}
        for app, other in ((first, second), (second, first)):
            mine = {tid for tasks in app.assignment().values() for tid in tasks}
            warm = {tid for tasks in other.standby_assignment().values() for tid in tasks}
            assert mine <= warm  # each active task has its standby on the other instance

        counted = dict(Counter(w for w, _ in words))
        # every count is in the changelog (it gets them at a commit after idle), and the copies the failover
        # uses, those on the second instance, have applied it to the end
        wait_for(lambda: last_values(ks.read_topic("sb-counts-changelog", bootstrap_servers=url)) == counted)
        # (a sum of applied records over both instances could count a copy the assignment moved twice)
        wait_for(lambda: standbys_caught_up(second))

        restored_before = second.metrics()["restored-records-total"]
        assert first.stop()  # the first instance goes away: its tasks move to the warm standby
        second.wait_until_running()
        wait_for(lambda: len(second.metrics()["lag"]) == 2)
        second.wait_until_idle()
        assert second.metrics()["restored-records-total"] == restored_before  # nothing replayed: it was warm
        ks.produce("words", [("a", 1), ("z", 1)], bootstrap_servers=url)
        second.wait_until_idle()
        expected = Counter(w for w, _ in words) + Counter(["a", "z"])
        assert dict(second.store("counts").all()) == dict(expected)
    finally:
        first.stop()
        second.stop()


def test_standbys_never_share_an_instance_with_their_active_task() -> None:
    b = ks.StreamsBuilder()
    b.stream("words").group_by_key().count(store="counts")
    assignor = StreamsPartitionAssignor(b.build(), "app", admin=None, num_standby_replicas=2)  # type: ignore[arg-type]
    tasks = [TaskInfo(f"0_{p}", 0, p, ()) for p in range(3)]
    subs = {
        "a1": Subscription(frozenset(), {"process_id": "A"}),
        "a2": Subscription(frozenset(), {"process_id": "A"}),
        "b1": Subscription(frozenset(), {"process_id": "B"}),
        "c1": Subscription(frozenset(), {"process_id": "C"}),
    }
    owners = {"0_0": "a1", "0_1": "b1", "0_2": "c1"}
    standbys = assignor.standby_assignment(tasks, owners, subs)
    process = {m: s.userdata["process_id"] for m, s in subs.items()}
    for task in tasks:
        holders = [m for m, ids in standbys.items() if task.task_id in ids]
        assert len(holders) == 2
        instances = {process[m] for m in holders} | {process[owners[task.task_id]]}
        assert len(instances) == 3  # two copies, each on an instance other than the active one
