"""The Schema Registry client of an app or call: a server's (``schema_registry_url`` plus the client's own
settings, named as confluent-kafka names them), or the embedded in-process registry of a ``memory://`` cluster.

Clients are shared per URL and settings (their schema caches with them); confluent-kafka is imported only when
a registry serde is first configured, so apps without one do not pay for it.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kstream_nb.cluster.memory import MEMORY_SCHEME, MemoryCluster, get_cluster
from kstream_nb.cluster.serdes import Serde
from kstream_nb.errors import SerializationError

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

#: the names of the settings in the configs a serde's ``configure`` gets (StreamsConfig's names)
BOOTSTRAP_SERVERS = "bootstrap_servers"
REGISTRY_URL = "schema_registry_url"
REGISTRY_CONFIG = "schema_registry_config"

#: the client's own settings a user may pass: confluent-kafka's names (``url`` is given on its own)
_CLIENT_SETTING_PREFIXES = ("basic.auth.", "bearer.auth.", "ssl.")
_CLIENT_SETTINGS = frozenset({"timeout", "cache.capacity", "cache.latest.ttl.sec", "max.retries",
                              "retries.wait.ms", "retries.max.wait.ms", "proxy"})  # fmt: skip

_LOCK = threading.Lock()
_CLIENTS: dict[tuple[str, str], SchemaRegistryClient] = {}
_EMBEDDED: weakref.WeakKeyDictionary[MemoryCluster, SchemaRegistryClient] = weakref.WeakKeyDictionary()


class SchemaRegistryError(SerializationError):
    """The Schema Registry could not be used (unreachable, refused the credentials, or answered an error);
    the message names its URL."""

    def __init__(self, message: str, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


def registry_configs(
    bootstrap_servers: str,
    schema_registry_url: str | None = None,
    schema_registry_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The configs a serde's ``configure`` gets for an app or call on ``bootstrap_servers``."""
    if schema_registry_url is not None and (not isinstance(schema_registry_url, str) or not schema_registry_url):
        raise ValueError(f"schema_registry_url must be a URL string or None, got {schema_registry_url!r}")
    settings = dict(schema_registry_config or {})
    unknown = sorted(
        k for k in settings if k not in _CLIENT_SETTINGS and not k.startswith(_CLIENT_SETTING_PREFIXES)
    )
    if unknown:
        raise ValueError(
            f"unknown schema_registry_config setting(s) {unknown}: use confluent-kafka's SchemaRegistryClient "
            f"names (basic.auth.user.info, basic.auth.credentials.source, bearer.auth.*, ssl.*, "
            f"{', '.join(sorted(_CLIENT_SETTINGS))})"
        )
    return {BOOTSTRAP_SERVERS: bootstrap_servers, REGISTRY_URL: schema_registry_url, REGISTRY_CONFIG: settings}


def registry_client(configs: Mapping[str, Any], user: str = "a Schema Registry serde") -> SchemaRegistryClient:
    """The client the configs name: ``schema_registry_url``'s (``mock://NAME``: confluent's in-process mock,
    one per name), else the embedded registry of a ``memory://`` cluster; raises naming the setting if none."""
    url = configs.get(REGISTRY_URL)
    if url is None:
        bootstrap = configs.get(BOOTSTRAP_SERVERS)
        if isinstance(bootstrap, str) and bootstrap.startswith(MEMORY_SCHEME):
            return embedded_registry(bootstrap)
        raise SchemaRegistryError(
            f"{user} needs a Schema Registry: set schema_registry_url= (and schema_registry_config= for its "
            f"credentials) on the app, ks.produce or ks.read_topic (cluster {bootstrap!r} has no embedded one)"
        )
    settings = dict(configs.get(REGISTRY_CONFIG) or {})
    key = (url, json.dumps(settings, sort_keys=True, default=repr))
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = _new_client({**settings, "url": url})
        return client


def embedded_registry(bootstrap_servers: str) -> SchemaRegistryClient:
    """The in-process registry of the embedded cluster ``memory://NAME``: one per cluster, so apps and
    ``ks.produce`` on one cluster share schemas, other clusters do not, and a reset cluster starts empty."""
    cluster = get_cluster(bootstrap_servers)
    with _LOCK:
        client = _EMBEDDED.get(cluster)
        if client is None:
            client = _EMBEDDED[cluster] = _new_client({"url": "mock://" + cluster.bootstrap_servers})
        return client


def registry_url(client: Any) -> str:
    """The URL a client talks to (for messages)."""
    conf = client.config() if hasattr(client, "config") else {}
    return str(conf.get("url", "?"))


def _new_client(conf: dict[str, Any]) -> SchemaRegistryClient:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    try:
        return SchemaRegistryClient.new_client(conf)
    except (ValueError, TypeError) as exc:
        raise SchemaRegistryError(f"Schema Registry {conf.get('url')!r}: {exc}", conf.get("url")) from exc


def configure_serde(serde: Serde, configs: Mapping[str, Any] | None, is_key: bool) -> Serde:
    """``serde`` as an app or call uses it for keys or values (``Serde.configure`` with its settings); the
    one step every place that builds an app's serdes takes (sources, sinks, stores, global tables, ks.produce)."""
    return serde if configs is None else serde.configure(configs, is_key)
