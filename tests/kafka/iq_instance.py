"""One instance of a keyed word count that serves its stores on a loopback ``application_server``, in its own
process, until it is killed (``test_interactive_queries_kafka.py`` SIGKILLs it).

    python iq_instance.py BOOTSTRAP APPLICATION_ID SOURCE STATE_DIR SESSION_TIMEOUT_MS TOKEN

Prints ``ENDPOINT host:port`` once serving and ``STATE <new>`` on every state change (flushed at once);
SIGTERM stops it cleanly.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.kafka_broker

import kstream_nb as ks
from tests.kafka.wordcount_instance import run_until_sigterm
from tests.kafka_broker import FAST_CLIENT_CONFIG


def keyed_counts(source: str) -> ks.Topology:
    b = ks.StreamsBuilder()
    b.stream(source).group_by_key().count(store="counts")
    return b.build()


def main(argv: list[str]) -> int:
    bootstrap, application_id, source, state_dir, session_timeout_ms, token = argv[:6]
    app = ks.KafkaStreams(
        keyed_counts(source),
        application_id=application_id,
        bootstrap_servers=bootstrap,
        commit_interval_ms=100,
        poll_ms=20,
        state_dir=state_dir,
        num_standby_replicas=1,
        application_server="127.0.0.1:0",
        application_server_token=token,
        client_config={**FAST_CLIENT_CONFIG, "session.timeout.ms": int(session_timeout_ms)},
    )
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(process)d %(threadName)s %(name)s %(message)s"
    )
    app.set_state_listener(lambda new, old: print(f"STATE {new.value}", flush=True))
    return run_until_sigterm(app, lambda: print(f"ENDPOINT {app.endpoint}", flush=True))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
