"""The Processor API and the built-in processors that the DSL compiles to."""
