"""Notebook integration (magics, widgets); reads only the runtime's public surface."""
