"""Helpers the compiled-stage tests share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

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


def live_run(
    app: ks.KafkaStreams, phases: Iterable[Callable[[], object]], stores: list[str]
) -> tuple[dict[str, pd.DataFrame], int]:
    """The live ``app`` run phase by phase (each phase produces records, then the app goes idle): its final
    ``stores`` and its dropped-record count."""
    try:
        app.start().wait_until_running(60)
        for phase in phases:
            phase()
            app.wait_until_idle(timeout=60)
        final = {name: app.store(name).to_pandas() for name in stores}
        dropped = int(app.metrics()["dropped-records-total"])
    finally:
        app.stop()
    return final, dropped
