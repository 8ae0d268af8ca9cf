"""While stream threads run, CPython's generation-0 GC threshold is raised; the last to stop puts it back."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

import kstream_nb as ks
from tests.helpers import wait_for

DEFAULT = (700, 10, 10)


@pytest.fixture(autouse=True)
def cpython_default_threshold() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(*DEFAULT)
    yield
    gc.set_threshold(*before)


def _passthrough(url: str) -> ks.Topology:
    ks.produce("in", [1, 2, 3], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("in").to("out")
    return b.build()


def test_running_apps_hold_the_largest_threshold_and_the_last_to_stop_restores_cpythons(url, make_app):
    first = make_app(_passthrough(url), application_id="first").start().wait_until_running()
    assert gc.get_threshold() == (50_000, 10, 10)

    second = make_app(_passthrough(url), application_id="second", python_gc_threshold=80_000, num_stream_threads=2)
    second.start().wait_until_running()
    assert gc.get_threshold() == (80_000, 10, 10)

    assert second.stop()
    assert gc.get_threshold() == (50_000, 10, 10)
    assert first.stop()
    assert gc.get_threshold() == DEFAULT


def test_zero_leaves_the_interpreters_threshold_alone(url, make_app):
    app = make_app(_passthrough(url), python_gc_threshold=0).start().wait_until_running()
    assert gc.get_threshold() == DEFAULT
    assert app.stop()
    assert gc.get_threshold() == DEFAULT


def test_a_higher_threshold_set_by_the_user_is_not_lowered(url, make_app):
    gc.set_threshold(200_000, 20, 20)
    app = make_app(_passthrough(url)).start().wait_until_running()
    assert gc.get_threshold() == (200_000, 20, 20)
    assert app.stop()
    assert gc.get_threshold() == (200_000, 20, 20)


def test_a_threshold_the_user_changes_while_apps_run_is_kept_when_they_stop(url, make_app):
    app = make_app(_passthrough(url)).start().wait_until_running()
    gc.set_threshold(1_234, 5, 5)
    assert app.stop()
    assert gc.get_threshold() == (1_234, 5, 5)


def test_a_failed_stream_thread_puts_the_threshold_back(url, make_app):
    ks.produce("in", [1], bootstrap_servers=url)
    b = ks.StreamsBuilder()
    b.stream("in").map_values(lambda v: v / 0).to("out")
    app = make_app(b.build()).start()
    wait_for(lambda: app.state == ks.State.ERROR, timeout=10, what="the app to fail")
    wait_for(lambda: gc.get_threshold() == DEFAULT, timeout=10, what="the GC threshold to be put back")


def test_a_negative_threshold_is_rejected_naming_the_setting(url):
    with pytest.raises(ValueError, match="python_gc_threshold must be an int >= 0, got -1"):
        ks.KafkaStreams(_passthrough(url), application_id="bad", bootstrap_servers=url, python_gc_threshold=-1)
