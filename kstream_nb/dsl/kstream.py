"""``KStream``: an insert-only stream of records, with Kafka Streams' operations and pandas style."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde
from kstream_nb.dsl.functions import check_callable, takes_key
from kstream_nb.dsl.repartition import RepartitionNullKeyFilter
from kstream_nb.errors import TopologyError
from kstream_nb.processor import stream_stateless as ops
from kstream_nb.processor.sink import StreamPartitioner, WindowedStreamPartitioner
from kstream_nb.processor.topic_extractor_sink import TopicNameExtractor
from kstream_nb.topology.naming import repartition_topic

if TYPE_CHECKING:
    from kstream_nb.dsl.builder import StreamsBuilder
    from kstream_nb.dsl.grouped import KGroupedStream
    from kstream_nb.dsl.ktable import KTable


class KStream:
    """A stream of records; every operation adds a node to the builder's topology and returns a new stream.

    ``repartition_required`` is set after an operation that may change keys (map, select_key, process...),
    so that the next stateful operation first repartitions by the new key.
    """

    def __init__(
        self,
        builder: StreamsBuilder,
        node: str,
        key_serde: Any = None,
        value_serde: Any = None,
        repartition_required: bool = False,
    ) -> None:
        self._builder = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.repartition_required = repartition_required

    def _then(
        self,
        prefix: str,
        processor: Callable[[], Any],
        *,
        key_changing: bool = False,
        value_changing: bool = False,
        name: str | None = None,
        parents: Iterable[str] | None = None,
    ) -> KStream:
        """A child stream through ``processor``; like Kafka's KStreamImpl, it keeps the serdes of what the
        processor does not change (a changed key or value is written with the defaults unless given)."""
        node = name or self._builder.new_name(prefix)
        self._builder.topology.add_processor(node, processor, *(parents or [self.node]))
        return KStream(
            self._builder,
            node,
            None if key_changing else self.key_serde,
            None if value_changing else self.value_serde,
            self.repartition_required or key_changing,
        )

    # ---- stateless -----------------------------------------------------------------------------

    def filter(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """Keeps records where ``predicate(key, value)`` is true."""
        check_callable(predicate, "filter")
        return self._then("KSTREAM-FILTER", lambda: ops.KStreamFilter(predicate), name=name)

    def filter_not(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """Drops records where ``predicate(key, value)`` is true."""
        check_callable(predicate, "filter_not")
        return self._then("KSTREAM-FILTER", lambda: ops.KStreamFilter(predicate, negate=True), name=name)

    def map(self, mapper: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """``mapper(key, value) -> (new_key, new_value)``; marks the stream for repartitioning."""
        check_callable(mapper, "map")
        return self._then(
            "KSTREAM-MAP", lambda: ops.KStreamMap(mapper), key_changing=True, value_changing=True, name=name
        )

    def map_values(self, mapper: Callable[..., Any], name: str | None = None) -> KStream:
        """``mapper(value)`` or ``mapper(key, value)`` -> new value; the key is kept."""
        with_key = takes_key(mapper, "map_values")
        return self._then(
            "KSTREAM-MAPVALUES", lambda: ops.KStreamMapValues(mapper, with_key), value_changing=True, name=name
        )

    def flat_map(self, mapper: Callable[[Any, Any], Iterable[Any]], name: str | None = None) -> KStream:
        """``mapper(key, value) -> [(key, value), ...]``; marks the stream for repartitioning."""
        check_callable(mapper, "flat_map")
        return self._then(
            "KSTREAM-FLATMAP",
            lambda: ops.KStreamFlatMap(mapper),
            key_changing=True,
            value_changing=True,
            name=name,
        )

    def flat_map_values(self, mapper: Callable[..., Iterable[Any]], name: str | None = None) -> KStream:
        """``mapper(value)`` or ``mapper(key, value)`` -> several values, each a record with the same key."""
        with_key = takes_key(mapper, "flat_map_values")
        return self._then(
            "KSTREAM-FLATMAPVALUES",
            lambda: ops.KStreamFlatMapValues(mapper, with_key),
            value_changing=True,
            name=name,
        )

    def select_key(self, mapper: Any, name: str | None = None) -> KStream:
        """``mapper(key, value) -> new_key``, or pandas style a field name (``"user"``) or a column expression of
        the value (``s["user"].str.upper()``): a missing field or a null value gives a null key, as in filters;
        marks the stream for repartitioning."""
        from kstream_nb.processor import expressions as ex

        if isinstance(mapper, str):
            mapper = ex.col(mapper)
        if isinstance(mapper, ex.Expr):
            expr = mapper
            return self._then(
                "KSTREAM-KEY-SELECT", lambda: ops.KStreamExprSelectKey(expr), key_changing=True, name=name
            )
        check_callable(mapper, "select_key")
        return self._then("KSTREAM-KEY-SELECT", lambda: ops.KStreamSelectKey(mapper), key_changing=True, name=name)

    def peek(self, action: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """Calls ``action(key, value)`` for each record and passes it on."""
        check_callable(action, "peek")
        return self._then("KSTREAM-PEEK", lambda: ops.KStreamPeek(action), name=name)

    def foreach(self, action: Callable[[Any, Any], Any], name: str | None = None) -> None:
        """Calls ``action(key, value)`` for each record (terminal)."""
        check_callable(action, "foreach")
        self._then("KSTREAM-FOREACH", lambda: ops.KStreamPeek(action, forward=False), name=name)

    def split(self, name: str = "") -> BranchedKStream:
        """Routes each record to the first branch whose predicate matches (``branch``/``default_branch``)."""
        return BranchedKStream(self, name)

    def merge(self, other: KStream, name: str | None = None) -> KStream:
        """Both streams' records in processing order (no re-sorting by timestamp)."""
        merged = self._then("KSTREAM-MERGE", ops.PassThrough, name=name, parents=[self.node, other.node])
        merged.repartition_required = self.repartition_required or other.repartition_required
        if (self.key_serde, self.value_serde) != (other.key_serde, other.value_serde):
            merged.key_serde = merged.value_serde = None
        return merged

    def process(self, supplier: Callable[[], Any], stores: Iterable[Any] = (), name: str | None = None) -> KStream:
        """Runs a Processor (``supplier()`` -> Processor, e.g. the class) with access to ``stores``.

        ``stores`` are store names added with ``builder.add_state_store`` or store builders (added here).
        """
        from kstream_nb.dsl.processing import check_supplier, connect_stores

        check_supplier(supplier, "process")
        names = connect_stores(self._builder, stores)
        node = name or self._builder.new_name("KSTREAM-PROCESSOR")
        self._builder.topology.add_processor(node, supplier, self.node, stores=names)
        return KStream(self._builder, node, None, None, True)

    def process_values(
        self, supplier: Callable[[], Any], stores: Iterable[Any] = (), name: str | None = None
    ) -> KStream:
        """Runs a ``FixedKeyProcessor`` (``supplier()``): it may change values, never keys, so no repartition
        follows (Kafka's ``processValues``); ``stores`` as for ``process``."""
        from kstream_nb.dsl.processing import process_values

        return process_values(self, supplier, stores, name)

    # ---- pandas style --------------------------------------------------------------------------

    def __getitem__(self, item: Any) -> Any:
        """``s["field"]`` a column expression, ``s[expr]`` filters by it, ``s[["a", "b"]]`` projects."""
        from kstream_nb.processor import expressions as ex

        if isinstance(item, str):
            return ex.col(item)
        if isinstance(item, ex.Expr):
            return self._then("KSTREAM-FILTER", lambda: ops.KStreamExprFilter(item))
        if isinstance(item, (list, tuple)) and all(isinstance(n, str) for n in item):
            return self._then("KSTREAM-PROJECT", lambda: ops.KStreamProject(list(item)), value_changing=True)
        raise TypeError(f"KStream[...] takes a field name, a column expression or a list of names, got {item!r}")

    def assign(self, **columns: Any) -> KStream:
        """New or replaced fields of dict values: ``s.assign(total=s["price"] * s["qty"])``."""
        if not columns:
            raise TypeError("assign needs at least one name=expression")
        return self._then("KSTREAM-ASSIGN", lambda: ops.KStreamAssign(columns), value_changing=True)

    # ---- topics --------------------------------------------------------------------------------

    def to(
        self,
        topic: str | TopicNameExtractor,
        key_serde: Any = None,
        value_serde: Any = None,
        partitioner: StreamPartitioner | None = None,
        name: str | None = None,
    ) -> None:
        """Writes the stream to ``topic`` (key partitioned with murmur2 unless ``partitioner`` is given).

        ``topic`` may be a topic name extractor, ``fn(key, value, record_context) -> topic name``, choosing
        each record's topic; as in Kafka Streams those topics must exist (they are not created).
        A windowed key serde (``"windowed(10s):string"``, ``"session-windowed:string"``; a windowed aggregation of
        a stream with a key serde has one) writes Kafka Streams' windowed keys and, as Kafka, partitions by the
        key inside, so every window of a key lands in one partition. With no key serde a ``Windowed`` key is JSON.
        """
        node = name or self._builder.new_name("KSTREAM-SINK")
        key_spec = key_serde if key_serde is not None else self.key_serde
        key_serde = None if key_spec is None else serde_from(key_spec)
        if partitioner is None and isinstance(key_serde, TimeWindowedSerde | SessionWindowedSerde):
            partitioner = WindowedStreamPartitioner(key_serde)  # as Kafka's StreamSinkNode: by the inner key
        self._builder.topology.add_sink(
            node,
            topic,
            self.node,
            key_serde=key_serde,
            value_serde=value_serde if value_serde is not None else self.value_serde,
            partitioner=partitioner,
        )

    def through(
        self,
        topic: str,
        key_serde: Any = None,
        value_serde: Any = None,
        partitioner: StreamPartitioner | None = None,
    ) -> KStream:
        """Writes to a user topic (which must exist) and reads it back: a new sub-topology starts here."""
        if not isinstance(topic, str):
            raise TypeError(f"through needs a topic name, got {topic!r}")
        self.to(topic, key_serde, value_serde, partitioner)
        return self._builder.stream(
            topic,
            key_serde=key_serde if key_serde is not None else self.key_serde,
            value_serde=value_serde if value_serde is not None else self.value_serde,
        )

    def repartition(
        self,
        number_of_partitions: int | None = None,
        partitioner: StreamPartitioner | None = None,
        name: str | None = None,
        key_serde: Any = None,
        value_serde: Any = None,
    ) -> KStream:
        """Re-distributes records by key through ``<application_id>-<name>-repartition``; null-key records are
        dropped (not counted) unless a left/outer join that accepts them is downstream (KIP-962)."""
        if number_of_partitions is not None and number_of_partitions < 1:
            raise ValueError(f"number_of_partitions must be >= 1, got {number_of_partitions}")
        base = name or self._builder.new_name("KSTREAM-REPARTITION")
        return self._through_internal(base, number_of_partitions, partitioner, key_serde, value_serde)

    def _through_internal(
        self,
        base: str,
        partitions: int | None,
        partitioner: StreamPartitioner | None,
        key_serde: Any,
        value_serde: Any,
    ) -> KStream:
        topic = repartition_topic(base)
        if topic in self._builder.topology.repartition_topics:
            raise TopologyError(f"repartition topic {topic!r} already exists: give the operation another name")
        self._builder.topology.add_repartition_topic(topic, partitions)
        key_serde = key_serde if key_serde is not None else self.key_serde
        value_serde = value_serde if value_serde is not None else self.value_serde
        sink, filter_name, source = self._builder.repartition_node_names(base)
        # every repartition drops null keys (silently) unless a join accepting them is downstream (KIP-962;
        # kstream_nb.dsl.repartition)
        stream = self._then(filter_name, RepartitionNullKeyFilter(), name=filter_name)
        self._builder.topology.add_sink(
            sink,
            topic,
            stream.node,
            key_serde=key_serde,
            value_serde=value_serde,
            partitioner=partitioner,
        )
        self._builder.topology.add_source(source, topic, key_serde=key_serde, value_serde=value_serde)
        return KStream(self._builder, source, self._builder_serde(key_serde), self._builder_serde(value_serde))

    @staticmethod
    def _builder_serde(spec: Any) -> Any:
        from kstream_nb.cluster.serde_specs import serde_from

        return None if spec is None else serde_from(spec)

    def repartitioned_if_required(self, base: str | None = None) -> KStream:
        """This stream, or a repartitioned copy when an upstream operation may have changed the keys: through
        ``<base>-repartition``, by default ``<this stream's node>-repartition`` (Kafka's name for a join's), made
        once per stream and base (a stream joined twice reuses it, as Kafka's ``repartitionForJoin``, which still
        takes the three numbers of its nodes' names again)."""
        if not self.repartition_required:
            return self
        base = base or self.node
        made: dict[str, KStream] = self.__dict__.setdefault("_repartitioned", {})
        if base in made:
            self._builder.repartition_node_names(base)
        else:
            made[base] = self._through_internal(base, None, None, None, None)
        return made[base]

    # ---- stateful ------------------------------------------------------------------------------

    def group_by_key(
        self, key_serde: Any = None, value_serde: Any = None, name: str | None = None
    ) -> KGroupedStream:
        """Groups by the current key (repartitioning first if the key was changed upstream)."""
        from kstream_nb.dsl.grouped import KGroupedStream

        return KGroupedStream(self, key_serde, value_serde, name)

    def group_by(
        self,
        selector: Any,
        key_serde: Any = None,
        value_serde: Any = None,
        name: str | None = None,
    ) -> KGroupedStream:
        """Groups by ``selector(key, value)``, or by a field name or column expression of the value (as
        ``select_key``); always repartitions before aggregating."""
        return self.select_key(selector).group_by_key(key_serde, value_serde, name)

    def join(self, other: Any, joiner: Callable[[Any, Any], Any], windows: Any = None, *,
             key_selector: Callable[[Any, Any], Any] | None = None, grace: Any = None) -> KStream:  # fmt: skip
        """Inner join with a KStream (needs ``JoinWindows``), a KTable, or a GlobalKTable (``key_selector``).

        ``grace`` (stream-table joins, versioned tables only): stream records wait up to this long, then join
        the table as of their own timestamps, in timestamp order.
        """
        return self._join(other, joiner, windows, key_selector, "inner", grace)

    def left_join(self, other: Any, joiner: Callable[[Any, Any], Any], windows: Any = None, *,
                  key_selector: Callable[[Any, Any], Any] | None = None,
                  grace: Any = None) -> KStream:  # fmt: skip
        """Left join: every record of this stream, joined with the other side's match or None (``grace``: see
        ``join``)."""
        return self._join(other, joiner, windows, key_selector, "left", grace)

    def outer_join(self, other: KStream, joiner: Callable[[Any, Any], Any], windows: Any) -> KStream:
        """Outer stream-stream join: unmatched records of either side come out padded with None."""
        if not isinstance(other, KStream):
            raise TypeError("outer_join is only defined between two streams (use KTable.outer_join for tables)")
        return self._join(other, joiner, windows, None, "outer")

    def _join(self, other: Any, joiner: Callable[[Any, Any], Any], windows: Any,
              key_selector: Callable[[Any, Any], Any] | None, kind: str,
              grace: Any = None) -> KStream:  # fmt: skip
        from kstream_nb.dsl import joins
        from kstream_nb.dsl.ktable import GlobalKTable, KTable

        check_callable(joiner, f"{kind} join")
        if grace is not None and not isinstance(other, KTable):
            raise TypeError("grace applies to stream-table joins (a stream-stream join takes it in JoinWindows)")
        if isinstance(other, KStream):
            if windows is None:
                raise TypeError("a stream-stream join needs windows, e.g. ks.JoinWindows.of('5s')")
            return joins.stream_stream_join(self, other, joiner, windows, kind)
        if windows is not None:
            raise TypeError("windows apply only to stream-stream joins")
        if isinstance(other, GlobalKTable):
            selector = key_selector or (lambda k, v: k)
            return joins.stream_global_table_join(self, other, selector, joiner, kind == "left")
        if isinstance(other, KTable):
            if key_selector is not None:
                raise TypeError(
                    "key_selector applies only to GlobalKTable joins; re-key the stream with select_key"
                )
            return joins.stream_table_join(self, other, joiner, kind == "left", grace)
        raise TypeError(f"cannot join a KStream with {type(other).__name__}")

    def to_table(self, store: Any = None, name: str | None = None) -> KTable:
        """Reads the stream as a changelog: the latest value per key (null value deletes). ``store``: a store
        name, or ``ks.Stores.persistent_versioned_key_value_store(...)`` for a versioned table."""
        from kstream_nb.dsl.ktable import table_source

        # Kafka's order: the node's name, the store's, then the repartition named after the node
        node = name or self._builder.new_name("KSTREAM-TOTABLE")
        chosen = store or self._builder.new_name("KSTREAM-TOTABLE-STATE-STORE")
        stream = self.repartitioned_if_required(node)
        # as Kafka's toTable: a named store is cached; without one the table is materialized only if needed
        return table_source(self._builder, stream.node, store, chosen, stream.key_serde, stream.value_serde, node)

    def __repr__(self) -> str:
        return f"KStream({self.node})"

    def _repr_html_(self) -> str:
        """In notebooks: this stream's node, sub-topology and upstream topics in the topology built so far."""
        from kstream_nb.topology.place_html import node_place_html

        return node_place_html(self._builder.topology, self.node, "KStream")


class BranchedKStream:
    """``split()`` in progress: each ``branch`` adds a predicate; ``default_branch`` ends it."""

    def __init__(self, stream: KStream, prefix: str) -> None:
        self._stream = stream
        self._prefix = prefix
        # Kafka's names: the splitter is the split's name or KSTREAM-BRANCH-<n>, each branch <splitter><name or
        # index> (the default branch's index is 0), taking a number of the counter when it is added
        self._node = prefix or stream._builder.new_name("KSTREAM-BRANCH")
        self._predicates: list[Callable[[Any, Any], Any]] = []
        self._names: list[str] = []
        self._children: list[str] = []
        self._chains: list[Callable[[KStream], Any] | None] = []
        self._done = False

    def branch(
        self,
        predicate: Callable[[Any, Any], Any],
        name: str | None = None,
        chain: Callable[[KStream], Any] | None = None,
    ) -> BranchedKStream:
        """Records matching ``predicate(key, value)`` (and no earlier branch) go to this branch."""
        check_callable(predicate, "branch")
        self._predicates.append(predicate)
        self._names.append(self._prefix + (name or str(len(self._predicates))))
        self._children.append(self._node + (name or str(len(self._predicates))))
        self._stream._builder.new_name(self._children[-1])
        self._chains.append(chain)
        return self

    def default_branch(
        self, name: str | None = None, chain: Callable[[KStream], Any] | None = None
    ) -> dict[str, KStream]:
        """Records matching no branch go here; returns the branches by name."""
        if not self._done:
            self._children.append(self._node + (name or "0"))
            self._stream._builder.new_name(self._children[-1])
        return self._finish(self._prefix + (name or "0"), chain)

    def no_default_branch(self) -> dict[str, KStream]:
        """Records matching no branch are dropped; returns the branches by name."""
        return self._finish(None, None)

    def _finish(self, default: str | None, default_chain: Callable[[KStream], Any] | None) -> dict[str, KStream]:
        if self._done:
            raise TopologyError("this split() is already finished")
        self._done = True
        builder, stream = self._stream._builder, self._stream
        names = list(self._names) + ([default] if default else [])
        chains = [*self._chains, default_chain] if default else list(self._chains)
        children = list(self._children)
        predicates = list(self._predicates)
        child_default = children[-1] if default else None
        builder.topology.add_processor(
            self._node,
            lambda: ops.KStreamBranch(predicates, children[: len(predicates)], child_default),
            stream.node,
        )
        branch_stream = KStream(
            builder, self._node, stream.key_serde, stream.value_serde, stream.repartition_required
        )
        result: dict[str, KStream] = {}
        for branch_name, child, chain in zip(names, children, chains):
            out = branch_stream._then("", ops.PassThrough, name=child)
            if chain is not None:
                chained = chain(out)
                if isinstance(chained, KStream):
                    out = chained
            result[branch_name] = out
        return result
