"""Loaded before every suite's own conftest: importing this package puts the repository root on
``sys.path`` (pytest's rootdir-based import), so the suites share ``tests.helpers``, ``tests.tansu_helpers``
and ``tests.lab_server``."""
