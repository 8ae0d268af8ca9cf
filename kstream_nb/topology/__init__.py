"""The logical graph of a streams app: sources, processors, sinks, stores, sub-topologies."""
