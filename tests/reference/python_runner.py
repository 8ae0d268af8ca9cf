"""The Python side of the reference diff: runs a case (tests/reference/SPEC.md) on kstream_nb's
TopologyTestDriver and answers SPEC.md's result JSON.

    python -m tests.reference.python_runner < cases.jsonl > results.jsonl
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

import kstream_nb as ks
from kstream_nb.state.versioned import VersionedRecord
from tests.conformance.harness import SERDES, CaseGraph, as_dict
from tests.reference.schema import NodeInfo, window_end

CACHE_BYTES = 10 * 1024 * 1024  # Kafka's default statestore.cache.max.bytes


def driver_config(case: dict[str, Any]) -> dict[str, Any]:
    config = case.get("config") or {}
    cache = config.get("statestore.cache.max.bytes", CACHE_BYTES if config.get("cache") else 0)
    return {"statestore_cache_max_bytes": int(cache)}


def _sort_key(record: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(
        (0, "") if record.get(f) is None else (1, record[f]) for f in ("key", "window_start_ms", "window_end_ms")
    )


def _value(value: Any) -> Any:
    return value.value if isinstance(value, ks.ValueAndTimestamp | VersionedRecord) else value


def read_store(driver: ks.TopologyTestDriver, name: str, info: NodeInfo) -> list[dict[str, Any]]:
    """A named store's contents in SPEC.md's form, sorted by (key, window start, window end)."""
    store = driver.get_state_store(name)
    rows: list[dict[str, Any]] = []
    if info.store_kind == "session":
        for key, start, end, value in store.all():
            rows.append({"key": key, "window_start_ms": start, "window_end_ms": end, "value": _value(value)})
    elif info.store_kind == "window":
        assert info.window is not None
        for key, start, value in store.all():
            rows.append({
                "key": key, "window_start_ms": start, "window_end_ms": window_end(info.window, start),
                "value": _value(value), "timestamp_ms": getattr(value, "timestamp", None),
            })  # fmt: skip
    else:
        for entry in store.all():
            key, value = entry[0], entry[1]
            rows.append({"key": key, "value": _value(value), "timestamp_ms": getattr(value, "timestamp", None)})
    return sorted(rows, key=_sort_key)


def _topic_record(record: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": record.key, "value": record.value, "timestamp_ms": record.timestamp}
    if record.headers:
        out["headers"] = [
            [k, v.decode("utf-8", "replace") if isinstance(v, bytes) else v] for k, v in record.headers
        ]
    return out


def run(case: dict[str, Any]) -> dict[str, Any]:
    """The result of one case (never raises: a failure is the result's ``error``)."""
    result: dict[str, Any] = {"id": case.get("id"), "outputs": {}, "stores": {}, "dropped_records_total": 0,
                              "error": None}  # fmt: skip
    try:
        builder = ks.StreamsBuilder()
        graph = CaseGraph(case, builder, typed=True)
        driver = ks.TopologyTestDriver(builder.build(), driver_config(case))
    except Exception as e:  # the DSL (or the driver) refused the topology
        result["error"] = f"build: {type(e).__name__}: {e}"
        return result
    try:
        _pipe(case, graph, driver, result)
        result["dropped_records_total"] = driver.dropped_records_total
        _outputs(case, graph, driver, result)
        if result["error"] is None:
            for nid, store in graph.stores.items():
                result["stores"][store] = read_store(driver, store, graph.info[nid])
    except Exception as e:
        result["error"] = result["error"] or f"process: {type(e).__name__}: {e}"
    finally:
        driver.close()
    return result


def parse(value: Any, type_name: str) -> Any:
    """A JSON key or value as the Java runner reads it for ``type_name`` (a number for a string type is its JSON
    text, a string for a number type is parsed)."""
    if value is None:
        return None
    if type_name == "string":
        return value if isinstance(value, str) else orjson.dumps(value).decode()
    if type_name in ("long", "int", "integer"):
        return int(value)
    return float(value)


def _pipe(case: dict[str, Any], graph: CaseGraph, driver: ks.TopologyTestDriver, result: dict[str, Any]) -> None:
    inputs, types = {}, {}
    for n in case["topology"]:
        if n["op"] in ("stream", "table", "globalTable") and n["topic"] not in inputs:
            types[n["topic"]] = (n.get("key_type") or "string", n.get("value_type") or "string")
            key_type, value_type = types[n["topic"]]
            inputs[n["topic"]] = driver.create_input_topic(n["topic"], SERDES[key_type], SERDES[value_type])
    try:
        for step in case.get("steps") or []:
            for record in step.get("input") or []:
                ts = record.get("timestamp_ms")
                key_type, value_type = types[record["topic"]]
                key, value = parse(record.get("key"), key_type), parse(record.get("value"), value_type)
                inputs[record["topic"]].pipe_input(key, value, timestamp=ts or 0)
    except Exception as e:  # a record crashed the task
        result["error"] = f"process: {type(e).__name__}: {e}"


def _outputs(
    case: dict[str, Any], graph: CaseGraph, driver: ks.TopologyTestDriver, result: dict[str, Any]
) -> None:
    """``capture`` nodes: what reached them; ``to`` nodes: what their topic holds (what reached them when the
    keys are windowed, as the Java runner reports it)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for n in case["topology"]:
        info = graph.info[n["from"]] if n["op"] in ("capture", "to") else None
        if n["op"] == "capture" or (n["op"] == "to" and info is not None and info.windowed):
            result["outputs"][n["id"]] = [as_dict(r) for r in graph.captured[n["id"]]]
        elif n["op"] == "to":
            assert info is not None
            if n["topic"] not in topics:
                value_serde = SERDES[info.value_type] if info.value_type else None
                topic = driver.create_output_topic(n["topic"], SERDES[info.key_type], value_serde)
                topics[n["topic"]] = [_topic_record(r) for r in topic.read_records_to_list()]
            result["outputs"][n["id"]] = list(topics[n["topic"]])


def main() -> int:
    """Cases as JSON lines on stdin, one result line per case on stdout."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if line.strip():
            out.write(orjson.dumps(run(orjson.loads(line))) + b"\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
