"""Serves this instance's stores to the other instances (``application_server``): interactive queries over HTTP.

Kafka Streams leaves the transport to the user (its docs' example is a REST service); here each instance with an
``application_server`` runs a small ``ThreadingHTTPServer`` on a thread of its own, stopped by ``app.stop()``:

    GET /v1/stores/<store>/get?key=K                     -> {"value": V | null, "partition", "task"}
    GET /v1/stores/<store>/all?tasks=T,..&after=C&limit=N -> {"entries": [[K, V] | [K, start, end, V]], "next": C}
    GET /v1/stores/<store>/range?from=K&to=K&tasks=...   -> as ``all``, keys in [from, to] (key-value stores)
    GET /v1/stores/<store>/fetch?key=K&from_ms=&to_ms=   -> {"windows": [[start, end, V], ...]} (window stores)

Keys and values are the store serdes' bytes, base64 (standard alphabet). ``all``/``range`` are paged in the
order of the key bytes (``next`` is the cursor to pass as ``after``; null at the end). The active tasks answer;
standby copies too with ``stale=true``. 503 (with the reason) while a task restores or is not held here; 401
without the right ``Authorization: Bearer <application_server_token>``; 404 for a store the topology lacks.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from kstream_nb.errors import InvalidStateStoreError
from kstream_nb.runtime.query_metadata import HostInfo, key_task, store_serdes
from kstream_nb.runtime.store_provider import composite_view
from kstream_nb.topology.naming import changelog_topic

if TYPE_CHECKING:
    from kstream_nb.runtime.app import KafkaStreams

log = logging.getLogger("kstream_nb.query_server")

DEFAULT_PAGE = 1000
MAX_PAGE = 10_000


class StoreUnavailable(InvalidStateStoreError):
    """The store (or the task of a key) cannot answer on this instance now: the reason says why (HTTP 503)."""


class UnknownStore(InvalidStateStoreError):
    """The application's topology has no store of that name (HTTP 404)."""


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"{what} is not base64: {text[:40]!r}") from e


def is_window_store(app: KafkaStreams, store: str) -> bool:
    from kstream_nb.state.builders import WindowStoreBuilder

    return isinstance(app.topology.store_builders.get(store), WindowStoreBuilder)


def local_view(app: KafkaStreams, store: str, task_ids: list[str] | None, stale: bool) -> Any:
    """A read-only view of ``store`` over the given tasks held here (all active ones when None), standby copies
    too when ``stale``; raises ``StoreUnavailable`` naming the task when one of them cannot answer here."""
    from kstream_nb.runtime.app import State

    if app.state not in (State.RUNNING, State.REBALANCING):
        raise StoreUnavailable(f"store {store!r}: the application on {app.endpoint} is {app.state.value}")
    if store in app.topology.global_stores:
        stores = [app._global_stores.stores[store]] if app._global_stores else []
        return composite_view(app.topology, store, lambda: stores)
    if store not in app.topology.store_builders:
        known = sorted([*app.topology.store_builders, *app.topology.global_stores])
        raise InvalidStateStoreError(f"no state store named {store!r} in this topology (stores: {known})")
    threads = app.threads
    active = {tid: task for th in threads for tid, task in list(th.tasks.items()) if store in task.stores}
    if task_ids is None:
        found = [task.stores[store].store for task in active.values()]
        return composite_view(app.topology, store, lambda: found)
    found = []
    for tid in task_ids:
        if tid in active:
            found.append(active[tid].stores[store].store)
            continue
        done, total = next((th.restore_progress[tid] for th in threads if tid in th.restore_progress), (0, 0))
        if done < total:
            raise StoreUnavailable(
                f"store {store!r}: task {tid} is restoring on {app.endpoint} ({done} of {total} changelog records)"
            )
        standby = next((th.standbys[tid] for th in threads if tid in th.standbys), None) if stale else None
        copy = (
            None
            if standby is None
            else next((r.store for r in standby.stores.values() if r.store.name == store), None)
        )
        if copy is None:
            held = "active or standby" if stale else "active"
            raise StoreUnavailable(
                f"store {store!r}: task {tid} is not {held} on {app.endpoint} (process {app.process_id})"
            )
        found.append(copy)
    return composite_view(app.topology, store, lambda: found)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 30  # seconds a client may take to send its request (the socket's timeout)
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        token = self.server.token
        if token is not None:
            given = self.headers.get("Authorization", "")
            expected = f"Bearer {token}"
            if not hmac.compare_digest(given.encode(), expected.encode()):
                self._reply(HTTPStatus.UNAUTHORIZED, {"error": "missing or wrong bearer token"})
                return
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        params = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if len(parts) != 4 or parts[:2] != ["v1", "stores"]:
            self._reply(HTTPStatus.NOT_FOUND, {"error": f"no such path {url.path!r}: /v1/stores/<store>/<op>"})
            return
        try:
            self._reply(HTTPStatus.OK, self.server.answer(parts[2], parts[3], params))
        except UnknownStore as e:
            self._reply(HTTPStatus.NOT_FOUND, {"error": str(e)})
        except InvalidStateStoreError as e:  # restoring, not held here, closed by a rebalance: try again later
            self._reply(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(e)})
        except KeyError as e:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": f"missing parameter {e}"})
        except ValueError as e:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": str(e)})
        except Exception as e:  # a store failing: the caller gets the reason, the server keeps serving
            log.exception("interactive query %s failed", self.path)
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(e).__name__}: {e}"})

    def _reply(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        data = orjson.dumps(body)
        self.send_response(status)
        if status == HTTPStatus.UNAUTHORIZED:
            self.send_header("WWW-Authenticate", 'Bearer realm="kstream_nb"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the request threads: nothing outlives app.stop()
    answer: Callable[[str, str, dict[str, str]], dict[str, Any]]
    token: str | None


class QueryServer:
    """The HTTP endpoint of one app instance (see the module docstring); ``endpoint`` is the bound address."""

    def __init__(self, app: KafkaStreams, address: str, token: str | None) -> None:
        self.app = app
        bind = HostInfo.parse(address)
        self._server = _Server((bind.host, bind.port), _Handler)
        self._server.answer = self.answer
        self._server.token = token
        self.endpoint = f"{bind.host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name=f"{app.application_id}-query-server", daemon=True
        )
        self._thread.start()
        log.info("%s: serving interactive queries on http://%s", app.application_id, self.endpoint)

    def stop(self, timeout: float = 5.0) -> None:
        """Stops serving (requests in progress finish) and joins the server's threads."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout)

    def answer(self, store: str, op: str, params: dict[str, str]) -> dict[str, Any]:
        """The JSON answer to ``op`` on ``store`` (see the module docstring)."""
        app = self.app
        if store not in app.topology.store_builders and store not in app.topology.global_stores:
            known = sorted([*app.topology.store_builders, *app.topology.global_stores])
            raise UnknownStore(f"no state store named {store!r} in application {app.application_id!r} ({known})")
        if getattr(app.topology.store_builders.get(store), "versioned", False):
            raise ValueError(f"store {store!r} is a versioned store: it is queried on its own instance only")
        stale = params.get("stale", "false").lower() == "true"
        key_serde, value_serde = store_serdes(app, store)
        topic = changelog_topic(app.application_id, store)
        window = is_window_store(app, store)
        is_global = store in app.topology.global_stores
        if op in ("get", "fetch"):
            key = key_serde.deserialize(topic, unb64(params["key"], "key"))
            partition, task = (-1, None) if is_global else key_task(app, store, key)[1:]
            view = local_view(app, store, None if task is None else [task], stale)
            if op == "fetch" and window:
                to_ms = params.get("to_ms")
                windows = view.fetch(key, int(params.get("from_ms", 0)), None if to_ms is None else int(to_ms))
                return {"windows": [[s, e, b64(value_serde.serialize(topic, v))] for s, e, v in windows]}
            if op != "get" or window:
                raise ValueError(f"store {store!r} is a {'window' if window else 'key-value'} store: no {op!r}")
            value = view.get(key)
            raw = None if value is None else value_serde.serialize(topic, value)
            return {"value": b64(raw), "partition": partition, "task": task}
        if op not in ("all", "range") or (op == "range" and window):
            raise ValueError(
                f"unknown operation {op!r} on store {store!r}: get, all, range (key-value), fetch (window)"
            )
        tasks = [t for t in params["tasks"].split(",") if t] if "tasks" in params else None
        view = local_view(app, store, tasks, stale)
        rows: list[tuple[Any, ...]]
        if window:
            rows = [(key_serde.serialize(topic, k), s, e, v) for k, s, e, v in view.all()]
        elif op == "range":
            lo, hi = (
                key_serde.deserialize(topic, unb64(params[p], p)) if p in params else None for p in ("from", "to")
            )
            rows = [(key_serde.serialize(topic, kv[0]), kv[1]) for kv in view.range(lo, hi)]
        else:
            rows = [(key_serde.serialize(topic, kv[0]), kv[1]) for kv in view.all()]
        return page(rows, params, lambda v: b64(value_serde.serialize(topic, v)))


def page(
    rows: list[tuple[Any, ...]], params: dict[str, str], encode: Callable[[Any], str | None]
) -> dict[str, Any]:
    """One page of ``rows`` (key bytes first, value last) after the cursor ``params["after"]``, by key bytes (and
    window start and end): {"entries": ..., "next": the cursor of the last entry, or None at the end}."""
    limit = min(int(params.get("limit", DEFAULT_PAGE)), MAX_PAGE)
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    rows.sort(key=lambda r: r[:-1])
    if "after" in params:
        cursor_text = params["after"].split(",")
        cursor = (unb64(cursor_text[0], "after"), *map(int, cursor_text[1:]))
        rows = [r for r in rows if r[:-1] > cursor]
    chunk = rows[:limit]
    entries = [[b64(r[0]), *r[1:-1], encode(r[-1])] for r in chunk]
    last = chunk[-1] if chunk and len(rows) > limit else None
    cursor_out = None if last is None else ",".join([b64(last[0]) or "", *map(str, last[1:-1])])
    return {"entries": entries, "next": cursor_out}
