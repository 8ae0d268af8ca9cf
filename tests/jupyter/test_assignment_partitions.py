"""Every task of the group shows its partitions, also the tasks another instance runs (issue 24: notebook 04's
``%kstream assignment word-count`` listed the second instance's tasks with partitions ``[]``)."""

from __future__ import annotations

from IPython.core.interactiveshell import InteractiveShell

import kstream_nb as ks

from .conftest import wait_for


def word_count() -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream("sentences").flat_map_values(str.split).group_by(lambda k, w: w).count(store="counts")
    return b.build()


def test_both_instances_tasks_show_their_partitions(shell: InteractiveShell, url: str, make_app) -> None:
    ks.produce("sentences", ["a b", "c d e"], bootstrap_servers=url, partitions=4)
    topology = word_count()
    first = make_app(topology, application_id="word-count")
    second = make_app(topology, application_id="word-count")
    first.start()
    first.wait_until_running()
    second.start()

    def both_have_tasks() -> bool:
        return (
            second.state is ks.State.RUNNING
            and len({g["instance"] for g in first.group_assignment().values()}) == 2
            and all(first.assignment().values())
            and all(second.assignment().values())
        )

    wait_for(both_have_tasks, what="both instances running with tasks")
    # Kafka's tasks: sub-topology 0 reads "sentences", sub-topology 1 the repartition topic (named after the
    # application id); task s_p reads partition p
    sources = {0: "sentences", 1: "word-count-counts-repartition"}
    want = {f"{s}_{p}": [f"{sources[s]}-{p}"] for s in (0, 1) for p in range(4)}
    for app in (first, second):
        assert {task: info["partitions"] for task, info in app.group_assignment().items()} == want
    owned = {task: parts for app in (first, second) for tasks in app.assignment().values() for task, parts in
             tasks.items()}  # fmt: skip
    assert owned == want  # each instance's own view agrees

    frame = shell.run_line_magic("kstream", "assignment word-count")
    assert dict(zip(frame["task"], frame["partitions"], strict=True)) == want
    assert set(frame["instance"]) == {first.process_id, second.process_id}
