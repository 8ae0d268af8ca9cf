"""``AssignmentView``: instances x threads x active tasks with their partitions, moves highlighted."""

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
    """Instances x threads x active tasks (with their partitions), refreshed on every rebalance.

    Tasks that changed owner in the last rebalance are highlighted for ``highlight_s`` seconds; ``moves``
    keeps the latest moves (task, from, to). Other instances of the same application id show their tasks
    and partitions from the group's last assignment.
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
        self.moves: deque[dict[str, Any]] = deque(maxlen=50)
        self.rebalances = 0
        self._moved_at: dict[str, float] = {}
        self.html = widgets.HTML(value=STYLE + "<i>waiting for the first assignment…</i>")
        super().__init__([self.html])
        self._init_live(app, max_rate_hz, autostart, f"kstream-tasks-{app.application_id}")

    def snapshot(self) -> tuple[dict[str, tuple[str, str]], dict[str, list[str]]]:
        """task -> (instance, thread), task -> partitions, from the app's public assignment views."""
        assert self.app is not None
        owners: dict[str, tuple[str, str]] = {}
        partitions: dict[str, list[str]] = {}
        local = self.app.assignment()
        for task, info in self.app.group_assignment().items():
            owners[task] = (str(info.get("instance", "?")), str(info.get("thread", "?")))
            partitions[task] = list(info.get("partitions", ()))
        for thread, tasks in local.items():
            for task, parts in tasks.items():
                owners[task] = (self.app.process_id, thread)
                partitions[task] = list(parts)
        return owners, partitions

    def _update(self) -> None:
        assert self.app is not None
        if self.app.state in FINAL_STATES:
            owners: dict[str, tuple[str, str]] = {}
            partitions: dict[str, list[str]] = {}
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
        """Tasks highlighted now (moved within ``highlight_s``)."""
        now = time.monotonic() if now is None else now
        return {t for t, at in self._moved_at.items() if now - at < self.highlight_s}

    def _render(self, now: float) -> str:
        assert self.app is not None
        moved = self.moved(now)
        by_owner: dict[tuple[str, str], list[str]] = {}
        for task, owner in self.owners.items():
            by_owner.setdefault(owner, []).append(task)
        for thread in self.app.assignment():  # threads without tasks still show
            by_owner.setdefault((self.app.process_id, thread), [])
        rows = []
        for (instance, thread), tasks in sorted(by_owner.items()):
            chips = []
            for task in sorted(tasks, key=_task_order):
                parts = self.partitions.get(task)
                label = escape(task) + (f" [{escape(', '.join(parts))}]" if parts else "")
                cls = "ks-chip ks-moved" if task in moved else "ks-chip"
                chips.append(f'<span class="{cls}" data-task="{escape(task)}">{label}</span>')
            here = " (this instance)" if instance == self.app.process_id else ""
            rows.append(
                f"<tr><td>{escape(instance)}{here}</td><td>{escape(thread)}</td>"
                f"<td>{len(tasks)}</td><td>{''.join(chips) or '<span class=ks-null>none</span>'}</td></tr>"
            )
        head = (
            f'<div style="font:12px sans-serif;margin-bottom:3px"><b>{escape(self.app.application_id)}</b>: '
            f"state {escape(self._state_text())}, {len(self.owners)} task(s), rebalances seen {self.rebalances}"
            + (f", last move: {escape(_move_text(self.moves[-1]))}" if self.moves else "")
            + "</div>"
        )
        table = (
            '<table class="ks-table ks-assignment"><thead><tr><th>instance</th><th>thread</th><th>tasks</th>'
            "<th>active tasks [partitions]</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
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
