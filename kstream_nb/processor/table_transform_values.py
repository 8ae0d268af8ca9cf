"""``KTable.transform_values``: a stateful value transformer over a table (Kafka's ``KTableTransformValues``).

As in Kafka Streams:

* ``transform(key, value)`` is called for every update, deletes too (``value`` is None: the transformer
  decides what a delete becomes); the key is read-only;
* the transformer's context can reach stores and schedule punctuators but cannot forward (Kafka's
  ``ForwardingDisabledProcessorContext``): the result is what ``transform`` returns;
* materialized (``store=``), the node writes its results to the store itself and takes a row's old value
  from it; otherwise the old value of an update is the transformer applied to the parent's old value, and
  only when a downstream operation uses old values (Kafka's ``sendOldValues``: group_by, joins, suppress...;
  not ``to_stream``), so a stateful transformer is called once per update unless one does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstream_nb.errors import StreamsError
from kstream_nb.processor.api import Change, DelegatingContext, Processor, ProcessorContext, Record
from kstream_nb.processor.table_ops import (
    KTableFilter,
    KTableMapValues,
    KTableMaterialize,
    KTableToStream,
    timestamped_tuple_forwarder,
)
from kstream_nb.state.timestamped import ValueAndTimestamp

if TYPE_CHECKING:
    pass


class ValueTransformerWithKey(ABC):
    """Kafka's ``ValueTransformerWithKey``: ``init`` once per task, ``transform`` per update, ``close``."""

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        """Keeps the context (stores, punctuation; forwarding is not allowed); override and call super."""
        self.context = context

    @abstractmethod
    def transform(self, read_only_key: Any, value: Any) -> Any:
        """The new value for ``value`` (None for a delete) of the row ``read_only_key``."""

    def close(self) -> None:
        """Releases what ``init`` acquired; stores are closed by the runtime."""


ValueTransformerWithKeySupplier = Callable[[], Any]


class ForwardingDisabledProcessorContext(DelegatingContext):
    """The node's context without ``forward``: a value transformer returns its result instead."""

    def forward(self, record: Record, child_name: str | None = None) -> None:
        raise StreamsError(
            "forward() is not supported from a value transformer's context (transform_values): the framework "
            "must keep the key, so return the new value from transform() instead"
        )


#: table processors that pass a change's old value on to their children (whether it is needed is theirs)
_PASS_OLD = (KTableFilter, KTableMapValues, KTableMaterialize)


def old_values_needed(children: Any) -> bool:
    """Whether a downstream node uses old values (unknown nodes are assumed to: Kafka's ``sendOldValues``)."""
    if children is None:
        return True
    for child in children:
        processor = child.processor
        if isinstance(processor, KTableToStream):
            continue
        if isinstance(processor, (*_PASS_OLD, KTableTransformValues)):
            if old_values_needed(child.children):
                return True
            continue
        return True
    return False


class KTableTransformValues(Processor):
    """Applies a value transformer to each update of a table; writes the results to ``store_name`` if given."""

    def __init__(self, supplier: ValueTransformerWithKeySupplier, store_name: str | None = None) -> None:
        self.transformer = supplier()
        if not callable(getattr(self.transformer, "transform", None)):
            raise TypeError(
                f"transform_values: the supplier returned {self.transformer!r}, not a ValueTransformerWithKey "
                "(an object with transform(key, value))"
            )
        self.store_name = store_name
        self.send_old_values = True

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.transformer.init(ForwardingDisabledProcessorContext(context))
        if self.store_name is not None:
            self.store: Any = context.get_state_store(self.store_name)
            self.forward_now = timestamped_tuple_forwarder(self.store, context)
        else:
            # the node's children (a NodeContext's): is an old value ever used downstream?
            self.send_old_values = old_values_needed(getattr(context, "_children", None))

    def process(self, record: Record) -> None:
        key, change = record.key, record.value
        new = self.transformer.transform(key, change.new_value)
        if self.store_name is None:
            old = self.transformer.transform(key, change.old_value) if self.send_old_values else None
            # (an out-of-order update of a versioned table stays one: Kafka keeps Change.isLatest)
            self.context.forward(record.with_value(type(change)(new, old)))
            return
        previous = self.store.get(key)
        self.store.put(key, None if new is None else ValueAndTimestamp(new, record.timestamp))
        if self.forward_now:
            self.context.forward(record.with_value(Change(new, None if previous is None else previous.value)))

    def close(self) -> None:
        self.transformer.close()
