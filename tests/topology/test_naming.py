"""Internal topic names: what a reset deletes and what the topics view marks internal."""

from kstream_nb.topology.naming import changelog_topic, is_internal_topic, prefixed, repartition_topic


def test_an_apps_internal_topics_are_its_changelogs_and_repartition_topics_only() -> None:
    app = "orders-app"
    mine = [changelog_topic(app, "counts"), prefixed(app, repartition_topic("by-region"))]
    assert mine == ["orders-app-counts-changelog", "orders-app-by-region-repartition"]
    others = ["orders", "orders-app-output", "billing-counts-changelog", "orders-app-changelog-archive"]
    assert [t for t in mine + others if is_internal_topic(t, app)] == mine
    assert is_internal_topic("billing-counts-changelog") and not is_internal_topic("orders-app-output")
