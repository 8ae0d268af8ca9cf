"""Notebook integration: ``%%kstream`` magics, live widgets, rich reprs. Needs the ``jupyter`` extra.

Reads only the runtime's public surface (``KafkaStreams.store/metrics/lag/assignment/group_assignment``,
``Topology.describe()``) and topics through ``read_topic``.

``%load_ext kstream_nb.jupyter`` (or ``%load_ext kstream_nb``) registers the magics and the rich displays;
``import kstream_nb`` alone registers nothing.
"""

from kstream_nb.jupyter.magics import (
    KStreamMagics,
    get_app,
    get_dashboard,
    load_ipython_extension,
    reset_app,
    stop_all,
    stop_app,
    unload_ipython_extension,
    wait_until,
)
from kstream_nb.jupyter.refresher import Refresher, Throttle, live_refreshers
from kstream_nb.jupyter.reprs import (
    app_html,
    app_mimebundle,
    description_mimebundle,
    register_formatters,
    topology_mimebundle,
)
from kstream_nb.jupyter.widgets import (
    AssignmentView,
    Dashboard,
    DroppedTable,
    JoinTable,
    MetricsBar,
    TopicTable,
    TopologyGraph,
    WindowChart,
    dashboard,
    enable_offline_charts,
)

__all__ = [
    "AssignmentView",
    "Dashboard",
    "DroppedTable",
    "JoinTable",
    "KStreamMagics",
    "MetricsBar",
    "Refresher",
    "Throttle",
    "TopicTable",
    "TopologyGraph",
    "WindowChart",
    "app_html",
    "app_mimebundle",
    "dashboard",
    "description_mimebundle",
    "enable_offline_charts",
    "get_app",
    "get_dashboard",
    "live_refreshers",
    "load_ipython_extension",
    "register_formatters",
    "reset_app",
    "stop_all",
    "stop_app",
    "topology_mimebundle",
    "unload_ipython_extension",
    "wait_until",
]
