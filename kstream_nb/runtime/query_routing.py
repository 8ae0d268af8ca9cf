"""``app.store(name, scope="all")``: a store view that answers any key from any instance of the application.

Each key goes to the instance running its task as active (``query_metadata``): this one answers from its own
stores, another one through its ``application_server`` (``query_server``). With ``stale=True`` a standby copy
answers when the active instance does not (down, unreachable, restoring): its value may lag. Scans (``all``,
``range``, window ``all``) ask each instance for the tasks it runs and merge the pages. Every HTTP call has a
timeout; when nobody can answer, the error names the store, key, partition, task and each host tried.
"""

from __future__ import annotations

import html
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import orjson
import pandas as pd

from kstream_nb.errors import InvalidStateStoreError
from kstream_nb.runtime.query_metadata import HostInfo, Instance, instances, key_task, store_serdes
from kstream_nb.runtime.query_server import b64, is_window_store, local_view, unb64
from kstream_nb.runtime.task_id import TaskId
from kstream_nb.state.store import KeyValue, sort_entries
from kstream_nb.topology.naming import changelog_topic

if TYPE_CHECKING:
    from kstream_nb.runtime.app import KafkaStreams

# no proxy from the environment: instances talk to each other directly
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class QueryFailed(Exception):
    """One instance did not answer (unreachable, timed out, 401, 503 ...); the message says which and why."""


def http_get(host: HostInfo, path: str, params: dict[str, Any], token: str | None, timeout: float) -> Any:
    """GET ``http://host/path?params`` and its JSON body; raises ``QueryFailed`` naming the host and reason."""
    url = f"http://{host}{path}?{urlencode(params)}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return orjson.loads(response.read())
    except urllib.error.HTTPError as e:
        try:
            reason = orjson.loads(e.read()).get("error", e.reason)
        except (orjson.JSONDecodeError, AttributeError, OSError):
            reason = e.reason
        raise QueryFailed(f"{host} answered {e.code}: {reason}") from e
    except (urllib.error.URLError, OSError) as e:  # refused, reset, timed out
        raise QueryFailed(f"{host} did not answer within {timeout}s: {getattr(e, 'reason', e)}") from e


class RemoteStore:
    """The all-instances view of one store (see the module docstring). Key-value stores: ``get``, ``range``,
    ``all``, ``to_pandas``; window and session stores: ``fetch``, ``all``, ``to_pandas``."""

    def __init__(self, app: KafkaStreams, name: str, stale: bool = False, timeout: float = 10.0) -> None:
        self.app = app
        self.name = name
        self.stale = stale
        self.timeout = timeout
        self.key_serde, self.value_serde = store_serdes(app, name)  # an unknown store fails here, naming the known
        if getattr(app.topology.store_builders.get(name), "versioned", False):
            raise InvalidStateStoreError(
                f"store {name!r} is a versioned store: scope='all' answers key-value, window and session stores; "
                "query it with scope='local' on each instance"
            )
        self._topic = changelog_topic(app.application_id, name)
        self.window = is_window_store(app, name)
        #: entries per page of a scan (``all``, ``range``) from another instance
        self.page_size = 1000

    # ---- routing -------------------------------------------------------------------------------

    def _ask(
        self, task_ids: list[str], what: str, local: Callable[[bool], Any], remote: Callable[[HostInfo, bool], Any]
    ) -> Any:
        """``local(stale)`` when this instance runs the tasks as active, else ``remote(host, stale)`` at their
        active host; then, with ``stale``, the standby holders. Raises naming every host tried and why."""
        everyone = instances(self.app)
        me = self.app.process_id
        active = [i for i in everyone.values() if set(task_ids) <= set(i.active)]
        tried: list[str] = []
        candidates: list[tuple[Instance, bool]] = [(i, False) for i in active]
        if self.stale:
            candidates += [(i, True) for i in everyone.values() if set(task_ids) <= i.standby]
        candidates.sort(key=lambda c: (c[1], c[0].process_id != me))  # active first; this instance first
        for inst, standby in candidates:
            try:
                if inst.process_id == me:
                    return local(standby)
                if inst.endpoint is None:
                    raise QueryFailed(f"instance {inst.process_id} has no application_server")
                return remote(inst.host_info, standby)
            except (QueryFailed, InvalidStateStoreError) as e:
                tried.append(f"{'standby' if standby else 'active'} {inst.host_info}: {e}")
        if not active:
            tried.insert(0, "no instance runs it as active now (rebalancing, or its instance left)")
        if not self.stale:
            tried.append("stale=True would also ask standby copies")
        raise InvalidStateStoreError(f"store {self.name!r}: nobody answered for {what}: " + "; ".join(tried))

    def _path(self, op: str) -> str:
        return f"/v1/stores/{quote(self.name, safe='')}/{op}"

    def _remote(self, op: str, params: dict[str, Any]) -> Callable[[HostInfo, bool], Any]:
        token = self.app.config.application_server_token

        def call(host: HostInfo, stale: bool) -> Any:
            return http_get(host, self._path(op), {**params, "stale": str(stale).lower()}, token, self.timeout)

        return call

    def _key(self, key: Any) -> tuple[str, str]:
        _, partition, task = key_task(self.app, self.name, key)
        return f"key {key!r} (partition {partition}, task {task})", task

    def _decode(self, text: str | None) -> Any:
        return None if text is None else self.value_serde.deserialize(self._topic, unb64(text, "value"))

    def _decode_key(self, text: str) -> Any:
        return self.key_serde.deserialize(self._topic, unb64(text, "key"))

    # ---- point queries -------------------------------------------------------------------------

    def get(self, key: Any) -> Any:
        """The value of ``key`` (None when absent), from the instance running its task."""
        if self.window:
            raise TypeError(f"store {self.name!r} is a window store: use fetch(key, time_from, time_to)")
        what, task = self._key(key)
        params = {"key": b64(self.key_serde.serialize(self._topic, key))}
        remote = self._remote("get", params)
        return self._ask(
            [task], what, lambda stale: local_view(self.app, self.name, [task], stale).get(key),
            lambda host, stale: self._decode(remote(host, stale)["value"]),
        )  # fmt: skip

    def fetch(self, key: Any, time_from: int = 0, time_to: int | None = None) -> list[tuple[int, int, Any]]:
        """(start, end, value) of ``key``'s windows starting in [time_from, time_to] (window stores)."""
        if not self.window:
            raise TypeError(f"store {self.name!r} is a key-value store: use get(key)")
        what, task = self._key(key)
        params: dict[str, Any] = {"key": b64(self.key_serde.serialize(self._topic, key)), "from_ms": time_from}
        if time_to is not None:
            params["to_ms"] = time_to
        remote = self._remote("fetch", params)

        def over_http(host: HostInfo, stale: bool) -> list[tuple[int, int, Any]]:
            return [(s, e, self._decode(v)) for s, e, v in remote(host, stale)["windows"]]

        def here(stale: bool) -> list[tuple[int, int, Any]]:
            return list(local_view(self.app, self.name, [task], stale).fetch(key, time_from, time_to))

        return list(self._ask([task], what, here, over_http))

    # ---- scans ---------------------------------------------------------------------------------

    def _task_groups(self) -> list[list[str]]:
        """The store's task ids grouped by the instance running them as active (unheld ones one by one)."""
        sub = self.app.topology.subtopology_of_store(self.name)
        counts = [self.app.admin.partition_count(self.app.assignor.resolve(t)) for t in sub.source_topics]
        tasks = [str(TaskId(sub.id, p)) for p in range(max((n or 0 for n in counts), default=0))]
        if not tasks:
            raise InvalidStateStoreError(
                f"store {self.name!r}: its source topics do not exist yet (start the app)"
            )
        holders = {tid: pid for pid, inst in instances(self.app).items() for tid in inst.active}
        groups: dict[str, list[str]] = {}
        for tid in tasks:
            groups.setdefault(holders.get(tid, f"none:{tid}"), []).append(tid)
        return list(groups.values())

    def _scan(self, op: str, params: dict[str, Any], local: Callable[[Any], list[Any]]) -> list[Any]:
        """Rows of every task (``local(view)`` here, the pages of ``op`` elsewhere), decoded. With ``stale``, a
        group of tasks that its active instance cannot answer for is asked for task by task (standbys differ)."""
        rows: list[Any] = []
        for group in self._task_groups():
            try:
                rows.extend(self._scan_tasks(op, params, local, group))
            except InvalidStateStoreError:
                if not self.stale or len(group) == 1:
                    raise
                for task in group:
                    rows.extend(self._scan_tasks(op, params, local, [task]))
        return rows

    def _scan_tasks(
        self, op: str, params: dict[str, Any], local: Callable[[Any], list[Any]], tasks: list[str]
    ) -> list[Any]:
        def pages(host: HostInfo, stale: bool) -> list[Any]:
            out: list[Any] = []
            cursor = None
            while True:
                extra: dict[str, Any] = {} if cursor is None else {"after": cursor}
                query = {**params, "tasks": ",".join(tasks), "limit": self.page_size, **extra}
                body = self._remote(op, query)(host, stale)
                out.extend(self._row(e) for e in body["entries"])
                cursor = body["next"]
                if cursor is None:
                    return out

        def here(stale: bool) -> list[Any]:
            return local(local_view(self.app, self.name, tasks, stale))

        return list(self._ask(tasks, f"tasks {','.join(tasks)}", here, pages))

    def _row(self, entry: list[Any]) -> Any:
        if self.window:
            key, start, end, value = entry
            return (self._decode_key(key), start, end, self._decode(value))
        return KeyValue(self._decode_key(entry[0]), self._decode(entry[1]))

    def all(self) -> list[Any]:
        """Every entry of every instance: ``KeyValue``s by key (key-value stores), or (key, start, end, value)."""
        if self.window:
            rows = sort_entries([KeyValue(r[0], r[1:]) for r in self._scan("all", {}, lambda v: list(v.all()))])
            return [(e.key, *e.value) for e in rows]
        return sort_entries(self._scan("all", {}, lambda v: [KeyValue(*kv) for kv in v.all()]))

    def range(self, from_key: Any = None, to_key: Any = None) -> list[KeyValue]:
        """Entries with ``from_key <= key <= to_key`` (None: open end) of every instance, by key."""
        if self.window:
            raise TypeError(f"store {self.name!r} is a window store: use fetch() or all()")
        params = {
            p: b64(self.key_serde.serialize(self._topic, k))
            for p, k in (("from", from_key), ("to", to_key))
            if k is not None
        }
        return sort_entries(
            self._scan("range", params, lambda v: [KeyValue(*kv) for kv in v.range(from_key, to_key)])
        )

    def to_pandas(self) -> pd.DataFrame:
        if self.window:
            return pd.DataFrame(self.all(), columns=["key", "start", "end", "value"])
        return pd.DataFrame([(kv.key, kv.value) for kv in self.all()], columns=["key", "value"])

    def __repr__(self) -> str:
        return f"<store {self.name!r} across all instances (stale={self.stale})>"

    def _repr_html_(self) -> str:
        return f"<p>store <code>{html.escape(self.name)}</code> across all instances</p>" + self.to_pandas().head(
            20
        ).to_html(index=False)
