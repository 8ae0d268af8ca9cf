"""Stateless KStream processors: filter, map, flat_map, peek, branch, merge, column expressions.

Each one-record-at-a-time built-in is written once, as ``fuse``: a closure over the key and value that
calls its children's entries directly (see ``ProcessorNode.entry``, which also names the failing node in
errors); ``FusedProcessor.process`` runs it on a Record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kstream_nb.processor.api import Processor, Record
from kstream_nb.processor.batch import RecordBatch
from kstream_nb.processor.node import Entry, FusedProcessor, NodeContext


class _Forwarding(FusedProcessor):
    """Base of stateless built-ins: they keep timestamps and headers; ``forward`` goes to the children."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.forward = context.forward
        self.forward_batch = context.forward_batch


class PassThrough(_Forwarding):
    """Forwards every record unchanged (sources, merge)."""

    def fuse(self, downstream: Entry) -> Entry:
        return downstream

    def process_batch(self, batch: RecordBatch) -> None:
        self.forward_batch(batch)


class KStreamFilter(_Forwarding):
    """Keeps records where ``predicate(key, value)`` is true (false with ``negate``: filter_not)."""

    def __init__(self, predicate: Callable[[Any, Any], Any], negate: bool = False) -> None:
        self.predicate = predicate
        self.negate = negate

    def fuse(self, downstream: Entry) -> Entry:
        predicate = self.predicate
        if self.negate:

            def filter_not(key: Any, value: Any) -> None:
                if not predicate(key, value):
                    downstream(key, value)

            return filter_not

        def filter_(key: Any, value: Any) -> None:
            if predicate(key, value):
                downstream(key, value)

        return filter_


class KStreamMap(_Forwarding):
    """Replaces key and value with ``mapper(key, value) -> (key, value)``."""

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def fuse(self, downstream: Entry) -> Entry:
        mapper = self.mapper

        def map_(key: Any, value: Any) -> None:
            downstream(*_pair(mapper(key, value), "map"))

        return map_


class KStreamSelectKey(_Forwarding):
    """Replaces the key with ``mapper(key, value)``."""

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def fuse(self, downstream: Entry) -> Entry:
        mapper = self.mapper

        def select_key(key: Any, value: Any) -> None:
            downstream(mapper(key, value), value)

        return select_key


class KStreamExprSelectKey(_Forwarding):
    """Replaces the key with a column expression of the value (``select_key("user")``): evaluated as filters
    and ``assign`` evaluate it (a missing field or a null value reads as null)."""

    def __init__(self, expr: Any) -> None:
        self.expr = expr
        self._record = expr.compile_record()

    def fuse(self, downstream: Entry) -> Entry:
        key_of = self._record

        def expr_select_key(key: Any, value: Any) -> None:
            downstream(key_of(value), value)

        return expr_select_key


class KStreamMapValues(_Forwarding):
    """Replaces the value with ``mapper(value)`` (or ``mapper(key, value)`` with ``with_key``)."""

    def __init__(self, mapper: Callable[..., Any], with_key: bool = False) -> None:
        self.mapper = mapper
        self.with_key = with_key

    def fuse(self, downstream: Entry) -> Entry:
        mapper = self.mapper
        if self.with_key:

            def map_values_with_key(key: Any, value: Any) -> None:
                downstream(key, mapper(key, value))

            return map_values_with_key

        def map_values(key: Any, value: Any) -> None:
            downstream(key, mapper(value))

        return map_values


class KStreamFlatMap(_Forwarding):
    """Replaces each record with the ``(key, value)`` pairs of ``mapper(key, value)``."""

    def __init__(self, mapper: Callable[[Any, Any], Iterable[Any]]) -> None:
        self.mapper = mapper

    def fuse(self, downstream: Entry) -> Entry:
        mapper = self.mapper

        def flat_map(key: Any, value: Any) -> None:
            for pair in _iterable(mapper(key, value), "flat_map"):
                downstream(*_pair(pair, "flat_map"))

        return flat_map


class KStreamFlatMapValues(_Forwarding):
    """Replaces each record with one record per value of ``mapper(value)``, keeping the key."""

    def __init__(self, mapper: Callable[..., Iterable[Any]], with_key: bool = False) -> None:
        self.mapper = mapper
        self.with_key = with_key

    def fuse(self, downstream: Entry) -> Entry:
        mapper, with_key = self.mapper, self.with_key

        def flat_map_values(key: Any, value: Any) -> None:
            for each in _iterable(mapper(key, value) if with_key else mapper(value), "flat_map_values"):
                downstream(key, each)

        return flat_map_values


class KStreamPeek(_Forwarding):
    """Calls ``action(key, value)`` and forwards the record (``forward=False``: foreach, terminal)."""

    def __init__(self, action: Callable[[Any, Any], Any], forward: bool = True) -> None:
        self.action = action
        self.forwards = forward

    def fuse(self, downstream: Entry) -> Entry:
        action, forwards = self.action, self.forwards

        def peek(key: Any, value: Any) -> None:
            action(key, value)
            if forwards:
                downstream(key, value)

        return peek


class KStreamBranch(Processor):
    """Sends each record to the first branch whose predicate matches, else to the default branch."""

    context: NodeContext

    def __init__(
        self,
        predicates: Sequence[Callable[[Any, Any], Any]],
        children: Sequence[str],
        default_child: str | None,
    ) -> None:
        self.branches = list(zip(predicates, children))
        self.default_child = default_child

    def init(self, context: Any) -> None:
        super().init(context)
        self.forward = context.forward  # routes by child name

    def process(self, record: Record) -> None:
        for predicate, child in self.branches:
            if predicate(record.key, record.value):
                self.forward(record, child)
                return
        if self.default_child is not None:
            self.forward(record, self.default_child)


class KStreamExprFilter(_Forwarding):
    """Keeps records where a column expression is true; works on whole batches."""

    def __init__(self, expr: Any) -> None:
        from kstream_nb.processor.expressions import frames as expressions

        self.expr = expr
        self._batch = expressions.evaluate_predicate_batch
        self._record = expressions.compile_predicate(expr)

    def fuse(self, downstream: Entry) -> Entry:
        predicate = self._record

        def expr_filter(key: Any, value: Any) -> None:
            if predicate(value):
                downstream(key, value)

        return expr_filter

    def process_batch(self, batch: RecordBatch) -> None:
        mask = self._batch(self.expr, batch.values)
        if mask.all():
            self.forward_batch(batch)
        elif mask.any():
            self.forward_batch(batch.take(mask))


class KStreamAssign(_Forwarding):
    """Adds or replaces fields of dict values with column expressions (pandas ``assign``)."""

    def __init__(self, assignments: Mapping[str, Any]) -> None:
        from kstream_nb.processor.expressions import frames as expressions

        self.assignments = dict(assignments)
        self._batch = expressions.assign_batch
        self._record = expressions.assign_record

    def fuse(self, downstream: Entry) -> Entry:
        return _fuse_value_op(self._record, self.assignments, downstream)

    def process_batch(self, batch: RecordBatch) -> None:
        self.forward_batch(batch.with_values(self._batch(batch.values, self.assignments)))


class KStreamProject(_Forwarding):
    """Keeps only the named fields of dict values (pandas ``df[["a", "b"]]``)."""

    def __init__(self, names: Sequence[str]) -> None:
        from kstream_nb.processor.expressions import frames as expressions

        self.names = list(names)
        self._batch = expressions.project_batch
        self._record = expressions.project_record

    def fuse(self, downstream: Entry) -> Entry:
        return _fuse_value_op(self._record, self.names, downstream)

    def process_batch(self, batch: RecordBatch) -> None:
        self.forward_batch(batch.with_values(self._batch(batch.values, self.names)))


def _fuse_value_op(op: Callable[[Any, Any], Any], arg: Any, downstream: Entry) -> Entry:
    """The fused form of ``value -> op(value, arg)`` for non-null values (assign, project)."""

    def value_op(key: Any, value: Any) -> None:
        downstream(key, None if value is None else op(value, arg))

    return value_op


def _pair(result: Any, op: str) -> tuple[Any, Any]:
    try:
        key, value = result
    except (TypeError, ValueError):
        raise TypeError(f"{op} must return a (key, value) pair, got {result!r}") from None
    return key, value


def _iterable(result: Any, op: str) -> Iterable[Any]:
    if result is None or isinstance(result, (str, bytes, dict)):
        raise TypeError(f"{op} must return an iterable of results (e.g. a list), got {result!r}")
    return result
