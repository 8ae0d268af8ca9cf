"""``%load_ext kstream_nb``: the ``%%kstream`` cell magic and the ``%kstream`` line magics.

Cell magic::

    %%kstream NAME [--bootstrap URL] [--threads N] [--eos] [--from-beginning | --from WHEN] [--show chart,...]
    builder.stream("orders").group_by_key().count(store="counts")

runs the body (IPython syntax allowed) in the user namespace with ``builder`` (a fresh
``StreamsBuilder``) and ``ks`` (this package) bound, builds the topology, starts
``KafkaStreams(application_id=NAME)`` on background threads and displays its dashboard. Running the
cell again first stops the app (and dashboard thread) it started before; an error in the body is an
ordinary traceback and leaves nothing running. ``--from WHEN`` first resets the app to that time (below) with
its topology's source topics as inputs, so it processes them from there with empty state.

Line magics: ``%kstream list | stop NAME | stop --all | describe NAME | topics [TOPIC] | tail TOPIC [-n N]
[--since WHEN] [--follow] [--schema-registry URL] | produce TOPIC VAR | store NAME STORE [KEY] | assignment NAME |
reset NAME [--to WHEN] [--input-topics T1,T2] | dashboard NAME | kafka start|stop|status [--port P]`` (the
local Apache Kafka of ``kstream-nb kafka``). WHEN is a duration ago (``10m``; or ``--since=-10m``), an
ISO-8601 time (naive = UTC) or epoch ms; ``reset`` also takes ``earliest``/``latest`` (``ks.reset_app``:
Kafka's application reset tool). ``tail --since`` shows every record from then on (``-n``: the newest N).
``tail`` shows each key and value in the format it was written in (the ``auto`` serde); ``topics TOPIC
[--sample N] [--spread]`` profiles one topic (``ks.profile_topic``). ``store`` asks every instance of the app
when it has an ``application_server`` (``--stale``: standby copies may answer), else this one.
Kernel shutdown (interpreter exit) stops every app and refresher.
"""

from __future__ import annotations

import argparse
import atexit
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

import kstream_nb
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.local_kafka import DEFAULT_DATA_DIR as DEFAULT_KAFKA_DATA_DIR
from kstream_nb.cluster.local_kafka import DEFAULT_PORT as DEFAULT_KAFKA_PORT
from kstream_nb.cluster.local_kafka import BrokerStatus, LocalKafka, LocalKafkaError
from kstream_nb.cluster.profile import DEFAULT_SAMPLE, TopicProfile, profile_topic
from kstream_nb.cluster.topic_io import produce, read_topic
from kstream_nb.dsl.builder import StreamsBuilder
from kstream_nb.durations import to_millis
from kstream_nb.jupyter.refresher import stop_all_refreshers
from kstream_nb.jupyter.reprs import register_formatters
from kstream_nb.jupyter.widgets import SHOW_ALL, AssignmentView, Dashboard, JoinTable, TopologyGraph
from kstream_nb.runtime.app import KafkaStreams, State, running_apps
from kstream_nb.runtime.app_reset import AppRunningError
from kstream_nb.runtime.app_reset import reset_app as reset_to
from kstream_nb.runtime.query_server import is_window_store
from kstream_nb.time_bounds import TimeBound, to_epoch_ms
from kstream_nb.topology.naming import is_internal_topic

DEFAULT_BOOTSTRAP = "memory://"
STOP_TIMEOUT_S = 30.0


@dataclass
class Managed:
    """An app started by ``%%kstream`` and the dashboard shown for it."""

    name: str
    app: KafkaStreams
    dashboard: Dashboard | None = None


_MANAGED: dict[str, Managed] = {}
_FOLLOWERS: list[JoinTable] = []
_BOOTSTRAP_OF: dict[str, str] = {}  # where each app the magic started ran (for reset after stop)
_LOCK = threading.RLock()
_ATEXIT_REGISTERED = False


# ---- the registry (usable from Python too) -------------------------------------------------------------


def get_app(name: str) -> KafkaStreams:
    """The app named ``name``: the one ``%%kstream NAME`` started, else a running app with that id."""
    with _LOCK:
        managed = _MANAGED.get(name)
    if managed is not None:
        return managed.app
    for app in running_apps():
        if app.application_id == name:
            return app
    known = sorted({*_MANAGED, *(a.application_id for a in running_apps())})
    raise UsageError(f"no kstream app named {name!r} (known: {', '.join(known) or 'none'})")


def get_dashboard(name: str) -> Dashboard | None:
    with _LOCK:
        managed = _MANAGED.get(name)
    return managed.dashboard if managed is not None else None


def stop_app(name: str, timeout: float = STOP_TIMEOUT_S) -> bool:
    """Stops the app ``%%kstream NAME`` started (and its dashboard thread); False if none was running."""
    with _LOCK:
        managed = _MANAGED.pop(name, None)
    if managed is None:
        return False
    if managed.dashboard is not None:
        managed.dashboard.stop()
    if not managed.app.stop(timeout=timeout):
        with _LOCK:
            _MANAGED.setdefault(name, managed)
        raise RuntimeError(f"kstream app {name!r} did not stop within {timeout}s; try %kstream stop {name} again")
    if managed.dashboard is not None:
        managed.dashboard.stop()
    return True


def stop_all(timeout: float = STOP_TIMEOUT_S) -> list[str]:
    """Stops every app of this process (started by the magic or not), every dashboard and follower."""
    with _LOCK:
        names = list(_MANAGED)
        followers = list(_FOLLOWERS)
        _FOLLOWERS.clear()
    stopped = []
    for name in names:
        try:
            if stop_app(name, timeout):
                stopped.append(name)
        except RuntimeError:
            pass
    for app in running_apps():
        app.stop(timeout=timeout)
        stopped.append(app.application_id)
    for follower in followers:
        follower.stop()
    stop_all_refreshers()
    return stopped


def wait_until(condition: Callable[[], Any], timeout: float = 30.0, what: str = "the condition") -> Any:
    """Polls ``condition`` (every 20 ms) until it returns something truthy (a non-empty DataFrame counts)
    and returns that; raises
    ``TimeoutError`` after ``timeout`` seconds. For notebook cells that check a live app's results."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            result = condition()
            if (isinstance(result, pd.DataFrame | pd.Series) and not result.empty) or (
                not isinstance(result, pd.DataFrame | pd.Series) and result
            ):
                return result
        except Exception as e:  # e.g. a store not yet available during a rebalance
            last_error = e
        if time.monotonic() > deadline:
            hint = f" (last error: {last_error})" if last_error is not None else ""
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}{hint}")
        time.sleep(0.02)


def managed_apps() -> dict[str, KafkaStreams]:
    with _LOCK:
        return {name: m.app for name, m in _MANAGED.items()}


def reset_app(
    name: str,
    bootstrap_servers: str = DEFAULT_BOOTSTRAP,
    to: TimeBound = "earliest",
    input_topics: list[str] | None = None,
    state_dir: str | None = None,
) -> list[str]:
    """``ks.reset_app`` (Kafka's application reset: input offsets to ``to``, internal topics deleted, local state
    wiped) for the notebook: a running app is refused as a UsageError naming its instances. Returns what was
    done, a line each."""
    try:
        return reset_to(name, bootstrap_servers, to=to, input_topics=input_topics, state_dir=state_dir).lines()
    except AppRunningError as e:
        raise UsageError(f"{e} (%kstream stop {name})") from e


def _when(text: str, what: str) -> TimeBound:
    """A WHEN argument: a bare duration (``10m``) means that long ago; other forms as ``to_epoch_ms``."""
    text = text.strip()
    try:
        to_millis(text, what)
    except ValueError:
        bound: TimeBound = text
    else:
        bound = f"-{text}"
    try:
        to_epoch_ms(bound, what)
    except ValueError as e:
        raise UsageError(str(e)) from e
    return bound


def _register_atexit() -> None:
    global _ATEXIT_REGISTERED
    with _LOCK:
        if not _ATEXIT_REGISTERED:
            atexit.register(stop_all, 5.0)
            _ATEXIT_REGISTERED = True


# ---- argument parsing -------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise UsageError(f"{self.prog}: {message}\n{self.format_usage()}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise UsageError(message or self.format_usage())


def _cell_parser() -> _Parser:
    p = _Parser(prog="%%kstream", add_help=False)
    p.add_argument("name")
    p.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--eos", action="store_true")
    p.add_argument("--from-beginning", action="store_true", dest="from_beginning")
    p.add_argument("--from", default=None, dest="from_time")
    p.add_argument("--show", default=",".join(SHOW_ALL))
    return p


def _line_parser() -> _Parser:
    p = _Parser(prog="%kstream", add_help=False)
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    sub.add_parser("list", add_help=False)
    s = sub.add_parser("stop", add_help=False)
    s.add_argument("name", nargs="?")
    s.add_argument("--all", action="store_true", dest="all")
    s = sub.add_parser("describe", add_help=False)
    s.add_argument("name")
    s = sub.add_parser("topics", add_help=False)
    s.add_argument("topic", nargs="?")
    s.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP)
    s.add_argument("--internal", action="store_true")
    s.add_argument("--sample", type=int, default=DEFAULT_SAMPLE)
    s.add_argument("--spread", action="store_true")
    s.add_argument("--schema-registry", default=None, dest="schema_registry")
    s = sub.add_parser("tail", add_help=False)
    s.add_argument("topic")
    s.add_argument("-n", type=int, default=None)
    s.add_argument("--since", default=None)
    s.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP)
    s.add_argument("--follow", action="store_true")
    s.add_argument("--schema-registry", default=None, dest="schema_registry")
    s = sub.add_parser("produce", add_help=False)
    s.add_argument("topic")
    s.add_argument("var")
    s.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP)
    s.add_argument("--partitions", type=int, default=1)
    s = sub.add_parser("store", add_help=False)
    s.add_argument("name")
    s.add_argument("store")
    s.add_argument("key", nargs="?", default=None)
    s.add_argument("--stale", action="store_true")
    s = sub.add_parser("assignment", add_help=False)
    s.add_argument("name")
    s = sub.add_parser("reset", add_help=False)
    s.add_argument("name")
    s.add_argument("--bootstrap", default=None)
    s.add_argument("--to", default="earliest")
    s.add_argument("--input-topics", default=None, dest="input_topics")
    s = sub.add_parser("dashboard", add_help=False)
    s.add_argument("name")
    s.add_argument("--show", default=",".join(SHOW_ALL))
    s = sub.add_parser("kafka", add_help=False)
    s.add_argument("action", choices=["start", "stop", "status"])
    s.add_argument("--port", type=int, default=DEFAULT_KAFKA_PORT)
    s.add_argument("--data-dir", default=str(DEFAULT_KAFKA_DATA_DIR), dest="data_dir")
    s.add_argument("--timeout", type=float, default=60.0)
    return p


def _parse(parser: _Parser, line: str) -> argparse.Namespace:
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise UsageError(f"cannot parse {line!r}: {e}") from e
    return parser.parse_args(words)


def _show_parts(show: str) -> list[str]:
    if show.strip().lower() in ("", "none", "off"):
        return []
    parts = [s.strip() for s in show.split(",") if s.strip()]
    unknown = [s for s in parts if s not in SHOW_ALL]
    if unknown:
        raise UsageError(f"--show: unknown part(s) {', '.join(unknown)}; choose from {', '.join(SHOW_ALL)}")
    return parts


# ---- the magics ------------------------------------------------------------------------------------------


@magics_class
class KStreamMagics(Magics):
    """``%%kstream NAME ...`` runs a topology; ``%kstream COMMAND ...`` inspects apps and topics."""

    @line_cell_magic
    def kstream(self, line: str, cell: str | None = None) -> Any:
        if cell is None:
            return self._line(line)
        return self._cell(line, cell)

    # ---- %%kstream -----------------------------------------------------------------------------------

    def _cell(self, line: str, cell: str) -> None:
        args = _parse(_cell_parser(), line)
        parts = _show_parts(args.show)
        if args.threads < 1:
            raise UsageError(f"--threads must be >= 1, got {args.threads}")
        name = args.name
        stop_app(name)  # a re-run replaces the old app: never two apps of one cell
        assert self.shell is not None
        ns = self.shell.user_ns
        ns["builder"] = builder = StreamsBuilder()
        ns.setdefault("ks", kstream_nb)
        code = self.shell.transform_cell(cell)
        filename = self.shell.compile.cache(code, self.shell.execution_count, raw_code=cell)
        exec(compile(code, filename, "exec"), ns)  # errors propagate as ordinary tracebacks
        topology = builder.build()
        if not topology.node_specs and not topology.global_stores:
            raise UsageError(f"%%kstream {name}: the cell added nothing to `builder` (no topology to run)")
        config: dict[str, Any] = {}
        if args.eos:
            config["processing_guarantee"] = "exactly_once_v2"
        if args.from_beginning and args.from_time:
            raise UsageError("%%kstream: give --from-beginning or --from WHEN, not both")
        if args.from_beginning:
            reset_app(name, args.bootstrap)
        elif args.from_time:
            when = args.from_time if args.from_time in ("earliest", "latest") else _when(args.from_time, "--from")
            admin = connect(args.bootstrap).admin()
            sources = [t for t in topology.source_topics() if not topology.is_internal(t)]
            reset_app(name, args.bootstrap, when, [t for t in sources if admin.partition_count(t) is not None])
        app = KafkaStreams(
            topology,
            application_id=name,
            bootstrap_servers=args.bootstrap,
            num_stream_threads=args.threads,
            **config,
        )
        managed = Managed(name, app)
        try:
            app.start()
            with _LOCK:
                _MANAGED[name] = managed
                _BOOTSTRAP_OF[name] = args.bootstrap
            if parts:
                managed.dashboard = Dashboard(app, show=parts, autostart=False)
                display(managed.dashboard)  # from the main thread, before its thread starts
                managed.dashboard.refresher.start()
            else:
                display(app)
        except BaseException:
            with _LOCK:
                _MANAGED.pop(name, None)
            if managed.dashboard is not None:
                managed.dashboard.stop()
            app.stop(timeout=STOP_TIMEOUT_S)
            raise

    # ---- %kstream COMMAND ------------------------------------------------------------------------------

    def _line(self, line: str) -> Any:
        args = _parse(_line_parser(), line)
        command = args.command
        if command is None:
            raise UsageError(
                "usage: %kstream list | stop NAME | stop --all | describe NAME | topics [TOPIC] | tail TOPIC "
                "[-n N] [--since WHEN] [--follow] [--schema-registry URL] | produce TOPIC VAR | store NAME STORE "
                "[KEY] [--stale] | assignment NAME | reset NAME [--to WHEN|earliest|latest] [--input-topics "
                "T1,T2] | dashboard NAME | kafka start|stop|status [--port P]"
            )
        return getattr(self, f"_cmd_{command}")(args)

    def _cmd_kafka(self, args: argparse.Namespace) -> BrokerStatus:
        """``%kstream kafka start|stop|status``: the local Apache Kafka of ``kstream-nb kafka``."""
        broker = LocalKafka(args.data_dir, args.port)
        try:
            if args.action == "start":
                broker.start(args.timeout, quiet=False)
            elif args.action == "stop":
                broker.stop()
        except LocalKafkaError as e:
            raise UsageError(str(e)) from e
        return broker.status()

    def _cmd_list(self, args: argparse.Namespace) -> pd.DataFrame:
        apps: dict[int, tuple[KafkaStreams, bool]] = {}
        for app in managed_apps().values():
            apps[id(app)] = (app, True)
        for app in running_apps():
            apps.setdefault(id(app), (app, False))
        rows = []
        for app, by_magic in apps.values():
            m = app.metrics()
            rows.append(
                {
                    "name": app.application_id,
                    "state": app.state.value,
                    "threads": m["threads"],
                    "tasks": m["tasks"],
                    "processed": m["process-total"],
                    "lag": sum(m["lag"].values()),
                    "bootstrap": app.config.bootstrap_servers,
                    "magic": by_magic,
                }
            )
        columns = ["name", "state", "threads", "tasks", "processed", "lag", "bootstrap", "magic"]
        return pd.DataFrame(rows, columns=columns).sort_values("name", ignore_index=True)

    def _cmd_stop(self, args: argparse.Namespace) -> None:
        if args.all:
            stopped = stop_all()
            print(f"stopped {len(stopped)} app(s){': ' + ', '.join(sorted(stopped)) if stopped else ''}")
            return
        if not args.name:
            raise UsageError("usage: %kstream stop NAME | %kstream stop --all")
        if stop_app(args.name):
            print(f"stopped {args.name}")
            return
        app = get_app(args.name)
        app.stop(timeout=STOP_TIMEOUT_S)
        print(f"stopped {args.name}")

    def _cmd_describe(self, args: argparse.Namespace) -> TopologyGraph:
        return TopologyGraph(get_app(args.name))

    def _cmd_topics(self, args: argparse.Namespace) -> pd.DataFrame | TopicProfile:
        if args.topic is not None:
            if args.sample < 1:
                raise UsageError(f"--sample must be >= 1, got {args.sample}")
            return profile_topic(
                args.topic,
                args.bootstrap,
                sample=args.sample,
                sampling="spread" if args.spread else "last",
                schema_registry_url=args.schema_registry,
            )
        admin = connect(args.bootstrap).admin()
        rows = []
        for name in sorted(admin.list_topics()):
            d = admin.describe_topic(name)
            internal = is_internal_topic(name)
            if internal and not args.internal:
                continue
            rows.append(
                {
                    "topic": name,
                    "partitions": d.partitions,
                    "records": sum(e - b for b, e in zip(d.beginning_offsets, d.end_offsets)),
                    "end_offsets": list(d.end_offsets),
                    "internal": internal,
                }
            )
        return pd.DataFrame(rows, columns=["topic", "partitions", "records", "end_offsets", "internal"])

    def _cmd_tail(self, args: argparse.Namespace) -> pd.DataFrame | None:
        if args.n is not None and args.n < 1:
            raise UsageError(f"-n must be >= 1, got {args.n}")
        since = None if args.since is None else to_epoch_ms(_when(args.since, "--since"), "--since")
        if args.follow:  # the newest n records from `since` on, live
            table = JoinTable(args.bootstrap, args.topic, n=args.n or 10, autostart=False, start=since)
            with _LOCK:
                _FOLLOWERS.append(table)
            display(table)
            table.refresh(force=True)
            from kstream_nb.jupyter.refresher import Refresher

            table.refresher = Refresher([table], None, name=f"kstream-tail-{args.topic}").start()
            return None
        # auto: each key and value in the format it was written in (JSON, text, Java numbers, Schema Registry
        # records), bytes it cannot decode as a hex preview: a tail never fails on a record
        n = args.n if args.n is not None or since is not None else 10
        frame = read_topic(
            args.topic,
            args.bootstrap,
            key_serde="auto",
            value_serde="auto",
            from_beginning=n is None,
            max_records=n,
            schema_registry_url=args.schema_registry,
            start=since,
        )
        frame = frame.sort_values(["timestamp", "partition", "offset"], kind="stable")
        return (frame if n is None else frame.tail(n)).reset_index(drop=True)

    def _cmd_produce(self, args: argparse.Namespace) -> int:
        assert self.shell is not None
        if args.var not in self.shell.user_ns:
            raise UsageError(f"%kstream produce: no variable {args.var!r} in the notebook")
        n = produce(args.topic, self.shell.user_ns[args.var], args.bootstrap, partitions=args.partitions)
        print(f"produced {n} record(s) to {args.topic}")
        return n

    def _cmd_store(self, args: argparse.Namespace) -> pd.DataFrame:
        """``%kstream store NAME STORE [KEY] [--stale]``: the store's entries (or KEY's), from every instance when
        the app has an ``application_server`` (``--stale``: standbys answer for an instance that does not)."""
        app = get_app(args.name)
        scope = "all" if app.config.application_server is not None else "local"
        store = app.store(args.store, scope=scope, stale=args.stale)
        if args.key is None:
            frame: pd.DataFrame = store.to_pandas()
            return frame
        if is_window_store(app, args.store):  # window and session stores
            return pd.DataFrame(
                [(args.key, *w) for w in store.fetch(args.key)], columns=["key", "start", "end", "value"]
            )
        return pd.DataFrame([(args.key, store.get(args.key))], columns=["key", "value"])

    def _cmd_assignment(self, args: argparse.Namespace) -> pd.DataFrame:
        app = get_app(args.name)
        view = AssignmentView(app, autostart=False)
        owners, partitions = view.snapshot()
        group = app.group_assignment()
        rows = [
            {
                "instance": inst,
                "thread": thread,
                "task": task,
                "role": "active",
                "partitions": partitions.get(task, []),
                "lag": group.get(task, {}).get("lags", {}).get(inst),
                "moved_from": (group.get(task, {}).get("moved") or {}).get("from"),
            }
            for task, (inst, thread) in owners.items()
        ]
        rows += [  # standby and warm-up copies, with the lag their holder had at the last assignment
            {
                "instance": inst,
                "thread": thread,
                "task": task,
                "role": role,
                "partitions": [],
                "lag": lag,
                "moved_from": None,
            }
            for (inst, thread), copies in view.replicas.items()
            for task, role, lag in copies
        ]
        columns = ["instance", "thread", "task", "role", "partitions", "lag", "moved_from"]
        frame = pd.DataFrame(rows, columns=columns).astype({"lag": "Int64"})
        order = frame["role"].map({"active": 0, "standby": 1, "warmup": 2})
        return frame.assign(_order=order).sort_values(["instance", "_order", "thread", "task"], ignore_index=True)[
            columns
        ]

    def _cmd_reset(self, args: argparse.Namespace) -> None:
        with _LOCK:
            managed = _MANAGED.get(args.name)
            servers = args.bootstrap or _BOOTSTRAP_OF.get(args.name, DEFAULT_BOOTSTRAP)
            if managed is not None and managed.app.state in (State.NOT_RUNNING, State.ERROR):
                _MANAGED.pop(args.name, None)
        to = args.to if args.to in ("earliest", "latest") else _when(args.to, "--to")
        topics = [t.strip() for t in args.input_topics.split(",") if t.strip()] if args.input_topics else None
        state_dir = managed.app.config.state_dir if managed is not None else None
        done = reset_app(args.name, servers, to, topics, state_dir)
        print(f"reset {args.name} on {servers} to {args.to}:\n  " + "\n  ".join(done or ["nothing to do"]))

    def _cmd_dashboard(self, args: argparse.Namespace) -> None:
        app = get_app(args.name)
        dash = Dashboard(app, show=_show_parts(args.show), autostart=False)
        display(dash)
        dash.refresher.start()
        with _LOCK:
            managed = _MANAGED.get(args.name)
            if managed is not None:
                if managed.dashboard is not None:
                    managed.dashboard.stop()
                managed.dashboard = dash


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext kstream_nb`` or ``%load_ext kstream_nb.jupyter``: magics, formatters, panel comm target."""
    from kstream_nb.jupyter.comm import register_comm_target

    shell.register_magics(KStreamMagics)
    register_formatters(shell)
    register_comm_target(shell)  # the JupyterLab "Streams" panel talks to this kernel through it
    shell.user_ns.setdefault("ks", kstream_nb)
    _register_atexit()


def unload_ipython_extension(shell: Any) -> None:
    stop_all()
