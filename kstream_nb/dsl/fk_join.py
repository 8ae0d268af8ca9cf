"""How the DSL wires a foreign-key table-table join (``left.join(right, joiner, foreign_key_extractor=fn)``).

Two sub-topologies and two internal topics, as in Kafka (KIP-213):

```
left table --SubscriptionSend--> <name>-subscription-registration-topic (by fk, partitioned like right)
registration topic --SubscriptionReceive (subscription store, right store)--+
right table --ForeignTableJoin (subscription store)-------------------------+--> <name>-subscription-response-topic
response topic --ResponseJoin (left store)--> result KTable (a table source) keyed by the left key
```

The response topic is co-partitioned with the left table's topic and the registration topic with the
right table's, so the runtime sizes each like the table it talks to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kstream_nb.cluster.serde_specs import serde_from
from kstream_nb.cluster.serdes import JsonSerde, StringOrJsonSerde
from kstream_nb.dsl.functions import check_callable, takes_key
from kstream_nb.processor.fk_join import (
    ForeignTableJoin,
    ResponseJoin,
    SubscriptionReceive,
    SubscriptionResponseSerde,
    SubscriptionSend,
    SubscriptionWrapperSerde,
    ValueHasher,
    response_partitioner,
)
from kstream_nb.processor.table_joins import getter_stores
from kstream_nb.state.subscription_store import SubscriptionStoreBuilder

if TYPE_CHECKING:
    from kstream_nb.dsl.builder import StreamsBuilder
    from kstream_nb.dsl.ktable import KTable


def foreign_key_join(left: KTable, right: KTable, foreign_key_extractor: Callable[..., Any],
                     joiner: Callable[[Any, Any], Any], left_join: bool, store: str | None = None,
                     name: str | None = None) -> KTable:  # fmt: skip
    """Joins each left row with the right row its ``foreign_key_extractor(value)`` (or ``(key, value)``)
    names; the result is keyed by the left key, either side triggers, ``store`` names the result's store
    and ``name`` the internal topics and processors (``<name>-subscription-registration-topic`` ...).
    """
    from kstream_nb.dsl.ktable import KTable, table_source

    op = "left_join" if left_join else "join"
    check_callable(joiner, op)
    with_key = takes_key(foreign_key_extractor, f"{op} foreign_key_extractor")
    if not isinstance(right, KTable):
        raise TypeError(f"a foreign-key {op} needs a KTable on the right, got {right!r}")
    builder = left._builder
    topology = builder.topology
    # looked up through their value getters (an unmaterialized table-table join has no store)
    left_store = left.value_getter()
    right_store = right.value_getter()
    nodes = _node_names(builder, name)
    registration_topic, response_topic = nodes["registration_topic"], nodes["response_topic"]
    subscription_store = nodes["subscription_store"]

    hasher = ValueHasher(serde_from(left.value_serde) if left.value_serde is not None else None)
    primary_key_serde = serde_from(left.key_serde) if left.key_serde is not None else StringOrJsonSerde()
    foreign_value_serde = serde_from(right.value_serde) if right.value_serde is not None else JsonSerde()
    subscription_serde = SubscriptionWrapperSerde(primary_key_serde)
    response_serde = SubscriptionResponseSerde(foreign_value_serde)
    topology.add_repartition_topic(registration_topic)
    topology.add_repartition_topic(response_topic)

    # left side: subscribe
    send = nodes["send"]
    topology.add_processor(
        send, lambda: SubscriptionSend(foreign_key_extractor, with_key, left_join, hasher), left.node
    )
    topology.add_sink(
        nodes["registration_sink"], registration_topic, send,
        key_serde=right.key_serde, value_serde=subscription_serde,
    )  # fmt: skip

    # right side: keep subscriptions, answer them, and answer again when a right row changes
    registration_source = nodes["registration_source"]
    topology.add_source(
        registration_source, registration_topic, key_serde=right.key_serde, value_serde=subscription_serde
    )
    topology.add_state_store(SubscriptionStoreBuilder(subscription_store, right.key_serde, left.key_serde))
    receive = nodes["receive"]
    topology.add_processor(
        receive, lambda: SubscriptionReceive(subscription_store, right_store), registration_source,
        stores=[subscription_store, *getter_stores(right_store)],
    )  # fmt: skip
    foreign = nodes["foreign"]
    topology.add_processor(
        foreign, lambda: ForeignTableJoin(subscription_store), right.node, stores=[subscription_store]
    )
    topology.add_sink(
        nodes["response_sink"], response_topic, receive, foreign,
        key_serde=left.key_serde, value_serde=response_serde, partitioner=response_partitioner,
    )  # fmt: skip

    # left side: resolve the answers that are still current
    response_source = nodes["response_source"]
    topology.add_source(response_source, response_topic, key_serde=left.key_serde, value_serde=response_serde)
    resolve = nodes["resolve"]
    topology.add_processor(
        resolve,
        lambda: ResponseJoin(left_store, joiner, left_join, hasher),
        response_source,
        stores=getter_stores(left_store),
    )
    # the result table (Kafka's KTableSource with the join's Materialized): a named store at once, cached; a
    # generated one only when a later operation needs it
    output = nodes["output"]
    result_store = store or builder.new_name("KTABLE-FK-JOIN-OUTPUT-STATE-STORE")
    result = table_source(builder, resolve, store, result_store, left.key_serde, None, output)

    topology.add_copartition_group(registration_source, right.node)
    topology.add_copartition_group(response_source, left.node)
    return result


def _node_names(builder: StreamsBuilder, name: str | None) -> dict[str, str]:
    """The internal topics, subscription store and nodes of a foreign-key join. Named, ``<name>-...``; else Kafka
    Streams 4.4's generated names (``KTableImpl.doJoinOnForeignKey``), one number each in this order (Kafka's
    subscription receiver is two nodes, the store-keeping one and the right-table lookup: ``receive`` takes the
    first number and the second is skipped)."""
    if name is not None:
        return {
            "registration_topic": f"{name}-subscription-registration-topic",
            "send": f"{name}-subscription-registration-send",
            "registration_sink": f"{name}-subscription-registration-sink",
            "registration_source": f"{name}-subscription-registration-source",
            "subscription_store": f"{name}-subscription-store",
            "receive": f"{name}-subscription-receive",
            "foreign": f"{name}-foreign-table-join",
            "response_topic": f"{name}-subscription-response-topic",
            "response_sink": f"{name}-subscription-response-sink",
            "response_source": f"{name}-subscription-response-source",
            "resolve": f"{name}-response-join",
            "output": f"{name}-result",
        }
    new = builder.new_name
    names = {
        "registration_topic": new("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION") + "-topic",
        "send": new("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION"),
        "registration_sink": new("KTABLE-SINK"),
        "registration_source": new("KTABLE-SOURCE"),
        "subscription_store": new("KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE"),
        "receive": new("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR"),
    }
    new("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR")
    names["foreign"] = new("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR")
    names["response_topic"] = new("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE") + "-topic"
    names["response_sink"] = new("KTABLE-SINK")
    names["response_source"] = new("KTABLE-SOURCE")
    names["resolve"] = new("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR")
    names["output"] = new("KTABLE-FK-JOIN-OUTPUT")
    return names
