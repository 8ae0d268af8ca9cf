"""The interactive-query surface of ``KafkaStreams``: ``store()``, ``metadata_for_key()``, ``all_metadata()``, and
the lifecycle of the instance's query server (``application_server``). A base class of the app, so that app.py
keeps its lifecycle and this file the queries; the work is done in ``store_provider`` (local views),
``query_metadata`` (who holds a key), ``query_server`` (serving) and ``query_routing`` (asking the others).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from kstream_nb.runtime.query_metadata import KeyQueryMetadata, StreamsMetadata, all_metadata, metadata_for_key
from kstream_nb.runtime.query_routing import RemoteStore
from kstream_nb.runtime.query_server import QueryServer
from kstream_nb.runtime.store_provider import queryable_store

if TYPE_CHECKING:
    from kstream_nb.runtime.app import KafkaStreams


class InteractiveQueries:
    """Interactive queries of one app instance (mixed into ``KafkaStreams``)."""

    #: where this instance serves interactive queries (``host:port``), once started with ``application_server``
    endpoint: str | None = None
    _query_server: QueryServer | None = None

    def _app(self) -> KafkaStreams:
        return cast("KafkaStreams", self)

    def store(self, name: str, scope: str = "local", stale: bool = False, timeout: float = 10.0) -> Any:
        """A read-only view of store ``name``. Key-value stores answer get/range/all/to_pandas; window and session
        stores fetch/all/to_pandas with ``start``/``end`` columns.

        ``scope="local"`` (default): this instance's active tasks (or its global store). ``scope="all"``: any key
        from any instance of the application, each asked through its ``application_server``; with ``stale=True``
        a standby copy answers when the active instance does not; ``timeout``: seconds per call to another one.
        """
        if scope not in ("local", "all"):
            raise ValueError(f"scope must be 'local' or 'all', got {scope!r}")
        if scope == "local" or name in self._app().topology.global_stores:  # every instance has a global store
            return queryable_store(self._app(), name)
        return RemoteStore(self._app(), name, stale, timeout)

    def metadata_for_key(self, store: str, key: Any) -> KeyQueryMetadata:
        """Where ``key`` of ``store`` lives: the instance running its task as active, those keeping standby copies,
        and its partition (Kafka Streams' ``queryMetadataForKey``)."""
        return metadata_for_key(self._app(), store, key)

    def all_metadata(self) -> list[StreamsMetadata]:
        """Every instance of the application: endpoint, process id, stores, active and standby tasks and their
        partitions (Kafka Streams' ``metadataForAllStreamsClients``), as the group last said."""
        return all_metadata(self._app())

    def _serve_queries(self) -> None:
        """Starts the query server when ``application_server`` is set; the assignor then sends its bound endpoint
        with each subscription (memory://) or each status on the control topic (Kafka)."""
        app = self._app()
        if app.config.application_server is None:
            return
        self._query_server = QueryServer(app, app.config.application_server, app.config.application_server_token)
        self.endpoint = app.assignor.endpoint = self._query_server.endpoint

    def _stop_serving(self) -> None:
        server, self._query_server = self._query_server, None
        if server is not None:
            server.stop()
