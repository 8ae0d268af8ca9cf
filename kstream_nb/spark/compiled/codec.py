"""Keys and values as the sinks' serdes write them, with Kafka's partition: Arrow batch UDFs.

Spark's ``to_json`` is not the runtime's serde: it writes doubles as Java does (``1.0E7``; orjson ``10000000.0``)
and structs in schema order, not a value's own field order; Spark's ``hash`` is murmur3, not Kafka's murmur2.
So the bytes are made by the sinks' own ``Serde`` objects, and the partition by ``default_partition``, in
Arrow UDFs over whole batches: keys once per distinct key of a batch, values once per record (decode, apply
the assignments Spark computed, encode). The values' fields themselves are computed by Catalyst.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from kstream_nb.cluster.serdes import Serde

KEY_TYPE = "bytes binary, partition int, text string"
VALUE_TYPE = "bytes binary, text string"
#: a value operation the UDF replays on the decoded dict: ("assign", {field: struct field}) or ("project", names)
ValueOp = tuple[str, Any]


def recode_keys(decode: Serde, encode: Serde, topics: tuple[str, str], partitions: int, text: bool) -> Any:
    """A UDF of raw key bytes -> (bytes ``encode`` writes for the key ``decode`` reads, the partition murmur2
    picks among ``partitions`` (null for a null key: round robin, decided in Spark), the key as JSON text)."""
    source, target = topics

    def recode(raw: pa.Array) -> pa.Array:
        return written_keys(raw, lambda key: decode.deserialize(source, key), encode, target, partitions, text)

    return scalar_udf(recode, KEY_TYPE)


def written_keys(
    keys: pa.Array, read: Callable[[Any], Any], encode: Serde, topic: str, partitions: int, text: bool
) -> pa.Array:
    """The ``KEY_TYPE`` struct of each of ``keys`` (once per distinct key): the bytes ``encode`` writes for
    ``read(key)``, the partition murmur2 picks among ``partitions``, its JSON text; all null for a null key."""
    import pyarrow.compute as pc

    from kstream_nb.cluster.partitioner import default_partition
    from kstream_nb.spark.replay import to_text

    distinct = pc.unique(keys)
    out_bytes: list[bytes | None] = []
    out_partition: list[int | None] = []
    out_text: list[str | None] = []
    for key in distinct.to_pylist():
        obj = None if key is None else read(key)
        data = None if key is None else encode.serialize(topic, obj)
        out_bytes.append(data)
        out_partition.append(None if data is None else default_partition(data, partitions))
        out_text.append(to_text(obj) if text else None)
    return pc.take(key_struct(out_bytes, out_partition, out_text), pc.index_in(keys, value_set=distinct))


def recode_values(
    decode: Serde, encode: Serde, topics: tuple[str, str], ops: Sequence[ValueOp], text: bool
) -> Any:
    """A UDF of (raw value bytes, struct of assigned fields) -> (bytes ``encode`` writes, JSON text): the value
    decoded, then ``ops`` replayed in order (assign: fields set from the struct, as ``assign_record``;
    project: exactly the named fields, as ``project_record``); a null value stays null, as live."""
    source, target = topics

    def recode(raw: pa.Array, assigned: pa.Array) -> pa.Array:

        from kstream_nb.spark.replay import to_text

        rows = assigned.to_pylist()
        out_bytes: list[bytes | None] = []
        out_text: list[str | None] = []
        for data, fields in zip(raw.to_pylist(), rows):
            value = replay_ops(None if data is None else decode.deserialize(source, data), ops, fields)
            out_bytes.append(None if value is None else encode.serialize(target, value))
            out_text.append(to_text(value) if text else None)
        return value_struct(out_bytes, out_text)

    return scalar_udf(recode, VALUE_TYPE)


def replay_ops(value: Any, ops: Sequence[ValueOp], fields: Mapping[str, Any] | None) -> Any:
    """A decoded value after the stateless ``ops`` (assign: fields set from Spark's assigned ``fields``, as
    ``assign_record``; project: exactly the named fields, as ``project_record``); None stays None, as live."""
    if value is None:
        return None
    for kind, arg in ops:
        if kind == "assign":
            value = dict(value)
            for name, column in arg.items():
                value[name] = (fields or {})[column]
        else:
            value = {name: value.get(name) for name in arg}
    return value


def store_entry(key: Any) -> bytes | None:
    """Bytes equal exactly when two keys are one entry of a store's dict (the runtime's stores are keyed by the
    key objects: ``1``, ``1.0`` and ``True`` are one key; ``"1"`` another); None for a None key."""
    if key is None:
        return None
    if isinstance(key, bool | int) or (isinstance(key, float) and key.is_integer()):
        return b"i" + str(int(key)).encode()
    if isinstance(key, float):
        return b"f" + repr(key).encode()
    if isinstance(key, str):
        return b"s" + key.encode("utf-8", "surrogatepass")
    from pyspark import cloudpickle

    return b"p" + cloudpickle.dumps(key)


def encode_objects(build: Callable[[Any], Any], encode: Serde | None, topic: str, text: bool) -> Any:
    """A UDF of a struct column -> (bytes, text): each row made into the Python value ``build(row dict)``
    (a null row: None), then written with ``encode`` (None: pickled, for store rows; a null row: no row)."""

    def run(rows: pa.Array) -> pa.Array:
        from pyspark import cloudpickle

        from kstream_nb.spark.replay import to_text

        out_bytes: list[bytes | None] = []
        out_text: list[str | None] = []
        for row in rows.to_pylist():
            value = None if row is None else build(row)
            if encode is None:
                out_bytes.append(None if row is None else cloudpickle.dumps(value))
            else:
                out_bytes.append(None if value is None else encode.serialize(topic, value))
            out_text.append(to_text(value) if text else None)
        return value_struct(out_bytes, out_text)

    return scalar_udf(run, VALUE_TYPE)


def pickle_keys(decode: Serde, topic: str) -> Any:
    """A UDF of raw key bytes -> (the decoded key pickled, as store rows hold it; its JSON text)."""

    def run(raw: pa.Array) -> pa.Array:
        from pyspark import cloudpickle

        from kstream_nb.spark.replay import to_text

        keys = [None if k is None else decode.deserialize(topic, k) for k in raw.to_pylist()]
        return value_struct([cloudpickle.dumps(k) for k in keys], [to_text(k) for k in keys])

    return scalar_udf(run, VALUE_TYPE)


#: above this many distinct keys, the key UDFs run per record in Spark instead of once per key in the driver
DRIVER_KEYS = 200_000


def with_key_codecs(frame: Any, codecs: Mapping[str, tuple[Any, str | None]]) -> Any:
    """``frame`` (rows with non-null keys) with one column per codec: name -> (a key UDF of this module, the
    field of its result to keep, or None for all of it), applied to ``key``.

    An aggregation's records outnumber its keys: when there are at most ``DRIVER_KEYS`` distinct keys, the
    codecs run once per key, in the driver, and the table of their results is broadcast to the records."""
    from pyspark.sql import functions as F

    keys = [row[0] for row in frame.select("key").distinct().limit(DRIVER_KEYS + 1).collect()]
    if len(keys) > DRIVER_KEYS:
        applied = [_field(udf(F.col("key")), part).alias(name) for name, (udf, part) in codecs.items()]
        return frame.select("*", *applied)
    raw = pa.array(keys, pa.binary())
    columns = {"key": raw}
    for name, (udf, part) in codecs.items():
        result = udf.func(raw)
        columns[name] = result if part is None else result.field(part)
    table = frame.sparkSession.createDataFrame(pa.Table.from_pydict(columns))
    return frame.join(F.broadcast(table), "key")


def _field(column: Any, part: str | None) -> Any:
    return column if part is None else column[part]


def scalar_udf(fn: Callable[..., Any], ddl: str) -> Any:
    """A scalar Arrow UDF: Arrow arrays in, an Arrow array out, a batch at a time."""
    from pyspark.sql import functions as F

    return F.arrow_udf(fn, ddl)  # type: ignore[call-overload]


def recode_windowed_keys(
    decode: Serde, encode: Serde | None, topics: tuple[str, str], partitions: int, partitioner: Any, text: bool
) -> Any:
    """``recode_keys`` for a windowed table's keys: a UDF of (raw key bytes, window start, end) -> the bytes
    ``encode`` writes for ``Windowed(key, start, end)``, its partition (``partitioner``: a windowed key's,
    by the key inside; else murmur2 of the bytes), its JSON text; or with ``encode`` None, the pickled key."""
    source, target = topics

    def recode(raw: pa.Array, starts: pa.Array, ends: pa.Array) -> pa.Array:
        from pyspark import cloudpickle

        from kstream_nb.cluster.partitioner import default_partition
        from kstream_nb.processor.windows import Windowed
        from kstream_nb.spark.replay import to_text

        decoded: dict[bytes, Any] = {}
        out_bytes: list[bytes | None] = []
        out_partition: list[int | None] = []
        out_text: list[str | None] = []
        for data, start, end in zip(raw.to_pylist(), starts.to_pylist(), ends.to_pylist()):
            if data not in decoded:
                decoded[data] = decode.deserialize(source, data)
            key = Windowed(decoded[data], start, end)
            if encode is None:
                out_bytes.append(cloudpickle.dumps(key))
                out_partition.append(None)
            else:
                written = encode.serialize(target, key)
                out_bytes.append(written)
                if partitioner is not None:
                    out_partition.append(partitioner.partition(target, key, partitions))
                else:
                    out_partition.append(None if written is None else default_partition(written, partitions))
            out_text.append(to_text(key) if text else None)
        return key_struct(out_bytes, out_partition, out_text)

    return scalar_udf(recode, KEY_TYPE)


def key_struct(data: list[bytes | None], partitions: list[int | None], texts: list[str | None]) -> pa.Array:
    """The ``KEY_TYPE`` struct array of key bytes, partitions and texts."""
    return pa.StructArray.from_arrays(
        [pa.array(data, pa.binary()), pa.array(partitions, pa.int32()), pa.array(texts, pa.string())],
        names=["bytes", "partition", "text"],
    )


def value_struct(data: list[bytes | None], texts: list[str | None]) -> pa.Array:
    """The ``VALUE_TYPE`` struct array of bytes and texts."""
    return pa.StructArray.from_arrays(
        [pa.array(data, pa.binary()), pa.array(texts, pa.string())], names=["bytes", "text"]
    )
