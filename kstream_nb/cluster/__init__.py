"""Where records live: the embedded cluster, serdes, the partitioner and topic helpers."""

from kstream_nb.cluster.base import (
    Admin,
    Assignment,
    Cluster,
    Consumer,
    GroupAssignor,
    Producer,
    RebalanceListener,
    RecordMetadata,
    Subscription,
    TopicDescription,
    TopicExistsError,
    TopicSpec,
)
from kstream_nb.cluster.connection import connect
from kstream_nb.cluster.memory import MemoryCluster, get_cluster, reset_cluster
from kstream_nb.cluster.memory_group import RangeAssignor
from kstream_nb.cluster.partitioner import default_partition, murmur2, to_positive
from kstream_nb.cluster.records import (
    ColumnarBatch,
    ConsumerRecord,
    FetchedBatch,
    ProducerRecord,
    TopicPartition,
)
from kstream_nb.cluster.serde_specs import Serdes, serde_from
from kstream_nb.cluster.serdes import (
    BytesSerde,
    DoubleSerde,
    FloatSerde,
    FunctionSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    Serde,
    ShortSerde,
    StringOrJsonSerde,
    StringSerde,
)
from kstream_nb.cluster.topic_io import produce, read_topic
from kstream_nb.cluster.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde, ValueAndTimestampSerde

__all__ = [
    "Admin",
    "Assignment",
    "BytesSerde",
    "Cluster",
    "ColumnarBatch",
    "Consumer",
    "ConsumerRecord",
    "DoubleSerde",
    "FetchedBatch",
    "FloatSerde",
    "FunctionSerde",
    "GroupAssignor",
    "IntegerSerde",
    "JsonSerde",
    "LongSerde",
    "MemoryCluster",
    "Producer",
    "ProducerRecord",
    "RangeAssignor",
    "RebalanceListener",
    "RecordMetadata",
    "Serde",
    "Serdes",
    "SessionWindowedSerde",
    "ShortSerde",
    "StringOrJsonSerde",
    "StringSerde",
    "Subscription",
    "TimeWindowedSerde",
    "TopicDescription",
    "TopicExistsError",
    "TopicPartition",
    "TopicSpec",
    "ValueAndTimestampSerde",
    "connect",
    "default_partition",
    "get_cluster",
    "murmur2",
    "produce",
    "read_topic",
    "reset_cluster",
    "serde_from",
    "to_positive",
]
