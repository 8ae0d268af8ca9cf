"""The kernel side of the JupyterLab "Streams" panel: the ``kstream_nb.panel`` comm target.

``register_comm_target(get_ipython())`` (called by ``%load_ext kstream_nb``; ``%load_ext
kstream_nb.jupyter.comm`` does only this) lets the panel of the ``kstream-nb`` JupyterLab extension open
a comm to the kernel and ask about the apps of this process. It reads only the runtime's public surface
(``running_apps()``, ``KafkaStreams.state/metrics()/assignment()/group_assignment()/stop()``,
``Topology.describe()``, the cluster admin, ``read_topic``).

Protocol, version 1
-------------------

Every message is a JSON object. The panel sends requests on the comm; the kernel answers each one with
exactly one reply on the same comm::

    request  {"v": 1, "id": ID, "op": OP, ...arguments}
    reply    {"v": 1, "id": ID, "op": OP, "ok": true, ...result}
    error    {"v": 1, "id": ID, "op": OP, "ok": false, "error": "what was wrong"}

``ID`` is any string or number chosen by the panel (echoed back; ``null`` when the request had none).
A request that is not an object, has another ``v``, lacks ``op`` or names an unknown op, has bad
arguments, or whose handling fails, gets an error reply; nothing is ever raised into the kernel.
Apps are named by ``key`` (``app_key(app)``: unique per ``KafkaStreams`` object) because two apps of
one process may share an ``application_id``, and a restarted app keeps its predecessor's process id.

``hello``
    -> ``{"protocol": 1, "version": "<kstream_nb version>", "ops": [...]}``
``list_apps``
    -> ``{"apps": [APP, ...], "time": <epoch seconds>}`` where APP is ``{"key", "name", "state",
    "records_per_s", "processed", "lag", "tasks", "threads", "bootstrap", "error"}`` (``lag`` is the sum
    over input partitions). Lists every app in ``running_apps()`` and every stopped/created one that
    something still references (the notebook's variables, the ``%%kstream`` registry, or an earlier
    answer of this protocol while the object lives).
``stop`` ``{"app": KEY, "timeout": seconds (default 10, at most 60)}``
    -> ``{"app": APP, "stopped": bool}`` (false if the threads did not end within the timeout).
``restart`` ``{"app": KEY, "timeout": ...}``
    stops the app, then starts a new ``KafkaStreams`` with the same topology, application id and
    settings (``app.config``) -> ``{"app": APP of the new app, "replaced": KEY}``. Variables that held
    the old object keep the old (stopped) one.
``app_detail`` ``{"app": KEY}``
    -> ``{"app": APP, "topology": Topology.describe().to_dict(), "assignment": {thread: {task:
    [partition, ...]}}, "group_assignment": {task: {"thread", "instance"}}, "lag": {partition: n},
    "metrics": {...}}``
``topics`` ``{"app": KEY}`` or ``{"bootstrap": URL}`` (default ``memory://``)
    -> ``{"bootstrap": URL, "topics": [{"name", "partitions", "beginning_offsets", "end_offsets",
    "records", "internal"}]}``
``topic_tail`` ``{"topic": NAME, "n": count (default 20, 1..500), "app": KEY or "bootstrap": URL}``
    -> ``{"topic": NAME, "records": [{"partition", "offset", "timestamp", "key", "value", "key_format",
    "value_format", "headers"}]}``: the last ``n`` records of each partition, newest ``n`` overall, oldest
    first. Keys and values are decoded by the ``auto`` serde (``AutoSerde``, with the app's or the cluster's
    Schema Registry), which names their format (``json``, ``string``, ``long``, ``avro``, ``bytes``...);
    bytes no rule decodes are sent as a ``0x…`` hex preview, other values that are not JSON as their ``repr``.
``topic_profile`` ``{"topic": NAME, "sample": records per partition (default 1000, 1..100000), "sampling":
"last" or "spread", "app": KEY or "bootstrap": URL}``
    -> ``{"topic": NAME, "bootstrap": URL, "profile": PROFILE}``: ``ks.profile_topic``'s answer as JSON
    (``profile_payload``): totals, ``partitions``, ``key_formats``/``value_formats`` as ``[format, count]``
    pairs (most frequent first), ``columns``, ``distinct_keys`` of the sample and the newest ``records``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import kstream_nb
from kstream_nb.cluster.auto_serde import AutoSerde, RawBytes, hex_preview
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.profile import DEFAULT_SAMPLE, TopicProfile, profile_topic
from kstream_nb.cluster.schema_registry import registry_configs
from kstream_nb.cluster.topic_io import read_topic
from kstream_nb.runtime.app import KafkaStreams, State, running_apps
from kstream_nb.topology.naming import is_internal_topic

log = logging.getLogger("kstream_nb.comm")

TARGET_NAME = "kstream_nb.panel"
PROTOCOL_VERSION = 1
DEFAULT_STOP_TIMEOUT_S = 10.0
MAX_STOP_TIMEOUT_S = 60.0
DEFAULT_TAIL = 20
MAX_TAIL = 500
MAX_TEXT = 2000  # longest key/value text sent to the panel
MAX_PROFILE_SAMPLE = 100_000  # records per partition a profile request may sample

_AUTO = AutoSerde()  # no registry: for header values and bytes inside decoded values
_SEEN: weakref.WeakValueDictionary[str, KafkaStreams] = weakref.WeakValueDictionary()
_SEEN_LOCK = threading.Lock()


class ProtocolError(Exception):
    """A request the protocol cannot answer; its message goes back to the panel as the error."""


# ---- registration ----------------------------------------------------------------------------------------


def register_comm_target(ipython: Any) -> bool:
    """Registers the ``kstream_nb.panel`` comm target on ``ipython``'s kernel; False when there is no
    kernel (a terminal IPython) or no comm manager. Calling it again is harmless."""
    manager = _comm_manager(ipython)
    if manager is None:
        return False
    shell = ipython

    def open_comm(comm: Any, open_msg: Any) -> None:
        handler = PanelHandler(shell)

        def on_msg(msg: Any) -> None:
            try:
                data = msg.get("content", {}).get("data") if isinstance(msg, dict) else None
                comm.send(handler.handle(data))
            except Exception:  # never into the kernel
                log.exception("kstream_nb panel: could not answer a comm message")

        comm.on_msg(on_msg)

    manager.register_target(TARGET_NAME, open_comm)
    return True


def unregister_comm_target(ipython: Any) -> None:
    manager = _comm_manager(ipython)
    if manager is not None:
        with contextlib.suppress(Exception):
            manager.unregister_target(TARGET_NAME, None)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext kstream_nb.jupyter.comm``: only the panel's comm target (no magics)."""
    register_comm_target(ipython)


def _comm_manager(ipython: Any) -> Any:
    kernel = getattr(ipython, "kernel", None)
    if kernel is None:
        return None
    manager = getattr(kernel, "comm_manager", None)
    if manager is None:
        try:
            from comm import get_comm_manager

            manager = get_comm_manager()
        except Exception:
            return None
    return manager


# ---- the handler -------------------------------------------------------------------------------------------


class PanelHandler:
    """Answers protocol requests (a plain object, so tests drive it without a kernel)."""

    OPS = ("hello", "list_apps", "stop", "restart", "app_detail", "topics", "topic_tail", "topic_profile")

    def __init__(self, shell: Any = None) -> None:
        self.shell = shell

    def handle(self, request: Any) -> dict[str, Any]:
        """The reply to ``request`` (a decoded JSON value); always JSON-serializable, never raises."""
        rid: Any = None
        op: Any = None
        try:
            if not isinstance(request, dict):
                raise ProtocolError(f"a request must be a JSON object, got {type(request).__name__}")
            rid = request.get("id")
            if rid is not None and not isinstance(rid, (str, int, float)):
                rid = None
                raise ProtocolError("'id' must be a string or a number")
            op = request.get("op")
            if request.get("v") != PROTOCOL_VERSION:
                raise ProtocolError(
                    f"unsupported protocol version {request.get('v')!r}; this kernel speaks v{PROTOCOL_VERSION}"
                )
            if not isinstance(op, str) or op not in self.OPS:
                raise ProtocolError(f"unknown op {op!r}; known ops: {', '.join(self.OPS)}")
            result = getattr(self, f"_op_{op}")(request)
            reply = {"v": PROTOCOL_VERSION, "id": rid, "op": op, "ok": True, **result}
            json.dumps(reply, allow_nan=False)  # fail here (as an error reply), not inside comm.send
            return reply
        except Exception as e:
            message = str(e) if isinstance(e, ProtocolError) else f"{type(e).__name__}: {e}"
            return {
                "v": PROTOCOL_VERSION,
                "id": rid,
                "op": op if isinstance(op, str) else None,
                "ok": False,
                "error": message,
            }

    # ---- apps ----

    def apps(self) -> list[KafkaStreams]:
        """Every app to show: running ones, and stopped/created ones that something still references."""
        found: dict[int, KafkaStreams] = {}
        for app in self._referenced():
            found.setdefault(id(app), app)
        with _SEEN_LOCK:
            for app in list(_SEEN.values()):
                found.setdefault(id(app), app)
            for app in found.values():
                _SEEN[app_key(app)] = app
        return sorted(found.values(), key=lambda a: (a.application_id, app_key(a)))

    def _referenced(self) -> Iterable[KafkaStreams]:
        yield from running_apps()
        try:
            from kstream_nb.jupyter.magics import managed_apps

            yield from managed_apps().values()
        except Exception:
            pass
        ns = getattr(self.shell, "user_ns", None)
        if isinstance(ns, dict):
            for name, value in list(ns.items()):
                if isinstance(value, KafkaStreams) and not name.startswith("_"):
                    yield value

    def find(self, request: dict[str, Any]) -> KafkaStreams:
        key = request.get("app")
        if not isinstance(key, str) or not key:
            raise ProtocolError("'app' must be an app key (from list_apps)")
        for app in self.apps():
            if app_key(app) == key:
                return app
        raise ProtocolError(f"no app with key {key!r} in this kernel (was it garbage-collected?)")

    def _op_hello(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"protocol": PROTOCOL_VERSION, "version": kstream_nb.__version__, "ops": list(self.OPS)}

    def _op_list_apps(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"apps": [app_summary(a) for a in self.apps()], "time": time.time()}

    def _op_stop(self, request: dict[str, Any]) -> dict[str, Any]:
        app = self.find(request)
        stopped = app.stop(timeout=_timeout(request))
        return {"app": app_summary(app), "stopped": bool(stopped)}

    def _op_restart(self, request: dict[str, Any]) -> dict[str, Any]:
        app = self.find(request)
        if app.state not in (State.CREATED, State.NOT_RUNNING, State.ERROR) and not app.stop(
            timeout=_timeout(request)
        ):
            raise ProtocolError(f"app {app.application_id!r} did not stop in time; not restarted")
        new = restarted(app)
        new.start()
        with _SEEN_LOCK:
            _SEEN[app_key(new)] = new
        return {"app": app_summary(new), "replaced": app_key(app)}

    def _op_app_detail(self, request: dict[str, Any]) -> dict[str, Any]:
        app = self.find(request)
        metrics = app.metrics()
        return {
            "app": app_summary(app, metrics),
            "topology": app.topology.describe().to_dict(),
            "assignment": app.assignment(),
            "group_assignment": app.group_assignment(),
            "lag": metrics.get("lag", {}),
            "metrics": jsonable(metrics),
        }

    # ---- topics ----

    def _bootstrap(self, request: dict[str, Any]) -> str:
        if request.get("app") is not None:
            return self.find(request).config.bootstrap_servers
        bootstrap = request.get("bootstrap", "memory://")
        if not isinstance(bootstrap, str) or not bootstrap:
            raise ProtocolError("'bootstrap' must be a non-empty string")
        return bootstrap

    def _op_topics(self, request: dict[str, Any]) -> dict[str, Any]:
        bootstrap = self._bootstrap(request)
        admin = connect(bootstrap).admin()
        topics = []
        for name in sorted(admin.list_topics()):
            d = admin.describe_topic(name)
            topics.append(
                {
                    "name": name,
                    "partitions": d.partitions,
                    "beginning_offsets": list(d.beginning_offsets),
                    "end_offsets": list(d.end_offsets),
                    "records": sum(max(0, e - b) for b, e in zip(d.beginning_offsets, d.end_offsets)),
                    "internal": is_internal_topic(name),
                }
            )
        return {"bootstrap": bootstrap, "topics": topics}

    def _op_topic_tail(self, request: dict[str, Any]) -> dict[str, Any]:
        topic = request.get("topic")
        if not isinstance(topic, str) or not topic:
            raise ProtocolError("'topic' must be a topic name")
        n = request.get("n", DEFAULT_TAIL)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_TAIL:
            raise ProtocolError(f"'n' must be an integer from 1 to {MAX_TAIL}, got {n!r}")
        bootstrap = self._bootstrap(request)
        # the app's registry, or the cluster's (memory://: its embedded one): Schema Registry records decode too
        configs = self.find(request).config.serde_configs() if request.get("app") is not None else None
        configs = configs or registry_configs(bootstrap)
        keys, values = AutoSerde().configure(configs, True), AutoSerde().configure(configs, False)
        frame = read_topic(
            topic, bootstrap, key_serde="bytes", value_serde="bytes", from_beginning=False, max_records=n
        )
        if len(frame):
            frame = frame.sort_values(["timestamp", "partition", "offset"]).tail(n)
        records = []
        for row in frame.to_dict("records"):
            key_format, key = keys.detect(topic, row["key"])
            value_format, value = values.detect(topic, row["value"])
            records.append(
                {
                    "partition": int(row["partition"]),
                    "offset": int(row["offset"]),
                    "timestamp": int(row["timestamp"]),
                    "key": show_bytes(key),
                    "value": show_bytes(value),
                    "key_format": key_format,
                    "value_format": value_format,
                    "headers": jsonable(row["headers"]),
                }
            )
        return {"topic": topic, "bootstrap": bootstrap, "records": records}

    def _op_topic_profile(self, request: dict[str, Any]) -> dict[str, Any]:
        topic = request.get("topic")
        if not isinstance(topic, str) or not topic:
            raise ProtocolError("'topic' must be a topic name")
        sample = request.get("sample", DEFAULT_SAMPLE)
        if isinstance(sample, bool) or not isinstance(sample, int) or not 1 <= sample <= MAX_PROFILE_SAMPLE:
            raise ProtocolError(f"'sample' must be an integer from 1 to {MAX_PROFILE_SAMPLE}, got {sample!r}")
        sampling = request.get("sampling", "last")
        if sampling not in ("last", "spread"):
            raise ProtocolError(f"'sampling' must be 'last' or 'spread', got {sampling!r}")
        bootstrap = self._bootstrap(request)
        settings: dict[str, Any] = {}
        if request.get("app") is not None:  # the app's client settings and Schema Registry
            config = self.find(request).config
            settings = {
                "client_config": config.client_config,
                "schema_registry_url": config.schema_registry_url,
                "schema_registry_config": config.schema_registry_config,
            }
        profile = profile_topic(topic, bootstrap, sample=sample, sampling=sampling, **settings)
        return {"topic": topic, "bootstrap": bootstrap, "profile": profile_payload(profile)}


# ---- helpers -----------------------------------------------------------------------------------------------


def profile_payload(profile: TopicProfile) -> dict[str, Any]:
    """A ``TopicProfile`` as JSON for the panel (timestamps in epoch ms, keys and values as ``show_bytes``)."""
    shown = profile.records_shown
    return {
        "records": profile.records,
        "bytes": profile.bytes,
        "bytes_exact": profile.bytes_exact,
        "skew": profile.skew,
        "bytes_skew": profile.bytes_skew,
        "first_timestamp": profile.first_timestamp,
        "last_timestamp": profile.last_timestamp,
        "sampling": profile.sampling,
        "sampling_text": profile.sampling_text,
        "sampled": profile.sampled,
        "partitions": [{**dataclasses.asdict(p), "records": p.records} for p in profile.partitions],
        "key_formats": [[f, n] for f, n in profile.key_formats.items()],
        "value_formats": [[f, n] for f, n in profile.value_formats.items()],
        "columns": [{**dataclasses.asdict(c), "null_rate": c.null_rate} for c in profile.columns],
        "structured_values": profile.structured_values,
        "distinct_keys": profile.distinct_keys,
        "null_keys": profile.null_keys,
        "records_shown": [
            {
                "partition": int(r["partition"]),
                "offset": int(r["offset"]),
                "timestamp": int(r["timestamp"].value // 1_000_000),
                "key": show_bytes(r["key"]),
                "value": show_bytes(r["value"]),
                "key_format": r["key_format"],
                "value_format": r["value_format"],
            }
            for r in shown.to_dict("records")
        ],
    }


def app_key(app: KafkaStreams) -> str:
    """The panel's name for one ``KafkaStreams`` object (its application id and object identity)."""
    return f"{app.application_id}@{id(app):x}"


def app_summary(app: KafkaStreams, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
    """One row of ``list_apps``."""
    m = app.metrics() if metrics is None else metrics
    lag = m.get("lag") or {}
    rate = float(m.get("process-rate") or 0.0)
    return {
        "key": app_key(app),
        "name": app.application_id,
        "state": app.state.value,
        "records_per_s": rate if math.isfinite(rate) else 0.0,
        "processed": int(m.get("process-total") or 0),
        "lag": int(sum(lag.values())),
        "tasks": int(m.get("tasks") or 0),
        "threads": int(m.get("threads") or 0),
        "bootstrap": app.config.bootstrap_servers,
        "error": m.get("error"),
    }


def restarted(app: KafkaStreams) -> KafkaStreams:
    """A new, not yet started ``KafkaStreams`` with ``app``'s topology, application id and settings."""
    settings = {f.name: getattr(app.config, f.name) for f in dataclasses.fields(app.config)}
    for name in ("application_id", "bootstrap_servers", "num_stream_threads"):
        settings.pop(name)
    return KafkaStreams(
        app.topology,
        application_id=app.application_id,
        bootstrap_servers=app.config.bootstrap_servers,
        num_stream_threads=app.config.num_stream_threads,
        **settings,
    )


def _timeout(request: dict[str, Any]) -> float:
    timeout = request.get("timeout", DEFAULT_STOP_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_STOP_TIMEOUT_S:
        raise ProtocolError(
            f"'timeout' must be a number of seconds in (0, {MAX_STOP_TIMEOUT_S:g}], got {timeout!r}"
        )
    return float(timeout)


def show_bytes(raw: Any) -> Any:
    """A key, value or header as the panel shows it: bytes decoded by the ``auto`` serde's rules (JSON, text,
    Java numbers), those no rule decodes as a ``0x…`` hex preview; decoded values JSON-safe."""
    if raw is None:
        return None
    if isinstance(raw, RawBytes):
        return hex_preview(raw)
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return show_bytes(_AUTO.detect("", raw)[1])
    return jsonable(raw)


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` made JSON-safe: containers recursively, non-finite floats as strings, the rest as repr."""
    if value is None or isinstance(value, (bool, int, str)):
        return _clip(value) if isinstance(value, str) else value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth > 8:
        return _clip(repr(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return show_bytes(value)
    item: Callable[[], Any] | None = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return jsonable(item(), depth + 1)
        except Exception:
            pass
    return _clip(repr(value))


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
