"""Kafka Streams' task assignment (``internals.assignment``): the state-aware HighAvailabilityTaskAssignor of
KIP-441 as pure functions over client (process) states, so that the memory:// group assignor and the leader of
a Kafka group (docs/design/task_assignment_on_kafka.md §3.6) compute the same assignment.

``client_state``: what each client reports (threads, previous tasks, task offset sums, rack) and its lags;
``high_availability``: stateful actives, warm-up replicas, stateless actives and the probing decision;
``standby``: standby replicas (rack-aware); ``offset_sums``: the task offset sums an instance reports (live
tasks, standbys, checkpoints on disk). Spreading a client's tasks over its stream threads stays with the
caller (``runtime/assignor.py``, as Kafka Streams' ``StreamsPartitionAssignor`` does).
"""
