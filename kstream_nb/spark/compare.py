"""``ks.compare(result, live)``: where a backtest and a live run disagree, key by key and window by window.

``live`` is a ``KafkaStreams`` app or the name of an output topic. For an app, every store the backtest and
the app both have is compared: a running app answers through its stores (``app.store(name)``, this
instance's tasks); a stopped one has its stores rebuilt from their changelog topics, task by task, by the
runtime's own restore (what a restarted instance would hold). For a topic, the latest value per key (per
window, for windowed keys) of the backtest's output and of the topic on the cluster are compared, in
offset order per partition; a tombstone (null value) removes its key, as a table reading the topic does.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import pandas as pd

from kstream_nb.cluster.windowed_serdes import Windowed
from kstream_nb.errors import StreamsError
from kstream_nb.runtime.app import KafkaStreams, State
from kstream_nb.spark.result import BacktestResult
from kstream_nb.state.store import KeyValue, sort_entries

#: the columns of what ``compare`` returns: where the entry lives ("store 'x'" or "topic 'y'"), its key
#: (and window bounds in epoch ms, None for plain keys), both values (None when a side has no entry) and
#: "differs", "backtest only" or "live only"
COLUMNS = ["where", "key", "window_start", "window_end", "backtest", "live", "status"]

Entries = dict[tuple[str, int | None, int | None], tuple[Any, Any]]


def compare(
    result: BacktestResult,
    live: Any,
    bootstrap_servers: str | None = None,
    stores: Iterable[str] | None = None,
    client_config: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """The keys/windows whose final values differ between ``result`` and ``live`` (empty when they agree).

    ``live``: a ``KafkaStreams`` app (running or stopped; ``stores`` picks stores, default all the
    backtest and the app share) or an output topic's name, read from ``bootstrap_servers``.
    """
    if not isinstance(result, BacktestResult):
        raise TypeError(f"compare needs a backtest result (ks.backtest(...)), got {type(result).__name__}")
    if isinstance(live, str):
        return _compare_topic(result, live, bootstrap_servers, client_config)
    if isinstance(live, KafkaStreams):
        return _compare_app(result, live, stores)
    raise TypeError(
        "compare(result, live): live must be a KafkaStreams app or an output topic name, "
        f"got {type(live).__name__}"
    )


def _compare_topic(
    result: BacktestResult, topic: str, bootstrap_servers: str | None, client_config: Mapping[str, Any] | None
) -> pd.DataFrame:
    from kstream_nb.cluster.topic_io import read_topic

    output = result.outputs.get(topic)
    if output is None:
        raise StreamsError(f"the backtest wrote no output topic {topic!r} (its outputs: {sorted(result.outputs)})")
    if bootstrap_servers is None:
        raise StreamsError(
            f"compare(result, {topic!r}) needs bootstrap_servers: the cluster holding the live topic"
        )
    theirs = read_topic(
        topic, bootstrap_servers=bootstrap_servers, key_serde=output.key_serde, value_serde=output.value_serde,
        client_config=client_config,
    )  # fmt: skip
    return _diff(f"topic {topic!r}", _latest(output.to_pandas()), _latest(theirs))


def _compare_app(result: BacktestResult, app: KafkaStreams, stores: Iterable[str] | None) -> pd.DataFrame:
    shared = sorted(set(result.stores) & set(app.topology.store_builders))
    names = shared if stores is None else list(stores)
    for name in names:
        if name not in shared:
            raise StreamsError(
                f"store {name!r} is not in both the backtest and the app (stores they share: {shared})"
            )
    if app.state in (State.RUNNING, State.REBALANCING):
        live = {name: app.store(name).to_pandas() for name in names}
    elif app.state is State.CREATED:
        raise StreamsError("the app has not run (call start() first): it has no stores to compare")
    else:
        live = restored_stores(app, names)
    frames = [_diff(f"store {n!r}", _entries(result.stores[n].to_pandas()), _entries(live[n])) for n in names]
    return pd.concat(frames, ignore_index=True) if frames else _diff("", {}, {})


def restored_stores(app: KafkaStreams, names: list[str]) -> dict[str, pd.DataFrame]:
    """Stores ``names`` of a stopped app as ``app.store(name).to_pandas()`` showed them: every task of their
    sub-topologies gets fresh stores restored from the changelog topics (``restore_task``), then read."""
    from kstream_nb.cluster.connection import connect
    from kstream_nb.runtime.restore import restore_task
    from kstream_nb.runtime.store_provider import composite_view
    from kstream_nb.runtime.task import StreamTask, stream_thread_cache
    from kstream_nb.runtime.task_id import TaskId
    from kstream_nb.topology.naming import changelog_topic

    topology, config = app.topology, app.config
    cluster = connect(config.bootstrap_servers, config.client_config)
    admin = cluster.admin()
    found: dict[str, list[Any]] = {name: [] for name in names}
    tasks: list[StreamTask] = []
    state_dir = tempfile.mkdtemp(prefix="kstream-nb-compare-")
    local_config = dataclasses.replace(config, state_dir=state_dir)
    try:
        for sub in topology.subtopologies():
            mine = [n for n in names if n in sub.stores]
            if not mine:
                continue
            topic = changelog_topic(config.application_id, mine[0])
            count = admin.partition_count(topic)
            if count is None:
                raise StreamsError(
                    f"cannot read store {mine[0]!r} of the stopped app: its changelog topic {topic!r} does not "
                    f"exist on {config.bootstrap_servers} (logging disabled? then compare while the app runs)"
                )
            for partition in range(count):
                task = StreamTask(
                    str(TaskId(sub.id, partition)), sub, partition, topology, local_config, _Discard(), lambda: -1,
                    cache=stream_thread_cache(local_config),
                )  # fmt: skip
                tasks.append(task)
                consumer = cluster.consumer(None)
                try:
                    restore_task(task, consumer, admin)
                finally:
                    consumer.close()
                for name in mine:
                    found[name].append(task.stores[name].store)
        return {
            name: composite_view(topology, name, functools.partial(list, found[name])).to_pandas()
            for name in names
        }
    finally:
        for task in tasks:
            task.close()


class _Discard:
    """A task's record collector that drops what it is sent (restoring writes nothing)."""

    copies_on_send = True

    def send(self, *args: Any) -> None:
        return None

    def send_columnar(self, *args: Any) -> None:
        return None

    def partition_count(self, topic: str) -> int:
        return 1


def _identity(key: Any) -> str:
    """A key as canonical JSON text: equal keys (dicts in any field order too) compare equal."""
    return orjson.dumps(key, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr).decode()


def _entries(frame: pd.DataFrame) -> Entries:
    """A store's ``to_pandas()`` (key, value; window stores key, start, end, value) by key and window."""
    windowed = "start" in frame.columns
    out: Entries = {}
    for row in frame.to_dict("records"):
        start = int(row["start"]) if windowed else None
        end = int(row["end"]) if windowed else None
        out[(_identity(row["key"]), start, end)] = (row["key"], row["value"])
    return out


def _latest(frame: pd.DataFrame) -> Entries:
    """A topic's records (``read_topic``'s frame) as a table: the latest value per key (and window) in
    offset order per partition; a null value deletes its key."""
    out: Entries = {}
    for row in frame.sort_values(["partition", "offset"], kind="stable").itertuples(index=False):
        key, start, end = row.key, None, None
        if isinstance(key, Windowed):  # a windowed aggregation's key: the key and its window
            key, start, end = key.key, int(key.start), int(key.end)
        ident = (_identity(key), start, end)
        if row.value is None:
            out.pop(ident, None)
        else:
            out[ident] = (key, row.value)
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # values whose == is not a bool (arrays)
        return _identity(a) == _identity(b)


def _diff(where: str, ours: Entries, theirs: Entries) -> pd.DataFrame:
    """The entries that differ, by key (a store's order: natural, else by JSON text), then window."""
    found: list[KeyValue] = []
    for ident in sorted(set(ours) | set(theirs), key=lambda i: (i[1] or 0, i[2] or 0)):
        mine, other = ours.get(ident), theirs.get(ident)
        if mine is not None and other is not None and _same(mine[1], other[1]):
            continue
        key = (mine or other)[0]  # type: ignore[index]
        status = "differs" if mine is not None and other is not None else "backtest only" if mine else "live only"
        row = (where, key, ident[1], ident[2], mine[1] if mine else None, other[1] if other else None, status)
        found.append(KeyValue(key, row))
    rows = [kv.value for kv in sort_entries(found)]
    columns = list(zip(*rows)) if rows else [()] * len(COLUMNS)
    return pd.DataFrame(
        {
            name: pd.Series(list(values), dtype="Int64" if name.startswith("window") else object)
            for name, values in zip(COLUMNS, columns)
        }
    )
