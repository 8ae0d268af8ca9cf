"""Issue 25 item 5 (visible): the group-wide assignment shows standby and warm-up tasks with their lag and the
task the last rebalance moved, in ``group_assignment()``, the ``AssignmentView`` and ``%kstream assignment``.
Expected lags come from the changelog topic itself (its end offsets when an instance stopped and now)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

import kstream_nb as ks
from kstream_nb.jupyter.widgets import AssignmentView

from .conftest import wait_for


def counts() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("words").group_by_key().count(store="counts")
    return b.build()


def changelog_ends(app_id: str, url: str) -> Counter[int]:
    """Records per partition of the counts changelog (its end offsets: memory:// compacts nothing)."""
    return Counter(ks.read_topic(f"{app_id}-counts-changelog", bootstrap_servers=url)["partition"])


def chips(view: AssignmentView, kind: str) -> list[str]:
    """The rendered ``kind`` chips ("standby" / "warmup") as their text."""
    html = view.html.value
    return [part.split(">", 1)[1].split("<", 1)[0] for part in html.split(f'class="ks-chip ks-{kind}"')[1:]]


def test_a_fresh_standby_shows_the_whole_changelog_as_its_lag(
    shell: InteractiveShell, make_app: Any, url: str, tmp_path: Path
) -> None:
    """A counts 100 records on one partition; B joins with num_standby_replicas=1 and no state: B keeps the
    standby of task 0_0 and lags by the whole changelog (100 records, one update per record), A by 0."""
    ks.produce("words", [(f"k{i}", 1) for i in range(100)], bootstrap_servers=url, partitions=1)
    settings: dict[str, Any] = {"num_standby_replicas": 1}
    first = make_app(counts(), "fresh", state_dir=str(tmp_path / "a"), **settings)
    first.start().wait_until_running().wait_until_idle()
    # (the changelog gets the counts at A's next commit, which idle does not wait for)
    wait_for(lambda: changelog_ends("fresh", url)[0] == 100, what="A's counts in the changelog")
    end = 100
    second = make_app(counts(), "fresh", state_dir=str(tmp_path / "b"), **settings).start()
    a, b = first.process_id, second.process_id
    entry = wait_for(lambda: second.group_assignment().get("0_0", {}).get("standby") == [b] and
                     second.group_assignment()["0_0"], what="B keeps the standby of 0_0")  # fmt: skip
    assert entry["instance"] == a and entry["lags"] == {a: 0, b: end} and entry["moved"] is None

    view = AssignmentView(second, autostart=False)
    view.refresh(force=True)
    assert view.replicas == {(b, "fresh-StreamThread-1"): [("0_0", "standby", end)]}
    assert chips(view, "standby") == [f"0_0 standby lag {end}"]
    frame = shell.run_line_magic("kstream", "assignment fresh")
    rows = {(r.instance, r.task, r.role): r.lag for r in frame.itertuples()}
    assert rows == {(a, "0_0", "active"): 0, (b, "0_0", "standby"): end}


def test_a_restarted_instance_warms_up_by_the_delta_and_the_move_of_its_leave_is_highlighted(
    shell: InteractiveShell, make_app: Any, url: str, tmp_path: Path
) -> None:
    """RocksDB (checkpoints), acceptable_recovery_lag 5, 2 partitions: A and B run one task each. B stops: the
    group moves B's task to A (``moved`` B -> A, highlighted). 200 more records arrive. B restarts on its state
    dir: its checkpoint holds M records of its old task's changelog, which now ends at N; A, caught up on both
    tasks, keeps them, and B gets a warm-up of its old task (the smallest lag) with lag N - M."""
    ks.produce("words", [], bootstrap_servers=url, partitions=2)
    settings: dict[str, Any] = {"default_dsl_store": "rocksdb", "acceptable_recovery_lag": 5}
    first = make_app(counts(), "wu", state_dir=str(tmp_path / "a"), **settings)
    second = make_app(counts(), "wu", state_dir=str(tmp_path / "b"), **settings)
    first.start().wait_until_running()
    second.start()

    def one_each() -> bool:
        return Counter(e["instance"] for e in first.group_assignment().values()) == {
            first.process_id: 1,
            second.process_id: 1,
        }

    wait_for(one_each, what="one task on each instance")
    ks.produce("words", [(f"k{i}", 1) for i in range(100)], bootstrap_servers=url)
    for app in (first, second):
        app.wait_until_running().wait_until_idle()
    a, b = first.process_id, second.process_id
    (old,) = [tid for tasks in second.assignment().values() for tid in tasks]
    partition = int(old.split("_")[1])
    assert second.stop()
    at_stop = changelog_ends("wu", url)[partition]  # M: what B's checkpoint holds
    moved = wait_for(lambda: first.group_assignment().get(old, {}).get("moved"), what=f"{old} moved to A")
    assert moved == {"from": b, "to": a}
    view = AssignmentView(first, autostart=False)
    view.refresh(force=True)
    assert view.moved() == {old} and view.last_moves == {old: {"from": b, "to": a}}
    assert f'data-task="{old}" title="moved from {b} to {a}"' in view.html.value
    assert f"moved in the last assignment: {old} {b} -&gt; {a}" in view.html.value

    ks.produce("words", [(f"k{i}", 1) for i in range(200)], bootstrap_servers=url)
    inputs = Counter(ks.read_topic("words", bootstrap_servers=url)["partition"])  # one update per record
    wait_for(lambda: changelog_ends("wu", url) == inputs, what="A counted every record")
    now = changelog_ends("wu", url)[partition]  # N
    assert now - at_stop > 5  # more than acceptable_recovery_lag: a warm-up, not a move

    second = make_app(counts(), "wu", state_dir=str(tmp_path / "b"), **settings).start()
    b = second.process_id
    entry = wait_for(lambda: first.group_assignment().get(old, {}).get("warmup") == [b] and
                     first.group_assignment()[old], what=f"B warms up {old}")  # fmt: skip
    assert entry["instance"] == a and entry["lags"] == {a: 0, b: now - at_stop}
    assert {e["instance"] for e in first.group_assignment().values()} == {a}  # A keeps both actives
    view.refresh(force=True)
    assert view.replicas == {(b, "?"): [(old, "warmup", now - at_stop)]}
    assert chips(view, "warmup") == [f"{old} warmup lag {now - at_stop}"]
    frame = shell.run_line_magic("kstream", "assignment wu")
    warm = frame[frame["role"] == "warmup"]
    assert list(zip(warm["instance"], warm["task"], warm["lag"], strict=True)) == [(b, old, now - at_stop)]


def test_a_joining_instance_takes_only_its_share_and_the_moves_say_so(make_app: Any, url: str) -> None:
    """A runs the 4 tasks of a count; B and then C join (one thread each): 4 tasks over 3 instances are 2 + 1 + 1,
    so C's join moves exactly one task, from the instance that had 2 of them to C; ``moved`` names that
    move and nothing else."""
    ks.produce("words", [(f"k{i}", 1) for i in range(40)], bootstrap_servers=url, partitions=4)
    apps = [make_app(counts(), "sticky") for _ in range(3)]
    apps[0].start().wait_until_running()

    def owners() -> dict[str, str]:
        return {t: e["instance"] for t, e in apps[0].group_assignment().items()}

    apps[1].start()
    wait_for(lambda: len(set(owners().values())) == 2, what="A and B run tasks")
    before = owners()
    apps[2].start()
    c = apps[2].process_id
    wait_for(lambda: c in owners().values(), what="C runs a task")
    after = owners()
    (task,) = [t for t in after if after[t] != before[t]]
    assert after[task] == c and Counter(after.values()) == Counter({before[task]: 1, c: 1} | {
        p: 2 for p in set(before.values()) - {before[task]}})  # fmt: skip
    moves = {t: e["moved"] for t, e in apps[0].group_assignment().items() if e["moved"]}
    assert moves == {task: {"from": before[task], "to": c}}
