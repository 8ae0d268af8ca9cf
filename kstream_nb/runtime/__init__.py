"""Runs topologies: the app, stream threads, tasks, assignment, commits, the test driver."""
