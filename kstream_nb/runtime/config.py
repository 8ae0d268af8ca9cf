"""``StreamsConfig``: the settings of an app, with Kafka Streams' names and defaults in snake_case."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field, fields
from typing import Any

from kstream_nb.cluster.auto_serde import AutoSerde
from kstream_nb.cluster.schema_registry import registry_configs
from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import Serde
from kstream_nb.durations import to_millis
from kstream_nb.processor.timestamps import TimestampExtractor, timestamp_extractor_from

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE_V2 = "exactly_once_v2"
DESERIALIZATION_HANDLERS = ("fail", "log_and_continue", "dead_letter")
PRODUCTION_HANDLERS = ("fail", "continue")


@dataclass
class StreamsConfig:
    """Validated app settings; unknown names raise, naming the setting and the known ones."""

    application_id: str
    bootstrap_servers: str = "memory://"
    num_stream_threads: int = 1
    commit_interval_ms: int = 30_000
    processing_guarantee: str = AT_LEAST_ONCE
    default_key_serde: Serde = field(default_factory=lambda: serde_from("string_or_json"))
    default_value_serde: Serde = field(default_factory=lambda: serde_from("json"))
    default_timestamp_extractor: TimestampExtractor = field(default_factory=lambda: timestamp_extractor_from(None))
    default_deserialization_exception_handler: str = "fail"
    #: where "dead_letter" sends records that fail to deserialize (default ``<application_id>-dlq``)
    dead_letter_topic: str | None = None
    default_production_exception_handler: str = "fail"
    poll_ms: int = 100
    max_poll_records: int = 10_000
    max_task_records_per_loop: int = 50_000
    #: a partition whose queue holds more records than this after a loop's processing is paused at the
    #: consumer until it drains (Kafka Streams' ``buffered.records.per.partition``: 1000 beside its 1000 records
    #: a poll; here one poll's worth). On Kafka a pause drops what librdkafka prefetched for the partition,
    #: fetched again at the resume: ``bench/bench_backlog.py`` measures both sides
    buffered_records_per_partition: int = 10_000
    #: how long a task waits for the broker before the thread fails (Kafka Streams' ``task.timeout.ms``)
    task_timeout_ms: int = 300_000
    state_dir: str = field(default_factory=lambda: os.path.join(tempfile.gettempdir(), "kstream-nb"))
    default_dsl_store: str = "in_memory"
    missing_source_topic_timeout_ms: int = 60_000
    auto_offset_reset: str = "earliest"
    client_id: str | None = None
    num_standby_replicas: int = 0
    #: KIP-441 (Kafka Streams' defaults): an instance whose copy of a task's state lags its changelogs by at
    #: most this many offsets may take the active task over now; others first get a warm-up replica
    acceptable_recovery_lag: int = 10_000
    #: how many warm-up replicas the group holds at once (each one a task catching up before it moves)
    max_warmup_replicas: int = 2
    #: while warm-ups catch up, the group rebalances this often to move the caught-up ones (Kafka Streams
    #: requires >= 60 s; lower values are allowed here for tests and notebooks)
    probing_rebalance_interval_ms: int = 600_000
    statestore_cache_max_bytes: int = 0
    #: added to a window or session store's retention for its changelog's retention.ms (compact,delete)
    windowstore_changelog_additional_retention_ms: int = 86_400_000
    #: generation-0 threshold of CPython's cyclic GC while stream threads run (``gc.set_threshold``'s
    #: first value; never lowered, put back when they stop; 0 leaves it alone): see runtime/gc_threshold.py
    python_gc_threshold: int = 50_000
    client_config: dict[str, Any] = field(default_factory=dict)
    #: the Schema Registry of the app's "avro"/"protobuf"/"jsonschema" serdes (None: on memory:// the embedded one)
    schema_registry_url: str | None = None
    #: the registry client's own settings, as confluent-kafka names them (basic.auth.user.info, ssl.*, ...)
    schema_registry_config: dict[str, Any] = field(default_factory=dict)
    #: ``"host:port"`` where this instance serves its stores to the others (Kafka Streams' application.server;
    #: None: off). An empty host is 127.0.0.1, port 0 picks a free port (``app.endpoint`` tells which)
    application_server: str | None = None
    #: a bearer token every interactive-query request must carry (None: none asked for)
    application_server_token: str | None = None

    @classmethod
    def of(cls, **settings: Any) -> StreamsConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ValueError(f"unknown setting(s) {unknown}; known settings: {sorted(known)}")
        if settings.get("processing_guarantee") == EXACTLY_ONCE_V2:
            settings.setdefault("commit_interval_ms", 100)  # Kafka's default under exactly-once
        for name in (
            "commit_interval_ms",
            "poll_ms",
            "missing_source_topic_timeout_ms",
            "windowstore_changelog_additional_retention_ms",
            "task_timeout_ms",
            "probing_rebalance_interval_ms",
        ):
            if name in settings:
                settings[name] = to_millis(settings[name], name)
        for name in ("default_key_serde", "default_value_serde"):
            if name in settings:
                settings[name] = serde_from(settings[name])
        if "default_timestamp_extractor" in settings:
            settings["default_timestamp_extractor"] = timestamp_extractor_from(
                settings["default_timestamp_extractor"]
            )
        config = cls(**settings)
        config.validate()
        return config

    def serde_configs(self) -> dict[str, Any]:
        """What each serde of the app is configured with (``Serde.configure``): the cluster and the registry."""
        return registry_configs(self.bootstrap_servers, self.schema_registry_url, self.schema_registry_config)

    def validate(self) -> None:
        if not isinstance(self.application_id, str) or not self.application_id:
            raise ValueError(f"application_id must be a non-empty string, got {self.application_id!r}")
        if self.num_stream_threads < 0:
            raise ValueError(f"num_stream_threads must be >= 0, got {self.num_stream_threads}")
        if self.processing_guarantee not in (AT_LEAST_ONCE, EXACTLY_ONCE_V2):
            raise ValueError(
                f"processing_guarantee must be {AT_LEAST_ONCE!r} or {EXACTLY_ONCE_V2!r}, "
                f"got {self.processing_guarantee!r}"
            )
        if self.default_deserialization_exception_handler not in DESERIALIZATION_HANDLERS:
            raise ValueError(
                f"default_deserialization_exception_handler must be one of {DESERIALIZATION_HANDLERS}, "
                f"got {self.default_deserialization_exception_handler!r}"
            )
        if self.default_dsl_store not in ("in_memory", "rocksdb"):
            raise ValueError(f"default_dsl_store must be 'in_memory' or 'rocksdb', got {self.default_dsl_store!r}")
        if self.default_production_exception_handler not in PRODUCTION_HANDLERS:
            raise ValueError(
                f"default_production_exception_handler must be one of {PRODUCTION_HANDLERS}, "
                f"got {self.default_production_exception_handler!r}"
            )
        for name in ("max_poll_records", "max_task_records_per_loop", "buffered_records_per_partition"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        for name, least in (("acceptable_recovery_lag", 0), ("max_warmup_replicas", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
        if not isinstance(self.probing_rebalance_interval_ms, int) or self.probing_rebalance_interval_ms < 1:
            raise ValueError(
                f"probing_rebalance_interval_ms must be an int >= 1, got {self.probing_rebalance_interval_ms!r}"
            )
        if not isinstance(self.python_gc_threshold, int) or self.python_gc_threshold < 0:
            raise ValueError(f"python_gc_threshold must be an int >= 0, got {self.python_gc_threshold!r}")
        for name in ("default_key_serde", "default_value_serde"):
            if isinstance(getattr(self, name), AutoSerde):
                raise ValueError(
                    f"{name}='auto' is for exploring (read_topic, %kstream tail), not apps: an app needs one "
                    "format per topic, or records written differently land in different stores"
                )
        if self.dead_letter_topic is None:
            self.dead_letter_topic = f"{self.application_id}-dlq"
        self.serde_configs()  # a bad schema_registry_url or schema_registry_config setting fails here
        if self.application_server is not None:
            _, sep, port = str(self.application_server).rpartition(":")
            if not sep or not port.isdigit() or int(port) > 65535:
                raise ValueError(
                    f"application_server must be 'host:port' (port 0-65535, 0 = any free port), "
                    f"got {self.application_server!r}"
                )
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise ValueError(f"auto_offset_reset must be 'earliest' or 'latest', got {self.auto_offset_reset!r}")
