"""Cost of the live widgets, measured in a real IPython kernel (issue 5, item 6).

    python bench/bench_widgets.py [--rate 10000] [--seconds 15] [--repeats 2] [--latency-runs 5]

Starts one ipykernel (this Python, a temporary kernelspec) with ``jupyter_client`` and drives it the way a
notebook front end does: ``execute`` requests, reading every IOPub message (so widget updates are really
serialized and sent over ZMQ, as with JupyterLab attached; only the browser's rendering is missing).

(a) Latency: seconds from sending a ``%%kstream`` cell to the kernel (warm: the extension loaded, the
    offline Vega bundle enabled and one app already run and stopped) until the first chart update leaves
    the kernel - the first IOPub ``comm_msg`` that replaces the ``spec`` of the dashboard's JupyterChart.
    Each run uses a fresh ``memory://`` cluster holding 600 clicks already, a fresh app name, and the
    topology of the browser test (1 s tumbling count per user + a left join with a users table). Also
    quoted: when the cell itself finished (``execute_reply``).

(b) CPU overhead at a steady load: a producer in the kernel writes ``--rate`` records/s (clicks with
    wall-clock event time, 6 users, 2 partitions) for ``--seconds`` into an app started with ``%%kstream``,
    once with ``--show none`` (the app's static HTML repr only) and once with the full dashboard (metrics,
    chart, join table, topology, tasks; refreshed at the default 4 Hz). The kernel process's CPU time
    (``time.process_time()``: all its threads, producer and stream thread included) over the loaded period
    is compared; the difference is what the widgets cost. Runs alternate (none, dashboard, none, ...) to
    spread drift; the records processed in each run are printed so both sides are seen to carry the same
    load. The IOPub traffic the widgets cause (messages, bytes) is counted on the client side.

This prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import queue
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parent.parent
RESULT = "BENCH_RESULT "
# the topology of the browser test: 1 s tumbling count per user + a left join with a users table
BODY = """\
clicks = builder.stream("clicks")
clicks.group_by_key().windowed_by(ks.TimeWindows.of("1s").grace("0s")).count(store="clicks-per-second")
users = builder.table("users", store="users")
(clicks.left_join(users, lambda c, u: {"page": c["page"], "n": c["n"], "name": u["name"] if u else None})
       .to("enriched"))
"""

SETUP = """
%load_ext kstream_nb
import json, resource, time
import kstream_nb as ks
from kstream_nb.cluster.memory import reset_cluster
from kstream_nb.jupyter import enable_offline_charts, get_app, get_dashboard, stop_app, wait_until

USERS = [f"user-{i}" for i in range(6)]
BODY = __BODY__


def seed(url, clicks=600):
    ks.produce("users", [ks.Record(u, {"name": u.upper()}) for u in USERS[:4]], bootstrap_servers=url,
               partitions=2)
    now = int(time.time() * 1000)
    ks.produce("clicks", [ks.Record(USERS[i % 6], {"page": f"/p{i % 7}", "n": i}, now - 600 + i)
                          for i in range(clicks)], bootstrap_servers=url, partitions=2)


def generate(url, rate, seconds, batches_per_s=20):
    # `rate` records/s in even batches, event time = wall-clock time; returns the records written
    n, start = 0, time.monotonic()
    per_batch = max(1, rate // batches_per_s)
    while time.monotonic() - start < seconds:
        now = int(time.time() * 1000)
        batch = [ks.Record(USERS[(n + i) % 6], {"page": f"/p{(n + i) % 7}", "n": n + i}, now)
                 for i in range(per_batch)]
        ks.produce("clicks", batch, bootstrap_servers=url, partitions=2)
        n += per_batch
        time.sleep(max(0.0, start + n / rate - time.monotonic()))
    return n


def load_run(name, url, show, rate, seconds, settle=1.5):
    seed(url, clicks=10)
    get_ipython().run_cell_magic("kstream", f"{name} --bootstrap {url} --show {show}", BODY)
    app = get_app(name)
    app.wait_until_running()
    time.sleep(settle)
    dash = get_dashboard(name)
    spent = {"cpu": 0.0, "refreshes": 0}
    if dash is not None:  # CPU time of the refresher thread itself (reading the app + building/sending state)
        refresh_once = dash.refresher.refresh_once

        def timed(force=False):
            t = time.thread_time()
            refresh_once(force=force)
            spent["cpu"] += time.thread_time() - t
            spent["refreshes"] += 1

        dash.refresher.refresh_once = timed
    processed0 = app.metrics()["process-total"]
    cpu0, wall0 = time.process_time(), time.monotonic()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    written = generate(url, rate, seconds)
    produce_s = time.monotonic() - wall0
    app.wait_until_idle(timeout=120)  # the same work on both sides: every record written is processed
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    m = app.metrics()
    refresher_cpu, refreshes = spent["cpu"], spent["refreshes"]
    result = {
        "show": show, "wall_s": wall, "cpu_s": cpu, "produce_s": produce_s,
        "rusage_cpu_s": (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime),
        "written": written, "processed": m["process-total"] - processed0,
        "chart_updates": dash["chart"].chart_updates if dash is not None else 0,
        "refresher_cpu_s": refresher_cpu, "refreshes": refreshes,
    }
    stop_app(name)
    reset_cluster(url)
    print("BENCH_RESULT " + json.dumps(result))
""".replace("__BODY__", repr(BODY))


class Kernel:
    """One ipykernel driven like a front end: every IOPub message is read and counted."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="kstream-bench-"))
        spec_dir = self.tmp / "kernels" / "kstream-bench"
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "kstream bench",
                    "language": "python",
                }
            )
        )
        ksm = KernelSpecManager(kernel_dirs=[str(self.tmp / "kernels")])
        self.km = KernelManager(kernel_name="kstream-bench", kernel_spec_manager=ksm)
        self.km.start_kernel(cwd=str(ROOT), env={**_env(), "IPYTHONDIR": str(self.tmp / "ipython")})
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.chart_comms: set[str] = set()

    def run(self, code: str, timeout: float = 300, until_chart_update: float = 0.0) -> dict[str, Any]:
        """Executes ``code`` and reads EVERY IOPub message (whatever cell the sending thread belongs to) until
        the cell is done - and, with ``until_chart_update``, up to that many more seconds until a chart
        update arrives. Returns the BENCH_RESULT the cell printed (if any), the widget traffic seen, and when
        the first JupyterChart update arrived (seconds after sending the request)."""
        sent = time.monotonic()
        found: dict[str, Any] = {"first_chart_update_s": None, "comm_msgs": 0, "comm_bytes": 0}
        errors: list[str] = []
        msg_id = self.kc.execute(code)
        reply: dict[str, Any] | None = None
        idle = False
        deadline = sent + timeout
        while True:
            now = time.monotonic()
            if reply is not None and idle:
                if "cell_done_s" not in found:
                    found["cell_done_s"] = now - sent
                if (
                    found["first_chart_update_s"] is not None
                    or now > sent + found["cell_done_s"] + until_chart_update
                ):
                    break
            if now > deadline:
                raise TimeoutError(f"cell did not finish within {timeout}s:\n{code}")
            if reply is None:
                try:
                    shell = self.kc.get_shell_msg(timeout=0)
                    if shell["parent_header"].get("msg_id") == msg_id:
                        reply = shell
                except queue.Empty:
                    pass
            try:
                msg = self.kc.get_iopub_msg(timeout=0.02)
            except queue.Empty:
                continue
            self._seen(msg, msg_id, sent, found, errors)
            if (
                msg["msg_type"] == "status"
                and msg["parent_header"].get("msg_id") == msg_id
                and msg["content"]["execution_state"] == "idle"
            ):
                idle = True
        assert reply is not None
        if reply["content"]["status"] != "ok" or errors:
            raise RuntimeError(f"cell failed:\n{code}\n" + "\n".join(errors))
        return found

    def _seen(
        self, msg: dict[str, Any], msg_id: str, sent: float, found: dict[str, Any], errors: list[str]
    ) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "comm_open":
            state = content.get("data", {}).get("state", {})
            if "spec" in state and "embed_options" in state:  # an Altair JupyterChart
                self.chart_comms.add(content["comm_id"])
        elif kind == "comm_msg":
            found["comm_msgs"] += 1
            found["comm_bytes"] += len(json.dumps(content, default=str)) + sum(
                len(b) for b in msg.get("buffers") or []
            )
            data = content.get("data", {})
            if (
                found["first_chart_update_s"] is None
                and content.get("comm_id") in self.chart_comms
                and data.get("method") == "update"
                and data.get("state", {}).get("spec") is not None
            ):
                found["first_chart_update_s"] = time.monotonic() - sent
        elif msg["parent_header"].get("msg_id") != msg_id:
            return
        elif kind == "stream":
            for line in content["text"].splitlines():
                if line.startswith(RESULT):
                    found["result"] = json.loads(line[len(RESULT) :])
        elif kind == "error":
            errors.append("\n".join(content["traceback"]))

    def close(self) -> None:
        try:
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=False)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("JPY_")}


def _latency(kernel: Kernel, runs: int) -> list[dict[str, Any]]:
    out = []
    for i in range(runs):
        name, url = f"lat{i}", f"memory://bench-lat-{i}"
        kernel.run(f"seed({url!r})")
        r = kernel.run(f"%%kstream {name} --bootstrap {url}\n{BODY}", until_chart_update=30)
        kernel.run(f"stop_app({name!r}); reset_cluster({url!r})")
        out.append(r)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=int, default=10_000, help="records/s written during the CPU runs")
    p.add_argument("--seconds", type=float, default=15.0, help="length of each CPU run")
    p.add_argument("--repeats", type=int, default=2, help="CPU runs per side (none / dashboard)")
    p.add_argument("--latency-runs", type=int, default=5)
    args = p.parse_args()

    t = time.monotonic()
    kernel = Kernel()
    print(f"kernel started in {time.monotonic() - t:.1f}s (python {sys.version.split()[0]})")
    try:
        t = time.monotonic()
        kernel.run(SETUP)
        kernel.run("enable_offline_charts()")
        print(f"extension loaded + offline Vega bundle enabled in {time.monotonic() - t:.1f}s")
        # warm-up: one app with a dashboard, run and stopped
        kernel.run("seed('memory://bench-warm')")
        warm = kernel.run(f"%%kstream warm --bootstrap memory://bench-warm\n{BODY}")
        kernel.run("wait_until(lambda: get_dashboard('warm')['chart'].chart_updates, timeout=30)")
        kernel.run("stop_app('warm'); reset_cluster('memory://bench-warm')")
        print(f"warm-up %%kstream cell: cell done in {warm['cell_done_s']:.2f}s")

        print(f"\n(a) %%kstream cell -> first chart update leaving the kernel ({args.latency_runs} runs, warm)")
        lat = _latency(kernel, args.latency_runs)
        firsts = [r["first_chart_update_s"] for r in lat if r["first_chart_update_s"] is not None]
        dones = [r["cell_done_s"] for r in lat]
        for i, r in enumerate(lat):
            f = r["first_chart_update_s"]
            print(f"    run {i}: cell done {r['cell_done_s']:.3f}s, first chart update {f:.3f}s" if f else "")
        if firsts:
            print(
                f"    first chart update: median {statistics.median(firsts):.3f}s "
                f"(min {min(firsts):.3f}s, max {max(firsts):.3f}s); "
                f"cell done: median {statistics.median(dones):.3f}s"
            )

        print(
            f"\n(b) kernel CPU at {args.rate:,} records/s for {args.seconds:.0f}s: --show none vs full dashboard"
        )
        runs: dict[str, list[dict[str, Any]]] = {"none": [], "metrics,chart,table,topology,tasks": []}
        for rep in range(args.repeats):
            for show in runs:
                name, url = f"load{rep}{len(runs[show])}{show[:4]}", f"memory://bench-load-{rep}-{show[:4]}"
                code = f"load_run({name!r}, {url!r}, {show!r}, {args.rate}, {args.seconds})"
                r = kernel.run(code, timeout=args.seconds + 120)
                res = r["result"]
                res["comm_msgs"], res["comm_bytes"] = r["comm_msgs"], r["comm_bytes"]
                runs[show].append(res)
                label = "dashboard" if show != "none" else "none     "
                print(
                    f"    {label}: cpu {res['cpu_s']:.2f}s / wall {res['wall_s']:.2f}s "
                    f"= {100 * res['cpu_s'] / res['wall_s']:.1f}% of a core "
                    f"(getrusage {res['rusage_cpu_s']:.2f}s); "
                    f"written {res['written']:,}, processed {res['processed']:,} "
                    f"in {res['produce_s']:.1f}s + {res['wall_s'] - res['produce_s']:.1f}s to drain; "
                    f"refresher thread cpu {res['refresher_cpu_s']:.2f}s over {res['refreshes']} refreshes, "
                    f"chart updates {res['chart_updates']}, widget msgs {res['comm_msgs']} "
                    f"({res['comm_bytes'] / 1e6:.2f} MB)"
                )
        none = runs["none"]
        full = runs["metrics,chart,table,topology,tasks"]

        def per_s(rs: list[dict[str, Any]], key: str) -> float:
            return statistics.mean(r[key] / r["wall_s"] for r in rs)

        base, dash = per_s(none, "cpu_s"), per_s(full, "cpu_s")
        per_record = {
            side: statistics.mean(1e6 * r["cpu_s"] / r["processed"] for r in rs)
            for side, rs in (("none", none), ("full", full))
        }
        print(
            f"    process CPU per record processed: none {per_record['none']:.1f} us, dashboard "
            f"{per_record['full']:.1f} us ({per_record['full'] - per_record['none']:+.1f} us)"
        )
        print(
            f"    the dashboard's refresher thread alone: {100 * per_s(full, 'refresher_cpu_s'):.1f}% of a core "
            f"({statistics.mean(r['refreshes'] / r['wall_s'] for r in full):.1f} refreshes/s, "
            f"{statistics.mean(1e3 * r['refresher_cpu_s'] / max(1, r['refreshes']) for r in full):.0f} ms "
            "CPU each)"
        )
        print(
            f"    process CPU: none {100 * base:.1f}% of a core, dashboard {100 * dash:.1f}% -> widgets cost "
            f"{100 * (dash - base):.1f}% of a core ({100 * (dash - base) / base:+.0f}% over the app alone); "
            f"dashboard traffic {per_s(full, 'comm_msgs'):.1f} msgs/s, {per_s(full, 'comm_bytes') / 1e3:.0f} kB/s"
        )
    finally:
        kernel.close()


if __name__ == "__main__":
    main()
