"""Built-in value joiners: functions a join can take that the compiled backtest path also understands.

``merge_joiner()`` joins two dict values as pandas' ``merge`` joins rows: the left value's fields, then the
right value's; a field name present in both gets ``suffixes`` (left, right). A missing side (None, as a left or
outer join gives) adds no fields. Being a known class, it is translated to a Spark plan where a lambda is not.
"""

from __future__ import annotations

from typing import Any

from kstream_nb.errors import StreamsError

__all__ = ["MergeJoiner", "merge_joiner"]


class MergeJoiner:
    """``(left, right) -> dict``: left's fields then right's, colliding names suffixed (see the module doc)."""

    def __init__(self, suffixes: tuple[str, str] = ("", "_right")) -> None:
        left, right = suffixes
        if left == right:
            raise ValueError(f"merge_joiner needs two different suffixes, got {suffixes!r}")
        self.suffixes = (left, right)

    def __call__(self, left: Any, right: Any) -> dict[str, Any]:
        for side, value in (("left", left), ("right", right)):
            if value is not None and not isinstance(value, dict):
                raise StreamsError(f"merge_joiner needs dict values, got a {type(value).__name__} on the {side}")
        left, right = left or {}, right or {}
        suffix_left, suffix_right = self.suffixes
        out = {(k + suffix_left if k in right else k): v for k, v in left.items()}
        out.update({(k + suffix_right if k in left else k): v for k, v in right.items()})
        return out

    def __repr__(self) -> str:
        return f"merge_joiner(suffixes={self.suffixes!r})"


def merge_joiner(suffixes: tuple[str, str] = ("", "_right")) -> MergeJoiner:
    """A joiner of dict values, as pandas' ``merge``: ``orders.join(customers, ks.merge_joiner())``."""
    return MergeJoiner(suffixes)
