"""The fluent DSL (StreamsBuilder, KStream, KTable, grouped streams); it only builds topologies."""
