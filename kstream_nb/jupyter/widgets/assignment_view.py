"""``AssignmentView``: instances x threads x tasks: active tasks with their partitions, standby and warm-up
tasks with their lag, the moves of the last rebalance highlighted."""

from __future__ import annotations

import time
from collections import deque
from html import escape
from typing import Any

import ipywidgets as widgets

from kstream_nb.jupyter.refresher import DEFAULT_RATE_HZ, FINAL_STATES
from kstream_nb.jupyter.widgets.live import STYLE, LiveWidget
from kstream_nb.runtime.app import KafkaStreams
from kstream_nb.runtime.task_id import TaskId


class AssignmentView(LiveWidget):
    """Instances x threads x tasks, refreshed on every rebalance: active tasks (with their partitions), and
    standby and warm-up tasks (KIP-441) with their lag (changelog records the holder lacked at the last
    assignment, from ``group_assignment()``).

    Tasks whose active instance the last assignment changed (``group_assignment()["moved"]``), and tasks seen
    changing owner (instance or thread) between refreshes for ``highlight_s`` seconds, are highlighted;
    ``moves`` keeps the latest moves (task, from, to). Other instances of the same application id show their
    tasks from the group's last assignment; their standby and warm-up copies under thread "?" (the group
    view names the holding instance, not its thread).
    """

    def __init__(
        self,
        app: KafkaStreams,
        max_rate_hz: float = DEFAULT_RATE_HZ,
        highlight_s: float = 5.0,
        autostart: bool = True,
    ) -> None:
        self.highlight_s = highlight_s
        self.owners: dict[str, tuple[str, str]] = {}
        self.partitions: dict[str, list[str]] = {}
        #: (instance, thread) -> [(task, "standby" | "warmup", lag or None)]
        self.replicas: dict[tuple[str, str], list[tuple[str, str, int | None]]] = {}
        #: task -> {"from", "to"} instances: the moves of the last assignment (memory://)
        self.last_moves: dict[str, dict[str, Any]] = {}
        self.moves: deque[dict[str, Any]] = deque(maxlen=50)
        self.rebalances = 0
        self._moved_at: dict[str, float] = {}
        self.html = widgets.HTML(value=STYLE + "<i>waiting for the first assignment…</i>")
        super().__init__([self.html])
        self._init_live(app, max_rate_hz, autostart, f"kstream-tasks-{app.application_id}")

    def snapshot(self) -> tuple[dict[str, tuple[str, str]], dict[str, list[str]]]:
        """task -> (instance, thread), task -> partitions, from the app's public assignment views (also fills
        ``replicas`` and ``last_moves``)."""
        assert self.app is not None
        owners: dict[str, tuple[str, str]] = {}
        partitions: dict[str, list[str]] = {}
        local = self.app.assignment()
        group = self.app.group_assignment()
        for task, info in group.items():
            owners[task] = (str(info.get("instance", "?")), str(info.get("thread", "?")))
            partitions[task] = list(info.get("partitions", ()))
        for thread, tasks in local.items():
            for task, parts in tasks.items():
                owners[task] = (self.app.process_id, thread)
                partitions[task] = list(parts)
        self.replicas = replica_rows(group, self.app.process_id, self.app.standby_assignment())
        self.last_moves = {t: dict(info["moved"]) for t, info in group.items() if info.get("moved")}
        return owners, partitions

    def _update(self) -> None:
        assert self.app is not None
        if self.app.state in FINAL_STATES:
            owners: dict[str, tuple[str, str]] = {}
            partitions: dict[str, list[str]] = {}
            self.replicas, self.last_moves = {}, {}
        else:
            owners, partitions = self.snapshot()
        now = time.monotonic()
        if owners != self.owners:
            if owners:
                self.rebalances += 1
            for task, owner in owners.items():
                before = self.owners.get(task)
                if before is not None and before != owner:
                    self.moves.append({"task": task, "from": before, "to": owner, "at": time.time()})
                    self._moved_at[task] = now
            self.owners = owners
        self.partitions = partitions
        self.html.value = STYLE + self._render(now)

    def moved(self, now: float | None = None) -> set[str]:
        """Tasks highlighted now: moved by the last assignment, or seen moving within ``highlight_s``."""
        now = time.monotonic() if now is None else now
        return set(self.last_moves) | {t for t, at in self._moved_at.items() if now - at < self.highlight_s}

    def _render(self, now: float) -> str:
        assert self.app is not None
        moved = self.moved(now)
        by_owner: dict[tuple[str, str], list[str]] = {}
        for task, owner in self.owners.items():
            by_owner.setdefault(owner, []).append(task)
        for thread in self.app.assignment():  # threads without tasks still show
            by_owner.setdefault((self.app.process_id, thread), [])
        for owner in self.replicas:
            by_owner.setdefault(owner, [])
        rows = []
        for (instance, thread), tasks in sorted(by_owner.items()):
            chips = []
            for task in sorted(tasks, key=_task_order):
                parts = self.partitions.get(task)
                label = escape(task) + (f" [{escape(', '.join(parts))}]" if parts else "")
                move = self.last_moves.get(task)
                if move is not None:
                    label += f" \u2190 {escape(str(move['from']))}"
                cls = "ks-chip ks-moved" if task in moved else "ks-chip"
                title = (
                    f' title="moved from {escape(str(move["from"]))} to {escape(str(move["to"]))}"' if move else ""
                )
                chips.append(f'<span class="{cls}" data-task="{escape(task)}"{title}>{label}</span>')
            copies = [
                _replica_chip(task, kind, lag) for task, kind, lag in self.replicas.get((instance, thread), [])
            ]
            here = " (this instance)" if instance == self.app.process_id else ""
            rows.append(
                f"<tr><td>{escape(instance)}{here}</td><td>{escape(thread)}</td>"
                f"<td>{len(tasks)}</td><td>{''.join(chips) or '<span class=ks-null>none</span>'}</td>"
                f"<td>{''.join(copies)}</td></tr>"
            )
        head = (
            f'<div style="font:12px sans-serif;margin-bottom:3px"><b>{escape(self.app.application_id)}</b>: '
            f"state {escape(self._state_text())}, {len(self.owners)} task(s), rebalances seen {self.rebalances}"
            + (
                f", moved in the last assignment: {escape(_last_moves_text(self.last_moves))}"
                if self.last_moves
                else ""
            )
            + (f", last move: {escape(_move_text(self.moves[-1]))}" if self.moves else "")
            + "</div>"
        )
        table = (
            '<table class="ks-table ks-assignment"><thead><tr><th>instance</th><th>thread</th><th>tasks</th>'
            "<th>active tasks [partitions]</th><th>standby / warm-up tasks (lag)</th></tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table>"
        )
        return head + table

    def _show_error(self, message: str) -> None:
        self.html.value = STYLE + f'<span class="ks-pill ks-warn">{escape(message)}</span>'


def _task_order(task: str) -> tuple[int, ...]:
    try:
        return TaskId.parse(task)
    except ValueError:
        return (1 << 30,)


def _move_text(move: dict[str, Any]) -> str:
    return f"task {move['task']}: {move['from'][1]} -> {move['to'][1]}"


def _last_moves_text(moves: dict[str, dict[str, Any]]) -> str:
    return ", ".join(
        f"{t} {m['from']} -> {m['to']}" for t, m in sorted(moves.items(), key=lambda i: _task_order(i[0]))
    )


def replica_rows(
    group: dict[str, dict[str, Any]], me: str, local: dict[str, dict[str, list[str]]]
) -> dict[tuple[str, str], list[tuple[str, str, int | None]]]:
    """(instance, thread) -> [(task, "standby" | "warmup", lag)] for every standby and warm-up holder of the
    group view: this instance's copies under the thread that keeps them, other instances' under thread "?"."""
    thread_of = {task: thread for thread, tasks in local.items() for task in tasks}
    rows: dict[tuple[str, str], list[tuple[str, str, int | None]]] = {}
    for task, info in sorted(group.items(), key=lambda i: _task_order(i[0])):
        lags = info.get("lags", {})
        for kind in ("standby", "warmup"):
            for instance in info.get(kind, ()):
                thread = thread_of.get(task, "?") if str(instance) == me else "?"
                rows.setdefault((str(instance), thread), []).append((task, kind, lags.get(str(instance))))
    return rows


def _replica_chip(task: str, kind: str, lag: int | None) -> str:
    """A standby (grey) or warm-up (orange) task with its lag ("lag ?" when unknown)."""
    colour = "#e5e7eb" if kind == "standby" else "#fed7aa"
    text = f"{task} {kind} lag {'?' if lag is None else lag}"
    return (
        f'<span class="ks-chip ks-{kind}" style="background:{colour}" data-task="{escape(task)}" '
        f'data-kind="{kind}" data-lag="{"" if lag is None else lag}">{escape(text)}</span>'
    )
