"""Which windowed stream-stream joins on the key compile (``left.join(right, ks.merge_joiner(), JoinWindows)``),
and why not: the plan ``stream_join_run`` runs as one Spark join of the task's records with themselves.

Inner joins compile, and left/outer joins whose windows emit unmatched records at once
(``JoinWindows(eager_null_results=True)``); a left/outer join that buffers its unmatched records does not:
when a record leaves the shared buffer depends on the buffer's scan history (Kafka's tracked minimum time),
not on the record alone. Column-expression filters, ``assign`` and projections may come before a side; only
a sink after the join. The joiner must be ``ks.merge_joiner`` (a lambda is opaque to Spark).
"""

from __future__ import annotations

from dataclasses import dataclass

from kstream_nb.cluster.serdes import JsonSerde, Serde
from kstream_nb.processor.stream_stateless import PassThrough
from kstream_nb.processor.stream_stream_join import KStreamKStreamJoinSide
from kstream_nb.processor.value_joiners import MergeJoiner
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.spark.compiled.planner import (
    Assign,
    CompiledPlan,
    ExprFilter,
    NotCompilable,
    Project,
    Sink,
    Step,
    _callable_name,
    _sink,
    _step,
)
from kstream_nb.state.window_store import InMemoryWindowStore
from kstream_nb.topology.topology import ProcessorSpec, SinkSpec, SourceSpec, SubTopology, Topology

__all__ = ["JoinSide", "StreamJoinPlan", "is_stream_join", "plan_stream_join"]


@dataclass(frozen=True)
class JoinSide:
    """One input of the join: its source, serdes, window store and the other side's time range."""

    node: str
    topics: tuple[str, ...]
    key_serde: Serde
    value_serde: Serde
    store: str
    store_retention_ms: int
    before_ms: int
    after_ms: int
    #: the stateless steps between the source and the join (their records only reach the join)
    steps: tuple[Step, ...] = ()
    #: an outer side (left of a left join, both of an outer one): unmatched records joined with None
    outer: bool = False


@dataclass
class StreamJoinPlan(CompiledPlan):
    """A sub-topology of two sources joined by a windowed join (inner; left or outer with eager null results),
    written to ``sink`` (or nowhere)."""

    left: JoinSide | None = None
    right: JoinSide | None = None
    joiner: MergeJoiner | None = None
    #: before + after + grace: how far behind the other store's stream time a record is still found
    lookup_ms: int = 0
    sink: Sink | None = None

    def describe(self) -> str:
        kind = {(False, False): "", (True, False): "(left)", (True, True): "(outer)"}
        outer = (self.left is not None and self.left.outer, self.right is not None and self.right.outer)
        return "StreamStreamJoin" + kind.get(outer, "") + (" -> Sink" if self.sink is not None else "")


def is_stream_join(topology: Topology, sources: list[SourceSpec]) -> bool:
    """Whether two ``sources`` lead to the sides of a stream-stream join (the planner's dispatch)."""
    if len(sources) != 2:
        return False
    stack, seen = [s.name for s in sources], set()
    while stack:
        for child in topology.children(stack.pop()):
            spec = topology.node_specs[child]
            if isinstance(spec, ProcessorSpec) and child not in seen:
                if _made_by(spec) is KStreamKStreamJoinSide:
                    return True
                seen.add(child)
                stack.append(child)
    return False


def _side_steps(
    topology: Topology, config: StreamsConfig, sub: SubTopology, source: SourceSpec
) -> tuple[str, list[Step]]:
    """The join side ``source`` feeds and the stateless steps on the way (filters, assign, projections)."""
    key_serde = source.key_serde or config.default_key_serde
    path = CompiledPlan(
        sub.id, source.name, source.topics, key_serde, source.value_serde or config.default_value_serde
    )
    steps: list[Step] = []
    name = source.name
    while True:
        children = topology.children(name)
        if len(children) != 1:
            raise NotCompilable(f"node {name!r}: a stream that branches before a stream-stream join: not compiled")
        child = children[0]
        spec = topology.node_specs[child]
        if not isinstance(spec, ProcessorSpec):
            raise NotCompilable(f"node {child!r}: a source that does not feed the stream-stream join")
        if _made_by(spec) is KStreamKStreamJoinSide:
            return child, steps
        step = _step(spec, path, steps, topology, config)
        if not isinstance(step, ExprFilter | Assign | Project):
            raise NotCompilable(
                f"node {child!r}: {type(step).__name__} before a stream-stream join is not compiled"
            )
        steps.append(step)
        name = child


def _made_by(spec: ProcessorSpec) -> type | None:
    module = str(getattr(spec.supplier, "__module__", ""))
    return type(spec.supplier()) if module.startswith("kstream_nb.") else None


def plan_stream_join(
    topology: Topology, sub: SubTopology, config: StreamsConfig, sources: list[SourceSpec]
) -> StreamJoinPlan:
    """The join's plan; raises ``NotCompilable`` naming what the compiled path cannot translate exactly."""
    sides: dict[bool, JoinSide] = {}
    processors: list[KStreamKStreamJoinSide] = []
    joiners: list[MergeJoiner] = []
    merges: set[str] = set()
    for source in sources:
        extractor = source.timestamp_extractor or config.default_timestamp_extractor
        if not extractor.uses_record_timestamp:
            raise NotCompilable(f"source {source.name!r}: timestamp extractor {type(extractor).__name__}")
        name, steps = _side_steps(topology, config, sub, source)
        side = topology.node_specs[name].supplier()  # type: ignore[union-attr]
        assert isinstance(side, KStreamKStreamJoinSide)
        if side.buffer_store_name is not None and not side.windows.eager_null_results:
            raise NotCompilable(
                f"node {name!r}: a left or outer join: when an unmatched record leaves the buffer depends on the "
                "buffer's scan history (Kafka's tracked minimum time), not on the record alone"
            )
        joiner = side.joiner
        if not isinstance(joiner, MergeJoiner):
            raise NotCompilable(f"node {name!r}: a join with {_callable_name(joiner)}: opaque to Spark")
        store = topology.store_builders[side.this_store_name]._make()  # type: ignore[attr-defined]
        if type(store) is not InMemoryWindowStore or config.default_dsl_store != "in_memory":
            raise NotCompilable(f"node {name!r}: a join store other than the in-memory one (segments)")
        key_serde = source.key_serde or config.default_key_serde
        value_serde = source.value_serde or config.default_value_serde
        if type(value_serde) is not JsonSerde:
            raise NotCompilable(f"node {name!r}: joins values whose serde is {type(value_serde).__name__}")
        sides[side.left_side] = JoinSide(
            source.name, source.topics, key_serde, value_serde, side.this_store_name, store.retention_ms,
            side.before, side.after, tuple(steps), side.outer,
        )  # fmt: skip
        processors.append(side)
        joiners.append(joiner)
        merges.update(topology.children(name))
    left, right = sides.get(True), sides.get(False)
    if left is None or right is None or len(merges) != 1:
        raise NotCompilable("two sources feed join sides that are not one join")
    merge = merges.pop()
    spec = topology.node_specs[merge]
    if not (isinstance(spec, ProcessorSpec) and _made_by(spec) is PassThrough):
        raise NotCompilable(f"node {merge!r}: not the join's merge")
    children = topology.children(merge)
    sink = None
    if children:
        node = topology.node_specs[children[0]]
        if len(children) > 1 or not isinstance(node, SinkSpec) or topology.children(children[0]):
            raise NotCompilable(f"node {children[0]!r}: only a sink after a stream-stream join is compiled")
        sink = _sink(node, config)
    return StreamJoinPlan(
        sub.id, left.node, left.topics + right.topics, left.key_serde, left.value_serde, left=left, right=right,
        joiner=joiners[0], lookup_ms=processors[0].retention, sink=sink,
    )  # fmt: skip
