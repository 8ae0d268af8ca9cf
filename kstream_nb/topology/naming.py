"""Names of internal topics, built and recognised in one place (Kafka Streams' ``InternalTopicManager`` and
``ProcessorStateManager.storeChangelogTopic`` rules).

A topology names a repartition topic ``<base>-repartition``; the running app prefixes it with its application
id. A store's changelog is ``<application.id>-<store>-changelog``.
"""

from __future__ import annotations

CHANGELOG_SUFFIX = "-changelog"
REPARTITION_SUFFIX = "-repartition"


def repartition_topic(base: str) -> str:
    """The topology's name of the repartition topic of an operation named ``base``."""
    return f"{base}{REPARTITION_SUFFIX}"


def changelog_topic(application_id: str, store: str) -> str:
    """The changelog topic of ``store`` in application ``application_id``."""
    return f"{application_id}-{store}{CHANGELOG_SUFFIX}"


def prefixed(application_id: str, topic: str) -> str:
    """The broker's name of an internal topic the topology calls ``topic``."""
    return f"{application_id}-{topic}"


#: the suffixes of an app's internal topics, as Kafka's application reset tool recognises them (the last two:
#: a foreign-key join's subscription topics)
INTERNAL_SUFFIXES = (
    CHANGELOG_SUFFIX,
    REPARTITION_SUFFIX,
    "-subscription-registration-topic",
    "-subscription-response-topic",
)


def is_internal_topic(name: str, application_id: str | None = None) -> bool:
    """Whether a broker's topic is a changelog, repartition or foreign-key subscription topic (of
    ``application_id`` when given)."""
    if application_id is not None and not name.startswith(f"{application_id}-"):
        return False
    return name.endswith(INTERNAL_SUFFIXES)
