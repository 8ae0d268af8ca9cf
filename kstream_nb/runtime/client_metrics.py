"""A client's metrics (``KafkaStreams.metrics()``): its threads' and tasks' counts summed, lag, restore
progress and per-store operation counts, as Kafka Streams' client-level metrics (``ClientMetrics``), and per
task its stream time and oldest open window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kstream_nb.runtime.dropped_records import task_times
from kstream_nb.state.changelogging import StoreMeter

if TYPE_CHECKING:
    from kstream_nb.runtime.app import KafkaStreams


def store_metrics(tasks: list[Any]) -> dict[str, dict[str, Any]]:
    """Per store name: the metering layers' counts summed over the given tasks, the scope and task count."""
    out: dict[str, dict[str, Any]] = {}
    for task in tasks:
        for name, registered in list(task.stores.items()):
            store = registered.store
            if not isinstance(store, StoreMeter):
                continue
            metrics = store.metrics()
            total = out.get(name)
            if total is None:
                out[name] = {**metrics, "tasks": 1}
                continue
            total["tasks"] += 1
            for key, value in metrics.items():
                if isinstance(value, int | float):
                    total[key] += value
    return dict(sorted(out.items()))


def client_metrics(app: KafkaStreams) -> dict[str, Any]:
    """What ``KafkaStreams.metrics()`` returns (see there)."""
    from kstream_nb.runtime.app import State

    threads = app.threads + list(app._finished_threads)
    tasks = [t for th in app.threads for t in list(th.tasks.values())]
    processed = sum(th.processed_total for th in threads)
    process_time = sum(th.process_time_s for th in threads)
    # while the broker is away, nothing that asks it (lag, topics) is measured
    unreachable = any(th.broker_unreachable_since is not None for th in app.threads)
    waiting = app.status is not None or unreachable
    status = app.status or ("broker unreachable" if unreachable else app.state.value.lower())
    return {
        "state": app.state.value,
        "status": status,
        "broker-retries": app.broker_retries,
        "threads": len(app.threads),
        "tasks": len(tasks),
        "process-total": processed,
        "process-rate": sum(th.rate for th in app.threads),
        "process-latency-avg-ms": (process_time * 1000 / processed) if processed else 0.0,
        "dropped-records-total": sum(t.dropped_total for t in tasks)
        + (app._global_stores.dropped_total if app._global_stores else 0),
        # per task: stream time and the oldest window still open (asked of the windowed processors now)
        "task-time": task_times(tasks),
        "skipped-deserialization-total": sum(t.skipped_deserialization for t in tasks),
        "skipped-production-total": sum(t.skipped_production for t in tasks),
        "commit-total": sum(th.commit_total for th in threads),
        "lag": {} if waiting else app.lag(),
        "restored-records-total": sum(th.restored_records for th in threads),
        "buffered-records": sum(t.buffered() for t in tasks),
        "buffered-records-peak": max((th.task_manager.peak_buffered for th in threads), default=0),
        "standby-tasks": sum(len(th.standbys) for th in app.threads),
        "standby-records-applied": sum(sb.applied for th in app.threads for sb in list(th.standbys.values())),
        "restore-progress": {k: v for th in threads for k, v in th.restore_progress.items()},
        "stores": store_metrics(tasks),
        "missing-source-topics": app.missing_source_topics()
        if app.state in (State.REBALANCING, State.RUNNING) and not waiting
        else [],
        "error": None if app.error is None else str(app.error),
    }
