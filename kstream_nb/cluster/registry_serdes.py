"""Schema Registry serdes: Avro, Protobuf and JSON Schema in Confluent's wire format (magic byte 0, the 4-byte
schema id, the payload), through ``confluent_kafka.schema_registry``.

Writing needs the writer's schema (an Avro schema, a Protobuf message class, a JSON schema), registered under
the subject its strategy names; reading needs none: the record's schema id is looked up in the registry. A
serde gets its registry in ``configure`` (the app's or call's ``schema_registry_url``, or the embedded registry
of a ``memory://`` cluster); the serializers are built on first use, so an app pays for the imports only then.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kstream_nb.cluster.schema_registry import (
    SchemaRegistryError,
    describe_registry,
    registry_client,
    registry_url,
)
from kstream_nb.cluster.serdes import Serde, _preview
from kstream_nb.errors import SerializationError

#: subject name strategies by name: confluent_kafka.schema_registry's functions of the same name
SUBJECT_NAME_STRATEGIES = {
    "topic": "topic_subject_name_strategy",
    "record": "record_subject_name_strategy",
    "topic_record": "topic_record_subject_name_strategy",
}
#: Confluent's wire-format magic bytes: 0 then a 4-byte schema id, 1 then a 16-byte schema GUID
_MAGIC_ID, _MAGIC_GUID = 0, 1


#: the names Java's serializer settings give them (``value.subject.name.strategy``), last part of the class name
_JAVA_STRATEGIES = {
    "topicnamestrategy": "topic",
    "recordnamestrategy": "record",
    "topicrecordnamestrategy": "topic_record",
}


def _strategy_name(strategy: str) -> str:
    """``topic``, ``record`` or ``topic_record`` (also as Java names them: ``...TopicRecordNameStrategy``)."""
    name = strategy.strip().lower().replace("-", "_") if isinstance(strategy, str) else strategy
    if isinstance(name, str):
        name = _JAVA_STRATEGIES.get(name.rsplit(".", 1)[-1], name)
    if name not in SUBJECT_NAME_STRATEGIES:
        raise ValueError(
            f"unknown subject_name_strategy {strategy!r}: use one of {', '.join(SUBJECT_NAME_STRATEGIES)}"
        )
    return str(name)


def schema_id_of(data: bytes | bytearray | memoryview) -> str | None:
    """``schema id N`` (or ``schema guid G``) of Confluent-framed bytes; None for bytes not so framed."""
    if len(data) >= 5 and data[0] == _MAGIC_ID:
        return f"schema id {int.from_bytes(bytes(data[1:5]), 'big')}"
    if len(data) >= 17 and data[0] == _MAGIC_GUID:
        import uuid

        return f"schema guid {uuid.UUID(bytes=bytes(data[1:17]))}"
    return None


class RegistrySerde(Serde):
    """What the Avro, Protobuf and JSON Schema serdes share: the registry binding (``configure``), the subject
    name strategy, the serialization context, and errors that name topic, subject, schema id and URL."""

    #: the format's name in messages, and the registry's name of its schema type
    kind = ""
    schema_type = ""

    def __init__(self, subject_name_strategy: str = "topic", auto_register_schemas: bool = True) -> None:
        self.subject_name_strategy = _strategy_name(subject_name_strategy)
        self.auto_register_schemas = bool(auto_register_schemas)
        self._client: Any = None
        self._is_key = False
        self._serializer: Callable[[Any, Any], bytes | None] | None = None
        self._deserializer: Callable[[bytes, Any], Any] | None = None
        self._contexts: dict[str, Any] = {}
        #: serializers for the schemas records carry (what a serde with no writer schema writes them with)
        self._carried: dict[Any, Callable[[Any, Any], bytes | None]] = {}

    # ---- binding ------------------------------------------------------------------------------------------

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> Serde:
        """A copy bound to the registry the configs name, writing ``<topic>-key`` subjects when ``is_key``."""
        bound = copy.copy(self)
        bound._client = registry_client(configs, type(self).__name__)
        bound._is_key = bool(is_key)
        bound._serializer = bound._deserializer = None
        bound._contexts, bound._carried = {}, {}
        return bound

    @property
    def registry(self) -> Any:
        """The bound ``SchemaRegistryClient`` (None until configured)."""
        return self._client

    def _bound_client(self) -> Any:
        if self._client is None:
            raise SchemaRegistryError(
                f"{type(self).__name__} has no Schema Registry: an app, ks.produce and ks.read_topic bind it to "
                f"their schema_registry_url (memory:// clusters: the embedded registry); used on its own, bind it "
                f"with serde.configure({{'schema_registry_url': URL}}, is_key=False)"
            )
        return self._client

    def _context(self, topic: str) -> Any:
        ctx = self._contexts.get(topic)
        if ctx is None:
            from confluent_kafka.serialization import MessageField, SerializationContext

            ctx = self._contexts[topic] = SerializationContext(
                topic, MessageField.KEY if self._is_key else MessageField.VALUE
            )
        return ctx

    def _serde_conf(self, writing: bool) -> dict[str, Any]:
        import confluent_kafka.schema_registry as sr

        conf: dict[str, Any] = {
            "subject.name.strategy": getattr(sr, SUBJECT_NAME_STRATEGIES[self.subject_name_strategy])
        }
        if writing:
            conf["auto.register.schemas"] = self.auto_register_schemas
        return conf

    def subject(self, topic: str) -> str | None:
        """The subject this serde writes ``topic``'s keys or values under (its strategy's answer)."""
        import confluent_kafka.schema_registry as sr

        strategy = getattr(sr, SUBJECT_NAME_STRATEGIES[self.subject_name_strategy])
        return strategy(self._context(topic), self._record_name())

    # ---- what each format says ----------------------------------------------------------------------------

    def _record_name(self) -> str | None:
        """The writer schema's record name (the record and topic_record strategies' subject)."""
        return None

    def _identity(self) -> Any:
        """What, besides the binding and strategy, makes two serdes of one kind equal."""
        return None

    def _writer_schema(self) -> Any:
        """The writer's schema given to the serde (None: records must carry theirs)."""
        return None

    def _carried_schema(self, data: Any) -> Any:
        """The schema a value read by a serde of this kind carries (None for a value built by the user)."""
        return None

    def _make_serializer(self, schema: Any) -> Callable[[Any, Any], bytes | None]:
        raise NotImplementedError

    def _make_deserializer(self) -> Callable[[bytes, Any], Any]:
        raise NotImplementedError

    def _to_writer(self, data: Any) -> Any:
        """The user's value as the serializer takes it."""
        return data

    def _from_reader(self, value: Any, data: bytes) -> Any:
        """The deserializer's value (of the record ``data``) as the user gets it."""
        return value

    def _writer(self, data: Any) -> Callable[[Any, Any], bytes | None]:
        """The serializer of the serde's writer schema; without one, of the schema ``data`` carries (a record
        read from a topic goes on to a changelog or a sink as it came, as Java's GenericRecord does)."""
        self._bound_client()
        schema = self._writer_schema()
        if schema is not None:
            self._serializer = self._make_serializer(schema)
            return self._serializer
        carried = self._carried_schema(data)
        if carried is None:
            raise SerializationError(
                f"{type(self).__name__} needs the writer's schema to write a {type(data).__name__} (one read "
                f"from a topic carries its own): {self._needs} (reading needs none: the schema id is looked up)"
            )
        serializer = self._carried.get(carried)
        if serializer is None:
            serializer = self._carried[carried] = self._make_serializer(carried)
        return serializer

    #: how to give the writer's schema (for messages)
    _needs = ""

    # ---- Serde ---------------------------------------------------------------------------------------------

    def serialize(self, topic: str, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            serializer = self._serializer or self._writer(data)
            return serializer(self._to_writer(data), self._context(topic))
        except SerializationError:
            raise
        except Exception as exc:
            raise self._failure(exc, topic, f"serialize a {type(data).__name__}", None) from exc

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        deserializer = self._deserializer
        if deserializer is None:
            self._bound_client()
            deserializer = self._deserializer = self._make_deserializer()
        if schema_id_of(data) is None:
            raise SerializationError(
                f"{type(self).__name__} cannot deserialize data of topic {topic!r} ({len(data)} bytes, starting "
                f"{_preview(data)}): not in Confluent's Schema Registry wire format (magic byte 0 and a 4-byte "
                f"schema id)"
            )
        try:
            return self._from_reader(deserializer(bytes(data), self._context(topic)), data)
        except SerializationError:
            raise
        except Exception as exc:
            raise self._failure(exc, topic, "deserialize data", data) from exc

    def _failure(self, exc: Exception, topic: str, what: str, data: bytes | None) -> SerializationError:
        """A failure of the registry or the format, as an error naming topic, subject or schema id, and URL."""
        from confluent_kafka.schema_registry import SchemaRegistryError as RegistryAnswer
        from confluent_kafka.schema_registry.common._httpx_compat import httpx

        url, registry = registry_url(self._client), describe_registry(self._client)
        if data is not None:
            where = f"topic {topic!r}, {schema_id_of(data)}, {len(data)} bytes starting {_preview(data)}"
        else:
            where = f"topic {topic!r}, subject {self._subject_or_none(topic)!r}"
        head = f"{type(self).__name__} cannot {what} ({where})"
        if isinstance(exc, httpx.HTTPError):
            return SchemaRegistryError(f"{head}: {registry} cannot be reached: {type(exc).__name__}: {exc}", url)
        if isinstance(exc, RegistryAnswer):
            if exc.http_status_code in (401, 403):
                answer = f"{registry} refused the credentials ({exc})"
            elif data is not None and exc.http_status_code == 404:
                answer = f"{registry} has no such schema ({exc})"
            else:
                answer = f"{registry} answered: {exc}"
            return SchemaRegistryError(f"{head}: {answer}", url)
        if data is not None:
            other = self._other_format(data)
            if other is not None:
                return SerializationError(f"{head}: that schema in {registry} is {other}, not {self.kind}")
        return SerializationError(f"{head}: {self.kind} {type(exc).__name__}: {exc}")

    def _other_format(self, data: bytes) -> str | None:
        """The format of the record's schema when it is not this serde's (``a JSON schema``), else None."""
        if data[0] != _MAGIC_ID:
            return None
        try:
            schema = self._client.get_schema(int.from_bytes(bytes(data[1:5]), "big"))
        except Exception:
            return None
        schema_type = schema.schema_type or "AVRO"
        return None if schema_type == self.schema_type else f"a {schema_type} schema"

    def _subject_or_none(self, topic: str) -> str | None:
        try:
            return self.subject(topic)
        except Exception:
            return None

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, RegistrySerde)
            and other._client is self._client
            and other._is_key == self._is_key
            and other.subject_name_strategy == self.subject_name_strategy
            and other.auto_register_schemas == self.auto_register_schemas
            and other._identity() == self._identity()
        )

    def __hash__(self) -> int:
        return hash((type(self), id(self._client), self._is_key, self.subject_name_strategy, self._identity()))

    def __copy__(self) -> RegistrySerde:
        copied = object.__new__(type(self))
        copied.__dict__.update(self.__dict__)
        copied._contexts = {}
        return copied

    def __getstate__(self) -> dict[str, Any]:
        # pickled (a topology sent to Spark workers): the registry client and the built serializers stay with
        # the process; the unpickled serde is configured again where it is used
        state = dict(self.__dict__)
        state.update(_client=None, _serializer=None, _deserializer=None, _contexts={})
        return state


class AvroRecord(dict):
    """An Avro record read from a topic: a dict of its fields that remembers its schema (the writer's, or the
    reader schema it was resolved into), so it can be written again with no schema given, as Java's
    GenericRecord can; a dict built from it (``{**record, ...}``) is a plain dict."""

    __slots__ = ("schema",)

    def __init__(self, fields: Mapping[str, Any], schema: str) -> None:
        super().__init__(fields)
        self.schema = schema

    def __reduce__(self) -> Any:
        return (AvroRecord, (dict(self), self.schema))


def _schema_text(schema: str | Mapping[str, Any] | list[Any] | None, what: str) -> str | None:
    if schema is None:
        return None
    if isinstance(schema, str):
        return schema
    if isinstance(schema, Mapping | list):
        return json.dumps(schema)
    raise TypeError(f"{what} must be a schema string or dict, got {type(schema).__name__}")


class AvroSerde(RegistrySerde):
    """Avro records as dicts (Confluent's KafkaAvroSerializer format). ``schema``: the writer's schema (a
    string or dict; needed to write). ``reader_schema``: read every record into that schema (Avro schema
    resolution: fields added with defaults get them); without it a record comes back as its writer wrote it."""

    kind, schema_type = "Avro", "AVRO"

    def __init__(
        self,
        schema: str | Mapping[str, Any] | None = None,
        subject_name_strategy: str = "topic",
        *,
        reader_schema: str | Mapping[str, Any] | None = None,
        auto_register_schemas: bool = True,
    ) -> None:
        super().__init__(subject_name_strategy, auto_register_schemas)
        self.schema = _schema_text(schema, "schema")
        self.reader_schema = _schema_text(reader_schema, "reader_schema")
        self._schema_texts: dict[int, str] = {}
        self._name = self._parse(self.schema, "schema")
        self._parse(self.reader_schema, "reader_schema")

    @staticmethod
    def _parse(text: str | None, what: str) -> str | None:
        """Checks a schema at once (a typo fails here, not at the first record); returns its full name."""
        if text is None:
            return None
        import fastavro

        try:
            parsed = fastavro.parse_schema(json.loads(text))
        except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
            raise ValueError(f"AvroSerde: invalid Avro {what}: {exc}") from exc
        if isinstance(parsed, dict):
            name = parsed.get("name", parsed.get("type"))
            return name if isinstance(name, str) else None
        return parsed if isinstance(parsed, str) else None

    def _record_name(self) -> str | None:
        return self._name

    def _identity(self) -> Any:
        return (self.schema, self.reader_schema)

    _needs = "AvroSerde(schema) or Serdes.avro(schema)"

    def _writer_schema(self) -> Any:
        return self.schema

    def _carried_schema(self, data: Any) -> Any:
        return data.schema if isinstance(data, AvroRecord) else None

    def _make_serializer(self, schema: Any) -> Callable[[Any, Any], bytes | None]:
        from confluent_kafka.schema_registry.avro import AvroSerializer

        return AvroSerializer(self._client, schema, conf=self._serde_conf(True))

    def _make_deserializer(self) -> Callable[[bytes, Any], Any]:
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        return AvroDeserializer(self._client, self.reader_schema, conf=self._serde_conf(False))

    def _from_reader(self, value: Any, data: bytes) -> Any:
        if type(value) is not dict:
            return value
        schema = self.reader_schema
        if schema is None:
            schema_id = int.from_bytes(data[1:5], "big")
            schema = self._schema_texts.get(schema_id)
            if schema is None:
                schema = self._schema_texts[schema_id] = self._client.get_schema(schema_id).schema_str
        return AvroRecord(value, schema)

    def __repr__(self) -> str:
        return f"AvroSerde({self._name or 'no schema'}, subject_name_strategy={self.subject_name_strategy!r})"


class JsonSchemaSerde(RegistrySerde):
    """JSON values checked against a JSON Schema (Confluent's KafkaJsonSchemaSerializer format). ``schema``:
    the writer's schema (a string or dict; needed to write); its ``title`` is the record name."""

    kind, schema_type = "JSON Schema", "JSON"

    def __init__(
        self,
        schema: str | Mapping[str, Any] | None = None,
        subject_name_strategy: str = "topic",
        *,
        auto_register_schemas: bool = True,
    ) -> None:
        super().__init__(subject_name_strategy, auto_register_schemas)
        self.schema = _schema_text(schema, "schema")
        title = json.loads(self.schema).get("title") if self.schema is not None else None
        self._title = title if isinstance(title, str) else None

    def _record_name(self) -> str | None:
        return self._title

    def _identity(self) -> Any:
        return self.schema

    _needs = "JsonSchemaSerde(schema) or Serdes.json_schema(schema)"

    def _writer_schema(self) -> Any:
        return self.schema

    def _make_serializer(self, schema: Any) -> Callable[[Any, Any], bytes | None]:
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        return JSONSerializer(schema, self._client, conf=self._serde_conf(True))

    def _make_deserializer(self) -> Callable[[bytes, Any], Any]:
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer

        return JSONDeserializer(None, schema_registry_client=self._client, conf=self._serde_conf(False))

    def _to_writer(self, data: Any) -> Any:
        # JSON Schema validation sees Python types: numpy scalars (DataFrame rows) become plain numbers
        if isinstance(data, dict) and any(isinstance(v, np.generic) for v in data.values()):
            return {k: v.item() if isinstance(v, np.generic) else v for k, v in data.items()}
        return data

    def __repr__(self) -> str:
        return (
            f"JsonSchemaSerde({self._title or 'no schema'}, subject_name_strategy={self.subject_name_strategy!r})"
        )


class ProtobufSerde(RegistrySerde):
    """Protobuf messages (Confluent's KafkaProtobufSerializer format). ``message_class``: the writer's generated
    message class (needed to write; a dict is accepted and built into it). Reading needs no class: the writer's
    schema is looked up by id. Messages come back as dicts of their fields (field names as in the .proto,
    Python values: 64-bit ints stay ints, enums are their names, unset message fields None) unless
    ``as_messages=True``."""

    kind, schema_type = "Protobuf", "PROTOBUF"

    def __init__(
        self,
        message_class: type[Any] | None = None,
        subject_name_strategy: str = "topic",
        *,
        as_messages: bool = False,
        auto_register_schemas: bool = True,
    ) -> None:
        super().__init__(subject_name_strategy, auto_register_schemas)
        if message_class is not None and not hasattr(message_class, "DESCRIPTOR"):
            raise TypeError(f"ProtobufSerde needs a generated message class, got {message_class!r}")
        self.message_class = message_class
        self.as_messages = bool(as_messages)

    def _record_name(self) -> str | None:
        return None if self.message_class is None else str(self.message_class.DESCRIPTOR.full_name)

    def _identity(self) -> Any:
        return (self.message_class, self.as_messages)

    def _serde_conf(self, writing: bool) -> dict[str, Any]:
        return {**super()._serde_conf(writing), "use.deprecated.format": False}

    _needs = "ProtobufSerde(MyMessage) or Serdes.protobuf(MyMessage)"

    def _writer_schema(self) -> Any:
        return self.message_class

    def _carried_schema(self, data: Any) -> Any:
        if isinstance(data, ProtobufRecord):
            return data.message_class
        return type(data) if hasattr(data, "DESCRIPTOR") else None

    def _make_serializer(self, schema: Any) -> Callable[[Any, Any], bytes | None]:
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        return ProtobufSerializer(schema, self._client, self._serde_conf(True))

    def _make_deserializer(self) -> Callable[[bytes, Any], Any]:
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

        if self.message_class is not None:
            return ProtobufDeserializer(
                self.message_class, self._serde_conf(False), schema_registry_client=self._client
            )
        from google.protobuf.empty_pb2 import Empty

        # no class: parse with the writer's descriptor, found as confluent's deserializer finds it for migrations
        reader = ProtobufDeserializer(Empty, self._serde_conf(False), schema_registry_client=self._client)
        return functools.partial(_read_by_writer_schema, reader)

    def _to_writer(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            message_class = self.message_class or getattr(data, "message_class", None)
            if message_class is not None:
                return message_class(**{k: v for k, v in data.items() if v is not None})
        return data

    def _from_reader(self, value: Any, data: bytes) -> Any:
        return value if self.as_messages else ProtobufRecord(message_dict(value), type(value))

    def __repr__(self) -> str:
        name = self._record_name() or "no message class"
        return f"ProtobufSerde({name}, subject_name_strategy={self.subject_name_strategy!r})"


class ProtobufRecord(dict):
    """A Protobuf message read from a topic, as a dict of its fields that remembers its message class, so it
    can be written again (to a changelog, a sink) with no class given."""

    __slots__ = ("message_class",)

    def __init__(self, fields: Mapping[str, Any], message_class: type[Any]) -> None:
        super().__init__(fields)
        self.message_class = message_class

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))  # the class is made at run time: a pickled copy is a plain dict


def _read_by_writer_schema(reader: Any, data: bytes, ctx: Any) -> Any:
    """A Protobuf record parsed with its writer's message descriptor (from the registry, by schema id)."""
    from confluent_kafka.schema_registry import dual_schema_id_deserializer
    from confluent_kafka.schema_registry.common.protobuf import PROTOBUF_TYPE
    from confluent_kafka.schema_registry.common.serde import SchemaId
    from google.protobuf.message_factory import GetMessageClass

    schema_id = SchemaId(PROTOBUF_TYPE)
    payload = dual_schema_id_deserializer(data, ctx, schema_id)
    writer = reader._get_writer_schema(schema_id, None, fmt="serialized")
    file_proto, pool = reader._get_parsed_schema(writer)
    descriptor = reader._get_message_desc(
        pool, pool.FindFileByName(file_proto.name), schema_id.message_indexes or [0]
    )
    message = GetMessageClass(descriptor)()
    message.ParseFromString(payload.read())
    return message


def message_dict(message: Any) -> dict[str, Any]:
    """A Protobuf message as a dict of all its fields, in Python types (``json_format.MessageToDict`` would
    turn 64-bit ints into strings and drop default values, which column expressions then cannot use)."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            value_field = entry.fields_by_name["value"]
            out[field.name] = {k: _field_value(value_field, v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_field_value(field, v) for v in value]
        elif field.has_presence and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _field_value(field, value)
    return out


def _field_value(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return message_dict(value)
    if field.enum_type is not None:
        known = field.enum_type.values_by_number.get(value)
        return value if known is None else known.name
    return value
