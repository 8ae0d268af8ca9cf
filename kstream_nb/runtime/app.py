"""``KafkaStreams``: the app. Owns stream threads, a state machine, interactive queries and metrics.

``start()`` returns at once; work happens on daemon threads. ``stop()`` joins every thread it started.
No signal handlers are ever installed: the app lives inside a notebook kernel.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from enum import Enum
from typing import Any

import pandas as pd

from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.errors import IllegalStateError, MissingSourceTopicError, StreamsError
from kstream_nb.runtime import group_view
from kstream_nb.runtime.assignment.client_state import AssignmentConfigs
from kstream_nb.runtime.assignor import StreamsPartitionAssignor
from kstream_nb.runtime.client_metrics import client_metrics
from kstream_nb.runtime.config import EXACTLY_ONCE_V2, StreamsConfig
from kstream_nb.runtime.control_topic import ControlTopic
from kstream_nb.runtime.dropped_records import late_records_frame
from kstream_nb.runtime.global_state import GlobalStores, GlobalStreamThread
from kstream_nb.runtime.interactive_queries import InteractiveQueries
from kstream_nb.runtime.process_metadata import acquire_process_id
from kstream_nb.runtime.stream_thread import StreamThread
from kstream_nb.runtime.thread_state import ThreadState
from kstream_nb.topology.topology import Topology

log = logging.getLogger("kstream_nb.app")


class State(Enum):
    """Client states, as Kafka Streams' ``KafkaStreams.State``."""

    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    PENDING_ERROR = "PENDING_ERROR"
    ERROR = "ERROR"


class ThreadFailureResponse(Enum):
    """What the uncaught-exception handler asks for when a stream thread fails."""

    REPLACE_THREAD = "replace_thread"
    SHUTDOWN_CLIENT = "shutdown_client"
    SHUTDOWN_APPLICATION = "shutdown_application"


_APPS: weakref.WeakSet[KafkaStreams] = weakref.WeakSet()


def running_apps() -> list[KafkaStreams]:
    """Apps of this process that have started and not yet stopped."""
    return [a for a in list(_APPS) if a.state not in (State.CREATED, State.NOT_RUNNING, State.ERROR)]


@atexit.register
def _stop_all() -> None:
    for app in running_apps():
        app.stop(timeout=5)


def _interactive() -> bool:
    """A person is watching: a running Jupyter kernel, or a terminal on stderr."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None or sys.stderr.isatty()


class KafkaStreams(InteractiveQueries):
    """Runs a topology: ``start()``, query with ``store()``, watch ``metrics()``/``assignment()``, ``stop()``."""

    def __init__(
        self,
        topology: Topology,
        application_id: str,
        bootstrap_servers: str = "memory://",
        num_stream_threads: int = 1,
        **config: Any,
    ) -> None:
        if not isinstance(topology, Topology):
            raise TypeError(f"KafkaStreams needs a Topology (builder.build()), got {type(topology).__name__}")
        topology.validate()
        self.config = StreamsConfig.of(
            application_id=application_id,
            bootstrap_servers=bootstrap_servers,
            num_stream_threads=num_stream_threads,
            **config,
        )
        self.topology = topology
        self.application_id = application_id
        self.process_id, self._process_slot = acquire_process_id(self.config.state_dir, application_id)
        weakref.finalize(self, self._process_slot.release)
        self.cluster = connect(bootstrap_servers, self.config.client_config)
        if self.config.processing_guarantee == EXACTLY_ONCE_V2 and not (
            bootstrap_servers.startswith("memory://") or self.cluster.supports_transactions
        ):
            raise StreamsError(
                f"processing_guarantee='exactly_once_v2' needs a cluster with transactions; {bootstrap_servers} "
                "has none: use 'at_least_once' there"
            )
        self.admin = self.cluster.admin()
        self.assignor = StreamsPartitionAssignor(
            topology,
            application_id,
            self.admin,
            self.config.num_standby_replicas,
            self.config.windowstore_changelog_additional_retention_ms,
            AssignmentConfigs.of(self.config),
        )
        self._state = State.CREATED
        self._lock = threading.RLock()
        self._threads: list[StreamThread] = []
        self._finished_threads: list[StreamThread] = []
        self._thread_index = itertools.count(1)
        self._listeners: list[Callable[[State, State], None]] = []
        self._handler: Callable[[BaseException], Any] | None = None
        self._started_at: float | None = None
        self._stopping = threading.Event()
        self._helpers: list[threading.Thread] = []
        self.error: BaseException | None = None
        self._global_stores: GlobalStores | None = None
        self._global_thread: GlobalStreamThread | None = None
        #: on Kafka: the control topic (the threads' statuses, the leader's assignments)
        self._control: ControlTopic | None = None
        #: what the app waits for while REBALANCING before its threads run ("waiting for broker"), or None
        self.status: str | None = None
        self.broker_retries = 0
        _APPS.add(self)

    # ---- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self._state

    def set_state_listener(self, listener: Callable[[State, State], None]) -> None:
        """``listener(new_state, old_state)`` on every transition (called from the thread that caused it)."""
        self._listeners.append(listener)

    def set_uncaught_exception_handler(self, handler: Callable[[BaseException], Any]) -> None:
        """``handler(error) -> ThreadFailureResponse`` (or its value string); default: shut the client down."""
        self._handler = handler

    def _transition(self, new: State) -> None:
        with self._lock:
            old = self._state
            if old == new:
                return
            self._state = new
        log.info("%s: %s -> %s", self.application_id, old.value, new.value)
        for listener in list(self._listeners):
            try:
                listener(new, old)
            except Exception:
                log.exception("state listener failed")

    def _thread_state_changed(self, thread: StreamThread) -> None:
        with self._lock:
            if self._state not in (State.REBALANCING, State.RUNNING) or thread not in self._threads:
                return
            alive = [t for t in self._threads if t.state != ThreadState.DEAD]
            if alive and all(t.state == ThreadState.RUNNING for t in alive):
                self._transition(State.RUNNING)
            elif any(ThreadState(t.state).rebalancing for t in alive):
                self._transition(State.REBALANCING)

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self) -> KafkaStreams:
        """Starts the stream threads and returns at once; the app goes REBALANCING, then RUNNING.

        Raises ``AuthenticationError`` when the broker refuses the credentials in ``client_config``."""
        with self._lock:
            if self._state != State.CREATED:
                raise IllegalStateError(
                    f"start() can only be called once, on a CREATED app (state is {self._state.value}); "
                    "create a new KafkaStreams to run again"
                )
            if not self.cluster.reachable(1.0):
                # the broker is down or not up yet: retry with backoff instead of failing; state REBALANCING
                self.status = "waiting for broker"
                log.warning("%s: %s unreachable, retrying", self.application_id, self.config.bootstrap_servers)
                self._transition(State.REBALANCING)
                waiter = threading.Thread(
                    target=self._wait_for_broker, name=f"{self.application_id}-broker-wait", daemon=True
                )
                self._helpers.append(waiter)
                waiter.start()
                return self
            self._launch()
        return self

    def _wait_for_broker(self) -> None:
        """Retries the connection with exponential backoff (0.2 s doubling to 5 s), then starts the threads."""
        backoff = 0.2
        try:
            while not self._stopping.wait(backoff):
                self.broker_retries += 1
                if self.cluster.reachable(1.0):
                    break
                backoff = min(backoff * 2, 5.0)
        except StreamsError as e:  # the broker refused the credentials (AuthenticationError): waiting cannot help
            self.status = None
            self._fail(e)
            return
        with self._lock:
            if self._stopping.is_set() or self._state != State.REBALANCING:
                return
            self.status = None
            log.info("%s: %s reachable, starting", self.application_id, self.config.bootstrap_servers)
            try:
                self._launch()
            except Exception as e:
                self._fail(e)

    def _launch(self) -> None:
        """Checks the source topics and starts the global and stream threads (broker reachable)."""
        with self._lock:
            existing = {
                t: n for t in self.topology.source_topics() if (n := self.admin.partition_count(t)) is not None
            }
            self.assignor.check_copartitioning(existing)
            self._transition(State.REBALANCING)
            self._started_at = time.monotonic()
            if self.topology.global_stores:
                self._global_stores = GlobalStores(self.topology, self.config)
                self._global_thread = GlobalStreamThread(
                    self._global_stores, self.cluster, self.config, self._fail
                )
                self._global_thread.start()
            self._serve_queries()  # before the threads: they tell the group where this instance answers
            if not self.cluster.runs_group_assignor:
                self._control = ControlTopic(self.cluster, self.application_id, self.config.client_config)
                self._control.endpoint = self.endpoint
            for _ in range(self.config.num_stream_threads):
                self._start_thread()
            watch = threading.Thread(
                target=self._watch_missing_topics, name=f"{self.application_id}-watch", daemon=True
            )
            self._helpers.append(watch)
            watch.start()

    def _new_thread(self) -> StreamThread:
        name = f"{self.application_id}-StreamThread-{next(self._thread_index)}"
        return StreamThread(
            name,
            self.process_id,
            self.topology,
            self.config,
            self.cluster,
            self.assignor,
            self._thread_state_changed,
            self._thread_failed,
            self._global_stores.stores if self._global_stores else None,
            self._global_thread.bootstrapped if self._global_thread else None,
            self._control,
        )

    def _start_thread(self) -> StreamThread:
        thread = self._new_thread()
        self._threads.append(thread)
        if self._state == State.RUNNING:
            # the group rebalances onto the new thread: not RUNNING until it holds its tasks
            self._transition(State.REBALANCING)
        thread.start()
        return thread

    def _watch_missing_topics(self) -> None:
        """Fails the app, naming the topics, when its source topics stay missing past the timeout."""
        timeout = self.config.missing_source_topic_timeout_ms / 1000
        while self._state in (State.REBALANCING, State.RUNNING):
            missing = self.missing_source_topics()
            if not missing:
                if self._state == State.RUNNING:
                    return
            elif self._started_at is not None and time.monotonic() - self._started_at > timeout:
                self._fail(MissingSourceTopicError(missing))
                return
            if self._stopping.wait(0.05):
                return

    def missing_source_topics(self) -> list[str]:
        """Source topics of the topology that do not exist on the cluster (the app waits for them)."""
        internal = self.topology.is_internal
        return sorted(
            t for t in self.topology.source_topics() if not internal(t) and self.admin.partition_count(t) is None
        )

    def _thread_failed(self, thread: StreamThread, error: BaseException) -> None:
        response: Any = ThreadFailureResponse.SHUTDOWN_CLIENT
        if self._handler is not None:
            try:
                answer = self._handler(error)
                response = ThreadFailureResponse(getattr(answer, "value", answer))
            except Exception as e:
                log.exception("uncaught exception handler failed")
                error = e
        with self._lock:
            if thread in self._threads:
                self._threads.remove(thread)
                self._finished_threads.append(thread)
            if response is ThreadFailureResponse.REPLACE_THREAD and self._state in (
                State.RUNNING,
                State.REBALANCING,
            ):
                log.warning("replacing failed stream thread %s: %s", thread.name, error)
                self._start_thread()
                return
        self._fail(error)

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            if self._state in (State.PENDING_ERROR, State.ERROR, State.NOT_RUNNING, State.PENDING_SHUTDOWN):
                return
            self.error = error
            self._transition(State.PENDING_ERROR)
            shutdown = threading.Thread(
                target=self._shutdown_threads,
                args=(State.ERROR, None),
                name=f"{self.application_id}-shutdown",
                daemon=True,
            )
            self._helpers.append(shutdown)
            shutdown.start()

    def _shutdown_threads(self, final: State, timeout: float | None) -> bool:
        self._stopping.set()
        self._stop_serving()
        with self._lock:
            # also the threads that already left (a failed one may still be returning from run())
            threads: list[threading.Thread] = [*self._threads, *self._finished_threads]
        for thread in self._threads:
            thread.shutdown()
        current = threading.current_thread()
        helpers = [h for h in self._helpers if h is not current and h.name.endswith("-watch")]
        if self._global_thread is not None:
            self._global_thread.shutdown()
            helpers.append(self._global_thread)
        stopped = self._join([t for t in [*threads, *helpers] if t is not current], timeout)
        if stopped:
            if self._global_stores is not None:
                self._global_stores.close()
            if self._control is not None:
                self._control.close()
            self._process_slot.release()  # a later instance may take this process id (and its tasks) now
        with self._lock:
            self._finished_threads.extend(t for t in self._threads if t not in self._finished_threads)
            self._threads = [t for t in self._threads if t.is_alive()]
            if stopped:
                self._transition(final)
        return stopped

    def stop(self, timeout: float | None = 30.0) -> bool:
        """Stops every stream thread (commits, leaves the group) and waits; True if all have stopped."""
        with self._lock:
            state = self._state
            if state == State.CREATED:
                self._transition(State.NOT_RUNNING)
                self._process_slot.release()
                return True
            if state not in (State.NOT_RUNNING, State.ERROR, State.PENDING_ERROR):
                self._transition(State.PENDING_SHUTDOWN)
        if state in (State.NOT_RUNNING, State.ERROR, State.PENDING_ERROR):
            # after a failure the shutdown helper stops the threads; wait for it (and them), unlocked:
            # the threads need the lock to report their last state changes
            return self._join_helpers(timeout)
        return self._shutdown_threads(State.NOT_RUNNING, timeout) and self._join_helpers(timeout)

    def _join_helpers(self, timeout: float | None) -> bool:
        current = threading.current_thread()
        others = [t for t in [*self._helpers, *self._threads, *self._finished_threads] if t is not current]
        return self._join(others, timeout)

    def _join(self, threads: list[threading.Thread], timeout: float | None) -> bool:
        """Waits for the threads; True if all ended. Logs where each one still running is stuck."""
        deadline = None if timeout is None else time.monotonic() + timeout
        threads = list(dict.fromkeys(threads))  # a stopping thread is both running and finished
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        stuck = [t for t in threads if t.is_alive()]
        if stuck:
            frames = sys._current_frames()
            log.warning(
                "app %r: %d thread(s) did not stop within %ss:\n%s", self.application_id, len(stuck), timeout,
                "\n".join(f"{t.name} is at:\n{''.join(traceback.format_stack(frames[t.ident]))}"
                          for t in stuck if t.ident in frames),
            )  # fmt: skip
        return not stuck

    close = stop

    def __enter__(self) -> KafkaStreams:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_until_running(self, timeout: float = 30.0, progress: bool | None = None) -> KafkaStreams:
        """Blocks until RUNNING (handy in scripts and tests); raises if the app fails or time runs out.

        While stores restore from their changelogs a progress bar is shown (tqdm: a widget in Jupyter, text on
        a terminal) when ``progress`` is True, or by default when the session is interactive.
        """
        show = _interactive() if progress is None else progress
        deadline = time.monotonic() + timeout
        bar = None
        try:
            while time.monotonic() < deadline:
                running = self._state == State.RUNNING  # read first: RUNNING comes after the restores ended
                if show:
                    bar = self._show_restore(bar)
                if running:
                    return self
                if self._state in (State.ERROR, State.PENDING_ERROR):
                    raise StreamsError(f"app {self.application_id!r} failed: {self.error}") from self.error
                time.sleep(0.01)
        finally:
            if bar is not None:
                bar.close()
        raise TimeoutError(f"app {self.application_id!r} not RUNNING after {timeout}s (state {self._state.value})")

    def _show_restore(self, bar: Any) -> Any:
        """Creates or advances the restore progress bar from the threads' restore progress."""
        progress = [p for th in list(self._threads) for p in list(th.restore_progress.values())]
        if not progress:
            return bar
        done, total = sum(p[0] for p in progress), sum(p[1] for p in progress)
        if bar is None:
            from tqdm.auto import tqdm

            class RestoreBar(tqdm):
                monitor_interval = 0  # no tqdm monitor thread: a stopped app leaves no thread behind

            bar = RestoreBar(total=total, desc=f"{self.application_id}: restoring stores", unit="records")
        bar.total = total
        bar.update(done - bar.n)
        return bar

    def wait_until_idle(self, timeout: float = 30.0) -> KafkaStreams:
        """Blocks until every input partition has been consumed to its end (lag 0 everywhere)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._state in (State.ERROR, State.PENDING_ERROR):
                raise StreamsError(f"app {self.application_id!r} failed: {self.error}") from self.error
            if self._idle():
                return self
            time.sleep(0.01)
        raise TimeoutError(f"app {self.application_id!r} still has lag after {timeout}s: {self.lag()}")

    def _idle(self) -> bool:
        """RUNNING with every stream thread holding its tasks, and those tasks at the end of their input,
        before and after the check: a thread failing, joining or rebalancing meanwhile leaves partitions
        that no task holds, which a lag of 0 would hide."""

        def settled() -> dict[str, set[str]] | None:
            with self._lock:
                threads = list(self._threads)
                if self._state != State.RUNNING or any(t.state != ThreadState.RUNNING for t in threads):
                    return None
                return {t.name: set(t.tasks) for t in threads}

        before = settled()
        if before is None or any(self.lag().values()) or not self._all_tasks_drained():
            return False
        return settled() == before

    def _all_tasks_drained(self) -> bool:
        tasks = [t for th in list(self._threads) for t in list(th.tasks.values())]
        if not all(t.buffered() == 0 for t in tasks):
            return False
        cached = [t for t in tasks if t.has_cached_changes()]
        for task in cached:  # their results leave the record cache at a commit: ask for one now
            task.commit_requested = True
        if cached:
            return False
        # a source topic missing at the last assignment that exists now: its tasks come with the next one
        missing = {t for th in list(self._threads) for t in th.missing_topics}
        return not any(self.admin.partition_count(t) is not None for t in missing)

    # ---- threads -------------------------------------------------------------------------------

    def add_stream_thread(self) -> str:
        """Adds a stream thread (the group rebalances tasks onto it); returns its name."""
        with self._lock:
            if self._state not in (State.RUNNING, State.REBALANCING):
                raise IllegalStateError(f"add_stream_thread needs a running app (state is {self._state.value})")
            return self._start_thread().name

    def remove_stream_thread(self, timeout: float = 30.0) -> str:
        """Stops the most recently added stream thread (its tasks move to the others); returns its name."""
        with self._lock:
            if self._state not in (State.RUNNING, State.REBALANCING) or not self._threads:
                raise IllegalStateError(
                    f"remove_stream_thread needs a running app with threads (state {self._state.value})"
                )
            thread = self._threads.pop()
            if self._threads and self._state == State.RUNNING:
                # the others take over its tasks in the rebalance its leaving starts; their state
                # changes (revoked, assigned, running) bring the app back to RUNNING
                self._transition(State.REBALANCING)
        thread.shutdown()
        thread.join(timeout)
        with self._lock:
            self._finished_threads.append(thread)
        return thread.name

    @property
    def threads(self) -> list[StreamThread]:
        return list(self._threads)

    # ---- assignment, metrics (interactive queries: InteractiveQueries) ---------------------------

    def assignment(self) -> dict[str, dict[str, list[str]]]:
        """Thread name -> task id -> partitions, for this instance's active tasks."""
        return {t.name: t.assignment() for t in list(self._threads)}

    def standby_assignment(self) -> dict[str, dict[str, list[str]]]:
        """Thread name -> standby task id -> the changelog partitions it keeps warm (num_standby_replicas)."""
        return {
            t.name: {tid: sorted(map(str, sb.changelogs)) for tid, sb in sorted(dict(t.standbys).items())}
            for t in list(self._threads)
        }

    def group_assignment(self) -> dict[str, dict[str, Any]]:
        """Every instance and thread of the application: task id -> {"thread", "instance", "standby", "warmup",
        "partitions", "lags", "moved"}: standby and warm-up (KIP-441) holders, each holder's lag and the move of
        the last rebalance (memory://; on Kafka as the members last reported on the board): ``group_view``."""
        return group_view.group_assignment(self._threads, self.assignor.group_hosts)

    def lag(self) -> dict[str, int]:
        """Records not yet processed per input partition (``topic-partition`` -> count)."""
        positions: dict[TopicPartition, int] = {}
        for thread in list(self._threads):
            for task in list(thread.tasks.values()):
                for tp in list(task.queues):
                    positions[tp] = task.published.get(tp, -1)
        if not positions:
            return {}
        ends = self.admin.end_offsets(positions)
        begins = self.admin.beginning_offsets(positions)
        return {
            str(tp): max(0, ends[tp] - (pos if pos >= 0 else begins[tp])) for tp, pos in sorted(positions.items())
        }

    def metrics(self) -> dict[str, Any]:
        """Processed records, rate, latency, lag per partition, dropped records, restore progress, per
        state store the operation counts of this instance's tasks (``"stores"``), and per task its stream
        time and oldest open window (``"task-time"``)."""
        return client_metrics(self)

    def dropped_records(self, n: int = 20) -> pd.DataFrame:
        """The last ``n`` records this instance's tasks dropped for a closed window, newest first (a DataFrame:
        task, processor, topic, partition, offset, key, timestamp, window_start/end, stream_time, lateness_ms =
        stream time - (window end + grace)); each task keeps its last 1000."""
        return late_records_frame([t for th in self.threads for t in list(th.tasks.values())], n)

    def __repr__(self) -> str:
        return f"KafkaStreams({self.application_id!r}, state={self._state.value}, threads={len(self._threads)})"

    def dashboard(self, **options: Any) -> Any:
        """The live dashboard of this app (metrics, window chart, output table, topology, task assignment):
        ``kstream_nb.jupyter.widgets.Dashboard``; imports the notebook layer (ipywidgets) only when called."""
        from kstream_nb.jupyter.widgets import dashboard

        return dashboard(self, **options)
