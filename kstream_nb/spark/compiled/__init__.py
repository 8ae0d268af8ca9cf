"""The compiled backtest path: sub-topologies of column expressions and built-in aggregations as Spark
DataFrame plans (Catalyst, no Python per record), with the live run's results.

``planner`` decides per sub-topology (or names the operation that prevents it), ``ordering`` gives a task's
processing order and stream time, ``values`` reads JSON values with the runtime's types, ``stateless`` and
``aggregate`` translate the steps, ``codec`` writes keys and values with the sinks' serdes and picks
partitions by murmur2, ``stage`` assembles one stage's rows, ``dispatch`` chooses the engine.
"""

from kstream_nb.spark.compiled.dispatch import ENGINES, EngineChoice
from kstream_nb.spark.compiled.planner import NotCompilable, StagePath, plan_subtopology

__all__ = ["ENGINES", "EngineChoice", "NotCompilable", "StagePath", "plan_subtopology"]
