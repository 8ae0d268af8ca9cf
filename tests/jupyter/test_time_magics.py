"""``%kstream tail --since``, ``%kstream reset NAME --to``, ``%%kstream NAME --from``: the notebook's time
commands, checked against recounts of records produced with known timestamps."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import kstream_nb as ks
from kstream_nb.jupyter import get_app, magics
from kstream_nb.time_bounds import now_ms
from tests.reset_scenarios import BASE_MS, MINUTE, produce_lines, recount

WORD_COUNT = """
words = builder.stream("lines").flat_map_values(lambda line: line.split())
words.group_by(lambda k, w: w).count(store="counts").to_stream().to("counts-out")
"""


def _cell(shell: InteractiveShell, line: str, body: str) -> None:
    result = shell.run_cell(f"%%kstream {line}\n{body}")
    if result.error_before_exec is not None:
        raise result.error_before_exec
    if result.error_in_exec is not None:
        raise result.error_in_exec


def _produce_recent(url: str) -> pd.DataFrame:
    """30 records, one every 4 minutes up to 2 minutes ago, over two partitions."""
    now = now_ms()
    frame = pd.DataFrame(
        {
            "key": [f"k{i}" for i in range(30)],
            "value": list(range(30)),
            "timestamp": [now - 2 * MINUTE - (29 - i) * 4 * MINUTE for i in range(30)],
            "partition": [i % 2 for i in range(30)],
        }
    )
    ks.produce("events", frame, url, partitions=2)
    return frame


def test_tail_since_shows_every_record_from_then_on(shell: InteractiveShell, url: str) -> None:
    written = _produce_recent(url)
    hour_ago = now_ms() - 60 * MINUTE  # the records are 4 minutes apart: none within a minute of the bound
    want = written[written["timestamp"] >= hour_ago].sort_values("timestamp")
    assert len(want) == 15  # more than the default -n 10
    got = shell.run_line_magic("kstream", f"tail events --since 1h --bootstrap {url}")
    assert got["value"].tolist() == want["value"].tolist()
    assert got["time"].tolist() == [pd.Timestamp(ts, unit="ms", tz="UTC") for ts in want["timestamp"]]
    newest = shell.run_line_magic("kstream", f"tail events --since=-1h -n 3 --bootstrap {url}")
    assert newest["value"].tolist() == want["value"].tolist()[-3:]
    iso = datetime.fromtimestamp(int(written["timestamp"].iloc[20]) / 1000, timezone.utc).isoformat()
    assert shell.run_line_magic("kstream", f"tail events --since {iso} --bootstrap {url}")[
        "value"
    ].tolist() == list(range(20, 30))
    with pytest.raises(UsageError, match="--since: cannot read 'lately'"):
        shell.run_line_magic("kstream", f"tail events --since lately --bootstrap {url}")


def test_tail_since_follow_starts_at_the_time(shell: InteractiveShell, url: str) -> None:
    written = _produce_recent(url)
    shell.run_line_magic("kstream", f"tail events --since 10m --follow -n 20 --bootstrap {url}")
    table = magics._FOLLOWERS[-1]
    ten_ago = now_ms() - 10 * MINUTE
    want = written[written["timestamp"] >= ten_ago].sort_values("timestamp", ascending=False)
    assert [row["value"] for row in table.read()] == want["value"].tolist()
    ks.produce("events", [("new", 99)], url, timestamps=[now_ms()])
    assert table.read()[0]["value"] == 99


def test_reset_to_a_time_and_start_from_a_time(shell: InteractiveShell, url: str) -> None:
    name = f"wc-{uuid.uuid4().hex[:8]}"
    lines = produce_lines(url, "lines")
    _cell(shell, f"{name} --bootstrap {url} --show none", WORD_COUNT)
    app = get_app(name).wait_until_running().wait_until_idle()
    assert dict(app.store("counts").all()) == recount(lines)
    with pytest.raises(UsageError, match=f"still running .*process {app.process_id}"):
        shell.run_line_magic("kstream", f"reset {name} --to earliest")
    shell.run_line_magic("kstream", f"stop {name}")

    t_ms = BASE_MS + 25 * MINUTE
    iso = datetime.fromtimestamp(t_ms / 1000, timezone.utc).isoformat()
    shell.run_line_magic("kstream", f"reset {name} --to {iso}")
    _cell(shell, f"{name} --bootstrap {url} --show none", WORD_COUNT)
    app = get_app(name).wait_until_running().wait_until_idle()
    assert dict(app.store("counts").all()) == recount(lines, t_ms)

    t2 = BASE_MS + 10 * MINUTE  # --from: a reset of the running cell's app to the time, then the start
    _cell(shell, f"{name} --bootstrap {url} --show none --from {t2}", WORD_COUNT)
    app = get_app(name).wait_until_running().wait_until_idle()
    assert dict(app.store("counts").all()) == recount(lines, t2)
    with pytest.raises(UsageError, match="not both"):
        _cell(shell, f"{name} --bootstrap {url} --show none --from {t2} --from-beginning", WORD_COUNT)
