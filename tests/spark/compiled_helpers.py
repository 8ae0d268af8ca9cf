"""Helpers the compiled-stage tests share."""

from __future__ import annotations

from typing import Any

import kstream_nb as ks
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.spark.compiled import NotCompilable, plan_subtopology


def planner_verdict(build: Any, **config: Any) -> str:
    """The planner's verdict on the first sub-topology of what ``build(builder)`` makes: ``compiled: <plan>``,
    or the reason it is not compiled."""
    b = ks.StreamsBuilder()
    build(b)
    topology = b.build()
    try:
        plan = plan_subtopology(
            topology, topology.subtopologies()[0], StreamsConfig.of(application_id="t", **config)
        )
        return "compiled: " + plan.describe()
    except NotCompilable as e:
        return str(e)
