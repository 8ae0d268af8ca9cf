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
    configs = {BOOTSTRAP_SERVERS: bootstrap_servers, REGISTRY_URL: schema_registry_url, REGISTRY_CONFIG: settings}
    if schema_registry_url is not None:
        registry_client(configs)  # confluent-kafka checks the settings now, not at the first record
    return configs


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
    """The URL a client talks to (``mock://memory://NAME`` for a cluster's embedded registry)."""
    conf = client.config() if hasattr(client, "config") else {}
    return str(conf.get("url", "?"))


def describe_registry(client: Any) -> str:
    """``the Schema Registry at URL`` (or ``the embedded Schema Registry of memory://NAME``), for messages."""
    url = registry_url(client)
    if url.startswith("mock://" + MEMORY_SCHEME):
        return f"the embedded Schema Registry of {url[len('mock://') :]}"
    return f"the Schema Registry at {url}"


def _new_client(conf: dict[str, Any]) -> SchemaRegistryClient:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    # Java's basic.auth.credentials.source: the Python client takes the credentials from whichever is set
    source = conf.pop("basic.auth.credentials.source", None)
    if source is not None and str(source).upper() not in ("USER_INFO", "URL"):
        raise ValueError(f"basic.auth.credentials.source must be USER_INFO or URL, got {source!r}")
    try:
        return SchemaRegistryClient.new_client(conf)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"schema_registry_url {conf.get('url')!r} / schema_registry_config: {exc} (settings are "
            f"confluent-kafka's SchemaRegistryClient's: basic.auth.user.info, bearer.auth.*, ssl.*, timeout, ...)"
        ) from exc


def configure_serde(serde: Serde, configs: Mapping[str, Any] | None, is_key: bool) -> Serde:
    """``serde`` as an app or call uses it for keys or values (``Serde.configure`` with its settings); the
    one step every place that builds an app's serdes takes (sources, sinks, stores, global tables, ks.produce)."""
    return serde if configs is None else serde.configure(configs, is_key)
