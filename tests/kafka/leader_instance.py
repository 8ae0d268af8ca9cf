"""One exactly-once word-count instance with leader-assigned tasks (``kafka_task_assignment="leader"``), in its
own process, until SIGTERM (clean stop) or SIGKILL.

    python leader_instance.py BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR

Prints ``STATE <new>`` on every state change; logs kstream_nb at INFO (assignments, handovers, lost tasks).
Used by ``test_task_assignment_kafka.py``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.kafka_broker

import kstream_nb as ks
from tests.kafka.wordcount_instance import run_until_sigterm, word_count
from tests.kafka_broker import FAST_CLIENT_CONFIG


def main(argv: list[str]) -> int:
    bootstrap, application_id, source, sink, state_dir = argv[:5]
    app = ks.KafkaStreams(
        word_count(source, sink),
        application_id=application_id,
        bootstrap_servers=bootstrap,
        processing_guarantee="exactly_once_v2",
        kafka_task_assignment="leader",
        commit_interval_ms=100,
        poll_ms=20,
        state_dir=state_dir,
        client_config=dict(FAST_CLIENT_CONFIG),
    )
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(process)d %(threadName)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("kstream_nb").setLevel(logging.INFO)
    app.set_state_listener(lambda new, old: print(f"STATE {new.value}", flush=True))
    return run_until_sigterm(app)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
