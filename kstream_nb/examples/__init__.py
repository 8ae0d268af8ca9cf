"""Runnable examples (``python -m kstream_nb.examples.<name>``)."""
