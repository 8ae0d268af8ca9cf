"""State written when keys were JSON (``b'"apple"'``) is taken up by the String-key default: changelogs restore,
and RocksDB stores on disk in the old format are wiped and restored from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rocksdict import Options, Rdict

import kstream_nb as ks


def _counting_app(url: str, state_dir: Path, dsl_store: str) -> ks.KafkaStreams:
    b = ks.StreamsBuilder()
    b.stream("words").group_by_key().count(store="counts").to_stream().to("counts-out")
    return ks.KafkaStreams(
        b.build(),
        application_id="app",
        bootstrap_servers=url,
        state_dir=str(state_dir),
        default_dsl_store=dsl_store,
        commit_interval_ms=100,
    )


def _old_changelog(url: str) -> None:
    """What the count's changelog held when keys were JSON: apple counted 3 times."""
    ks.produce("app-counts-changelog", [("apple", 3)], bootstrap_servers=url, key_serde="json", timestamps=5)


@pytest.mark.parametrize("dsl_store", ["in_memory", "rocksdb"])
def test_a_changelog_with_json_keys_restores(tmp_path: Path, dsl_store: str) -> None:
    url = f"memory://upgrade-{dsl_store}"
    _old_changelog(url)
    ks.produce("words", [("apple", "x")], bootstrap_servers=url, timestamps=10)
    app = _counting_app(url, tmp_path, dsl_store)
    try:
        app.start().wait_until_running(30).wait_until_idle(30)
        assert app.store("counts").all() == [("apple", 4)]
    finally:
        assert app.stop(timeout=10)
    assert ks.read_topic("counts-out", bootstrap_servers=url)["value"].tolist() == [4]


def test_rocksdb_stores_on_disk_in_the_old_format_are_wiped_and_restored(tmp_path: Path) -> None:
    url = "memory://upgrade-on-disk"
    _old_changelog(url)
    # the task's directory as the previous version left it: its store holds the JSON key, and its checkpoint
    # says the store is up to date with the changelog, so nothing would be restored
    task_dir = tmp_path / "app" / "0_0"
    old = Rdict(str(task_dir / "rocksdb" / "counts"), options=Options(raw_mode=True))
    old[b'"apple"'] = b"stale"
    old.close()
    checkpoint = {"version": 1, "offsets": [["app-counts-changelog", 0, 1]]}
    (task_dir / ".checkpoint").write_text(json.dumps(checkpoint))
    ks.produce("words", [("apple", "x")], bootstrap_servers=url, timestamps=10)
    app = _counting_app(url, tmp_path, "rocksdb")
    try:
        app.start().wait_until_running(30).wait_until_idle(30)
        assert app.store("counts").all() == [("apple", 4)]
    finally:
        assert app.stop(timeout=10)
    assert ks.read_topic("counts-out", bootstrap_servers=url)["value"].tolist() == [4]
    assert (task_dir / "rocksdb" / ".format").read_text() == "2"
