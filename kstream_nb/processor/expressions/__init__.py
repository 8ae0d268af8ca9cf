"""Column expressions over dict (JSON object) values, pandas style.

An expression is data: an immutable tree of ``Expr`` nodes (``tree``) built with ``col()``, ``lit()``,
operators and a few methods (``functions``). The same tree evaluates a whole batch at a time on a DataFrame
whose columns are the value fields (``columnar``), or record by record on one dict, compiled once into
closures (``scalar``); both give the same results. ``frames`` holds the filter/assign/project operations.

Null semantics follow pandas: a missing field is null; arithmetic with null is null; comparisons with
null are False, except ``!=`` which is True (it is the negation of ``==``); ``&``, ``|``, ``^`` and ``~``
are logical and treat null as False.
"""

from kstream_nb.processor.expressions.tree import Expr, col, lit

__all__ = ["Expr", "col", "lit"]
