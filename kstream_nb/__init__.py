"""kstream_nb: Kafka Streams, brought into Jupyter, in Python.

Build a topology with ``StreamsBuilder``, run it with ``KafkaStreams`` (embedded ``memory://`` cluster by
default), test it with ``TopologyTestDriver``, and feed/inspect topics with ``produce``/``read_topic``.
"""

from types import ModuleType as _ModuleType

from kstream_nb.cluster.export import export_topic
from kstream_nb.cluster.profile import TopicProfile, profile_topic
from kstream_nb.cluster.records import TopicPartition
from kstream_nb.cluster.serde_specs import Serdes
from kstream_nb.cluster.serdes import Serde
from kstream_nb.cluster.topic_io import produce, read_topic
from kstream_nb.dsl.builder import StreamsBuilder
from kstream_nb.dsl.cogrouped import CogroupedKStream
from kstream_nb.dsl.grouped import KGroupedStream, KGroupedTable
from kstream_nb.dsl.kstream import KStream
from kstream_nb.dsl.ktable import GlobalKTable, KTable
from kstream_nb.errors import (
    DeserializationError,
    MissingSourceTopicError,
    ProcessingError,
    StreamsError,
    TopologyError,
)
from kstream_nb.processor.api import (
    STREAM_TIME,
    WALL_CLOCK_TIME,
    Change,
    KeyValue,
    Processor,
    ProcessorContext,
    PunctuationType,
    Record,
)
from kstream_nb.processor.expressions import col, lit
from kstream_nb.processor.fixed_key import FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord
from kstream_nb.processor.suppress import BufferConfig, Suppressed, until_time_limit, until_window_closes
from kstream_nb.processor.table_transform_values import ValueTransformerWithKey
from kstream_nb.processor.timestamps import (
    FieldTimestampExtractor,
    RecordTimestampExtractor,
    TimestampExtractor,
    WallclockTimestampExtractor,
)
from kstream_nb.processor.topic_extractor_sink import RecordContext
from kstream_nb.processor.value_joiners import MergeJoiner, merge_joiner
from kstream_nb.processor.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows, Windowed
from kstream_nb.runtime.app import KafkaStreams, State, ThreadFailureResponse, running_apps
from kstream_nb.runtime.app_reset import AppRunningError, ResetResult, reset_app
from kstream_nb.runtime.config import StreamsConfig
from kstream_nb.runtime.query_metadata import HostInfo, KeyQueryMetadata, StreamsMetadata
from kstream_nb.runtime.test_driver import TopologyTestDriver
from kstream_nb.spark import backtest
from kstream_nb.spark.compare import compare
from kstream_nb.state.builders import Stores
from kstream_nb.state.timestamped import ValueAndTimestamp
from kstream_nb.topology.topology import Topology

__version__ = "0.1.0"


def load_ipython_extension(shell: object) -> None:
    """``%load_ext kstream_nb``: the ``%%kstream`` magics, rich displays and the Streams panel's comm target.

    Importing the package changes nothing in IPython; only this hook registers formatters and magics.
    """
    from kstream_nb.jupyter.magics import load_ipython_extension as load

    load(shell)


def __getattr__(name: str) -> _ModuleType:
    """``ks.widgets`` and ``ks.datagen``, imported on first use (``import kstream_nb`` needs no ipywidgets)."""
    if name == "widgets":
        import kstream_nb.jupyter.widgets as widgets

        return widgets
    if name == "datagen":
        import kstream_nb.datagen as datagen

        return datagen
    raise AttributeError(f"module 'kstream_nb' has no attribute {name!r}")


__all__ = [
    "STREAM_TIME",
    "WALL_CLOCK_TIME",
    "AppRunningError",
    "BufferConfig",
    "Change",
    "CogroupedKStream",
    "DeserializationError",
    "FieldTimestampExtractor",
    "FixedKeyProcessor",
    "FixedKeyProcessorContext",
    "FixedKeyRecord",
    "GlobalKTable",
    "HostInfo",
    "JoinWindows",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "KafkaStreams",
    "KeyQueryMetadata",
    "KeyValue",
    "MergeJoiner",
    "MissingSourceTopicError",
    "ProcessingError",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Record",
    "RecordContext",
    "RecordTimestampExtractor",
    "ResetResult",
    "Serde",
    "Serdes",
    "SessionWindows",
    "SlidingWindows",
    "State",
    "Stores",
    "StreamsBuilder",
    "StreamsConfig",
    "StreamsError",
    "StreamsMetadata",
    "Suppressed",
    "ThreadFailureResponse",
    "TimeWindows",
    "TimestampExtractor",
    "TopicPartition",
    "TopicProfile",
    "Topology",
    "TopologyError",
    "TopologyTestDriver",
    "ValueAndTimestamp",
    "ValueTransformerWithKey",
    "WallclockTimestampExtractor",
    "Windowed",
    "backtest",
    "col",
    "compare",
    "export_topic",
    "lit",
    "merge_joiner",
    "produce",
    "profile_topic",
    "read_topic",
    "reset_app",
    "running_apps",
    "until_time_limit",
    "until_window_closes",
]
