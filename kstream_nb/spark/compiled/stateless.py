"""The stateless steps as Catalyst: column-expression filters, ``assign``, projections, null-key drops.

Fields are read from the parsed value ``v``; an ``assign`` adds a column per field it sets, and later
expressions read that column (``assign`` evaluates in order, each seeing the fields set before it). The
decoded value is rebuilt from the original bytes by the value codec, replaying the assignments and
projections (``codec.recode_values``): the field order and number formatting stay the runtime's.
"""

from __future__ import annotations

from typing import Any

from kstream_nb.spark.compiled.codec import ValueOp
from kstream_nb.spark.compiled.planner import Assign, DropNullKeys, ExprFilter, NotCompilable, Project, Step
from kstream_nb.spark.expressions import result_type, to_spark


class ValueFields:
    """Where each field of the current value comes from: the parsed value, an assigned column, or nothing."""

    def __init__(self, schema: dict[str, str]) -> None:
        from pyspark.sql import functions as F

        self.F = F
        self.types: dict[str, str | None] = dict(schema)  # field -> its Spark type (None: always null)
        self.assigned: dict[str, str] = {}  # field -> column holding its assigned value
        self.visible: set[str] | None = None  # after a projection: the only fields there are
        self.ops: list[ValueOp] = []
        self._count = 0

    def column(self, name: str) -> Any:
        if name in self.assigned:
            return self.F.col(self.assigned[name])
        if self.visible is not None and name not in self.visible:
            return self.F.lit(None)
        return self.F.col("v")[name]

    def dtype(self, name: str) -> str | None:
        if self.visible is not None and name not in self.visible:
            return None
        return self.types.get(name)

    def where(self, expr: Any) -> Any:
        """A filter's condition: null counts as false."""
        return self.F.coalesce(to_spark(expr, self.F, self.column, self.dtype), self.F.lit(False))

    def assign(self, frame: Any, columns: dict[str, Any]) -> Any:
        """Adds one column per assignment, in order (each may read the ones before)."""
        mapping = {}
        for name, expr in columns.items():
            column = f"_a{self._count}"
            self._count += 1
            kind = result_type(expr, self.dtype)
            if kind is None:
                raise NotCompilable(f"assign({name}=...): the type of its values depends on the record ({expr!r})")
            # live, ``assign`` leaves a null value null: its fields read as null downstream
            value = to_spark(expr, self.F, self.column, self.dtype)
            frame = frame.withColumn(column, self.F.when(self.F.col("value").isNotNull(), value))
            self.assigned[name] = column
            self.types[name] = kind
            mapping[name] = column
            if self.visible is not None:
                self.visible.add(name)
        self.ops.append(("assign", mapping))
        return frame

    def project(self, names: tuple[str, ...]) -> None:
        self.assigned = {n: c for n, c in self.assigned.items() if n in names}
        self.types = {n: self.dtype(n) for n in names}
        self.visible = set(names)
        self.ops.append(("project", names))

    def assigned_struct(self) -> Any:
        """Every assigned column, for the value codec (a struct; an empty one when nothing was assigned)."""
        columns = sorted({c for kind, arg in self.ops if kind == "assign" for c in arg.values()})
        if not columns:
            return self.F.struct(self.F.lit(None).alias("_none"))
        return self.F.struct(*(self.F.col(c) for c in columns))


def apply_stateless(frame: Any, steps: list[Step], fields: ValueFields) -> Any:
    """``frame`` (with ``key``, ``value`` bytes and parsed ``v``) through the stateless steps."""
    F = fields.F
    for step in steps:
        if isinstance(step, ExprFilter):
            frame = frame.where(fields.where(step.expr))
        elif isinstance(step, Assign):
            frame = fields.assign(frame, step.columns)
        elif isinstance(step, Project):
            fields.project(step.names)
        elif isinstance(step, DropNullKeys):
            frame = frame.where(F.col("key").isNotNull())
    return frame
