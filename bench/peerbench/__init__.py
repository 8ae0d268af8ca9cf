"""The driver side of ``bench/bench_peers.py``: data, brokers, running and timing the peers, the report.

The runners themselves (one process per engine and workload) are in ``bench/peers/``.
"""
