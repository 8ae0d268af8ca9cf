"""Live widgets for a running ``KafkaStreams`` app: window chart, late records, join/topic table, topology
graph, task assignment, metrics bar, and a dashboard that holds them.

Every widget reads only the app's public surface (``store()``, ``metrics()``, ``lag()``, ``dropped_records()``,
``assignment()``, ``group_assignment()``, ``topology.describe()``) and output topics through
``read_topic``. Widgets are ipywidgets ``VBox``es: display them like any widget. Live ones are refreshed
by ONE background thread (a ``Refresher``) per widget or per dashboard, at a bounded rate; the thread
stops when the app stops. Nothing here prints or displays from a thread: it only sets widget traits.
"""

from kstream_nb.jupyter.widgets.assignment_view import AssignmentView
from kstream_nb.jupyter.widgets.dashboard_widget import SHOW_ALL, Dashboard, dashboard
from kstream_nb.jupyter.widgets.dropped_table import DroppedTable
from kstream_nb.jupyter.widgets.live import enable_offline_charts
from kstream_nb.jupyter.widgets.metrics_bar import MetricsBar
from kstream_nb.jupyter.widgets.topic_table import JoinTable, TopicTable
from kstream_nb.jupyter.widgets.topology_graph import TopologyGraph
from kstream_nb.jupyter.widgets.window_chart import WindowChart

__all__ = [
    "SHOW_ALL",
    "AssignmentView",
    "Dashboard",
    "DroppedTable",
    "JoinTable",
    "MetricsBar",
    "TopicTable",
    "TopologyGraph",
    "WindowChart",
    "dashboard",
    "enable_offline_charts",
]
