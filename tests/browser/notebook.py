"""The small notebook the browser test opens in JupyterLab: a click generator feeding one ``%%kstream`` app
whose dashboard shows every widget (metrics, window chart, join table, topology graph, task assignment).

The app counts clicks per user in 1 s tumbling windows (the chart) and left-joins the clicks with a users
table (the join table; two of the six users have no row, so their results are null-padded). The last cell
waits for the chart's first update, then adds a stream thread so the assignment view visibly changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat

KERNEL_NAME = "kstream-browser-test"
APP = "live"

SETUP = """\
%load_ext kstream_nb
import threading
import time

import kstream_nb as ks
from kstream_nb.jupyter import get_app, get_dashboard, wait_until

SERVERS = "memory://browser-test"
USERS = [f"user-{i}" for i in range(6)]
ks.produce("users", [ks.Record(u, {"name": u.upper(), "tier": i % 3}) for i, u in enumerate(USERS[:4])],
           bootstrap_servers=SERVERS, partitions=2)
stop_clicks = threading.Event()


def generate_clicks(per_second=200, seconds=RUN_SECONDS):
    # a background producer: event time = wall-clock time, so new windows keep appearing
    n, deadline = 0, time.monotonic() + seconds
    while not stop_clicks.is_set() and time.monotonic() < deadline:
        now = int(time.time() * 1000)
        batch = [ks.Record(USERS[(n + i) % len(USERS)], {"page": f"/p{(n + i) % 7}", "n": n + i}, now)
                 for i in range(per_second // 10)]
        ks.produce("clicks", batch, bootstrap_servers=SERVERS, partitions=2)
        n += len(batch)
        stop_clicks.wait(0.1)


ks.produce("clicks", [ks.Record("user-0", {"page": "/", "n": -1}, int(time.time() * 1000))],
           bootstrap_servers=SERVERS, partitions=2)  # the topic exists before the app starts
threading.Thread(target=generate_clicks, name="click-generator", daemon=True).start()
"""

APP_CELL = """\
%%kstream APP --bootstrap memory://browser-test
clicks = builder.stream("clicks")
clicks.group_by_key().windowed_by(ks.TimeWindows.of("1s").grace("0s")).count(store="clicks-per-second",
                                                                           retention="1m")  # charted windows
users = builder.table("users", store="users")
(clicks.left_join(users, lambda c, u: {"page": c["page"], "n": c["n"],
                                       "name": u["name"] if u else None, "tier": u["tier"] if u else None})
       .to("enriched"))
"""

ADD_THREAD = """\
# the browser test creates this file once it has read the dashboard with one thread
from pathlib import Path

dash = get_dashboard("APP")
wait_until(lambda: dash["chart"].data and dash["table"].rows, timeout=60, what="the first chart and table update")
wait_until(lambda: Path("ADD_THREAD_FLAG").exists(), timeout=120, what="the test's go-ahead")
added = get_app("APP").add_stream_thread()
added
"""
ADD_THREAD_FLAG = "add-thread.now"


def write_notebook(path: Path, run_seconds: int = 120) -> Path:
    """Writes the notebook to ``path`` (kernel: ``KERNEL_NAME``)."""
    nb: Any = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": KERNEL_NAME,
        "display_name": "kstream_nb (browser test)",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# kstream_nb widgets, live (browser test)"),
        nbformat.v4.new_code_cell(SETUP.replace("RUN_SECONDS", str(run_seconds))),
        nbformat.v4.new_code_cell(APP_CELL.replace("APP", APP)),
        nbformat.v4.new_code_cell(ADD_THREAD.replace("APP", APP).replace("ADD_THREAD_FLAG", ADD_THREAD_FLAG)),
    ]
    nbformat.write(nb, str(path))
    return path
