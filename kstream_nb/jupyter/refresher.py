"""One background thread per dashboard that refreshes its views at a bounded rate.

Views are objects with a ``refresh(force: bool = False)`` method that read the app's public surface and
set widget traits (safe from a thread in ipykernel >= 6). The refresher never prints or displays
anything: an error in a view is kept (``errors``) and shown by the view itself, not raised.
The thread stops when ``stop()`` is called or when the app it watches reaches NOT_RUNNING/ERROR
(through the app's state listener); it refreshes once more after the app stopped, so the last state
shows.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol

from kstream_nb.runtime.app import KafkaStreams, State

FINAL_STATES = (State.NOT_RUNNING, State.ERROR)
DEFAULT_RATE_HZ = 4.0

_LIVE: set[Refresher] = set()
_LIVE_LOCK = threading.Lock()


class View(Protocol):
    def refresh(self, force: bool = False) -> None: ...


class Throttle:
    """Lets an action through at most ``max_rate_hz`` times a second (``ready()`` says when)."""

    def __init__(self, max_rate_hz: float = DEFAULT_RATE_HZ) -> None:
        if max_rate_hz <= 0:
            raise ValueError(f"max_rate_hz must be > 0, got {max_rate_hz}")
        self.interval = 1.0 / max_rate_hz
        self._last: float | None = None

    def ready(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        if self._last is not None and now - self._last < self.interval:
            return False
        self._last = now
        return True


class Refresher:
    """Calls ``refresh()`` on each view about ``max_rate_hz`` times a second, from one daemon thread."""

    def __init__(
        self,
        views: Iterable[View] = (),
        app: KafkaStreams | None = None,
        max_rate_hz: float = DEFAULT_RATE_HZ,
        name: str = "kstream-refresher",
    ) -> None:
        if max_rate_hz <= 0:
            raise ValueError(f"max_rate_hz must be > 0, got {max_rate_hz}")
        self.views: list[View] = list(views)
        self.app = app
        self.interval = 1.0 / max_rate_hz
        self.name = name
        self.ticks = 0
        self.errors: deque[str] = deque(maxlen=5)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if app is not None:
            app.set_state_listener(self._on_state)

    def _on_state(self, new: State, old: State) -> None:
        # called from whichever thread changed the app's state: only signal, never join here
        if new in FINAL_STATES:
            self._stop.set()

    def add(self, view: View) -> None:
        self.views.append(view)

    def start(self) -> Refresher:
        """Starts the thread (once); if the app has already stopped, refreshes once and does not start."""
        if self._thread is not None:
            return self
        if self.app is not None and self.app.state in FINAL_STATES:
            self.refresh_once(force=True)
            return self
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        with _LIVE_LOCK:
            _LIVE.add(self)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while True:
                self.refresh_once()
                if self._stop.wait(self.interval):
                    self.refresh_once(force=True)
                    return
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(self)

    def refresh_once(self, force: bool = False) -> None:
        self.ticks += 1
        for view in list(self.views):
            try:
                view.refresh(force=force)
            except Exception:
                self.errors.append(traceback.format_exc(limit=3))

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stops the thread and waits for it; True once it has ended."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        return not self.alive

    def __repr__(self) -> str:
        return f"Refresher({self.name!r}, alive={self.alive}, views={len(self.views)}, ticks={self.ticks})"


def live_refreshers() -> list[Refresher]:
    """Refresher threads still running in this process."""
    with _LIVE_LOCK:
        return list(_LIVE)


def stop_all_refreshers(timeout: float = 5.0) -> None:
    for refresher in live_refreshers():
        refresher.stop(timeout)


def describe_error(error: Any) -> str:
    return f"{type(error).__name__}: {error}"
