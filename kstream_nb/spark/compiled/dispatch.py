"""The engine choice per sub-topology: ``engine="auto"`` compiles what compiles and replays the rest,
``"compiled"`` fails naming the operation that prevents it, ``"replay"`` replays everything."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import StreamsError
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.spark.compiled.planner import CompiledPlan, NotCompilable, StagePath, plan_subtopology
from kstream_nb.spark.compiled.stage import run_compiled
from kstream_nb.topology.topology import SubTopology, Topology

ENGINES = ("auto", "compiled", "replay")


class EngineChoice:
    """Plans every sub-topology once (``paths``: the path each took and why), then runs the compiled ones."""

    def __init__(
        self,
        engine: str,
        topology: Topology,
        subtopologies: list[SubTopology],
        cyclic: set[int],
        config: StreamsConfig,
        resolve: Callable[[str], str],
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(map(repr, ENGINES))}, got {engine!r}")
        self.engine = engine
        self.topology = topology
        self.config = config
        self.resolve = resolve
        self.plans: dict[int, CompiledPlan] = {}
        self.paths: dict[int, StagePath] = {}
        for sub in subtopologies:
            if engine == "replay":
                self.paths[sub.id] = StagePath(sub.id, "replay", 'engine="replay"')
                continue
            try:
                if sub.id in cyclic:
                    raise NotCompilable("its sub-topologies feed each other (a cycle runs to a fixpoint)")
                plan = plan_subtopology(topology, sub, config)
            except NotCompilable as e:
                self._replay(sub.id, str(e))
                continue
            self.plans[sub.id] = plan
            self.paths[sub.id] = StagePath(sub.id, "compiled", plan.describe())

    def _replay(self, sub: int, reason: str) -> None:
        if self.engine == "compiled":
            raise StreamsError(f'cannot backtest with engine="compiled": sub-topology {sub}: {reason}')
        self.paths[sub] = StagePath(sub, "replay", reason)

    def run(
        self,
        sub: SubTopology,
        frame: Any,
        counts: Mapping[str, int],
        written: set[str],
        sink_serdes: Mapping[str, tuple[Serde, Serde]],
    ) -> Any:
        """The compiled stage's output rows, or None when ``sub`` takes the replay path (its reason kept)."""
        plan = self.plans.get(sub.id)
        if plan is None:
            return None
        try:
            return run_compiled(
                plan, frame, self.topology, self.config, self.resolve, counts, written, sink_serdes
            )
        except NotCompilable as e:
            del self.plans[sub.id]
            self._replay(sub.id, f"its records: {e}")
            return None

    def explain(self) -> list[StagePath]:
        return [self.paths[i] for i in sorted(self.paths)]
