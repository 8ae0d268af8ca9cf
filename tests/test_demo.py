"""The terminal demo (``python -m kstream_nb demo``) runs, stops cleanly and prints correct final counts."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from kstream_nb.demo import generate_orders, generate_sentences


def _run(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kstream_nb", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _final(stdout: str) -> dict[str, str]:
    lines = [line for line in stdout.splitlines() if line.startswith("FINAL ")]
    assert len(lines) == 1, stdout
    return dict(re.findall(r"(\w+)=(\S+)", lines[0]))


def test_demo_runs_and_final_counts_match_the_produced_sentences() -> None:
    proc = _run("demo", "--seconds", "2", "--seed", "7", "--no-clear")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    final = _final(proc.stdout)
    assert final["seed"] == "7"
    sentences, orders = int(final["sentences"]), int(final["orders"])
    assert sentences > 0 and orders > 0
    words = json.loads(final["words"])
    # recount independently of the runtime, from the sentences the demo says it produced
    expected = Counter(w for s in generate_sentences(7, 0, sentences) for w in s.split())
    assert words == dict(expected)
    assert int(final["total_words"]) == sum(expected.values()) == sum(words.values())
    revenue: dict[str, int] = {}
    for user, order in generate_orders(7, 0, orders):
        revenue[user] = revenue.get(user, 0) + order["cents"]
    assert json.loads(final["revenue_cents"]) == revenue
    assert "rec/s" in proc.stdout and "lag" in proc.stdout
    assert "stopped: word-count=NOT_RUNNING revenue=NOT_RUNNING" in proc.stdout


def test_demo_data_is_deterministic_for_a_seed() -> None:
    assert generate_sentences(3, 0, 50) == generate_sentences(3, 0, 50)
    assert generate_sentences(3, 10, 5) == generate_sentences(3, 0, 15)[10:]
    assert generate_sentences(3, 0, 5) != generate_sentences(4, 0, 5)
    assert generate_orders(3, 0, 20) == generate_orders(3, 0, 20)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_demo_stops_cleanly_on_ctrl_c() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kstream_nb", "demo", "--seconds", "60", "--no-clear"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        seen = ""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            seen += line
            if "top words" in line:
                break
        assert "top words" in seen, seen
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, seen + out + err
    assert "interrupted" in out
    assert "stopped: word-count=NOT_RUNNING revenue=NOT_RUNNING" in out
    assert "Traceback" not in err


def test_readme_api_example_runs() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert blocks, "README.md has no python example"
    proc = subprocess.run([sys.executable, "-c", blocks[0]], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "{'a': 2, 'b': 2, 'c': 1}" in proc.stdout
