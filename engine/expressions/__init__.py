"""Predicate expressions: one language for the API, the CLI, Flight and Spark (docs/PREDICATES.md).

- ``parse(text)``: text to an unbound expression (engine/expressions/parser.py);
- ``bind(expr, schema)`` / ``bound(text_or_expr, schema)``: columns and literals
  resolved against a table's Arrow schema (binding.py);
- ``InclusiveMetricsEvaluator``: whether a partition or file might hold a matching
  row, from its column statistics (metrics.py);
- ``statistics.metrics_from_row``: a statistics.parquet row as the evaluator's metrics.

The tree (tree.py) is built by the parser or by hand: ``predicate("price", ">=", 100)``,
``And``, ``Or``, ``Not``, ``between``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from engine.exceptions import ExpressionError
from engine.lazy import attribute_loader

# Names load on first use (PEP 562): `import engine.lookup` (the read commands) needs no
# parser, binder or evaluator until a predicate is given (start-up, issue #20). Type
# checkers and import-linter see the imports below.
if TYPE_CHECKING:
    from engine.expressions.binding import bind, comparable, is_bound, resolve
    from engine.expressions.metrics import (
        ROWS_CANNOT_MATCH,
        ROWS_MIGHT_MATCH,
        BoundExpressionVisitor,
        ColumnMetrics,
        InclusiveMetricsEvaluator,
        might_match,
        visit,
    )
    from engine.expressions.parser import parse
    from engine.expressions.tree import (
        FALSE,
        TRUE,
        AlwaysFalse,
        AlwaysTrue,
        And,
        BoundLiteral,
        BoundReference,
        Expression,
        Literal,
        LiteralKind,
        Not,
        Op,
        Or,
        Predicate,
        Reference,
        Where,
        and_,
        between,
        col,
        conjuncts,
        op_from_symbol,
        or_,
        predicate,
        references,
        rewrite_not,
    )

_LAZY = {
    "bind": "engine.expressions.binding",
    "comparable": "engine.expressions.binding",
    "is_bound": "engine.expressions.binding",
    "resolve": "engine.expressions.binding",
    "ROWS_CANNOT_MATCH": "engine.expressions.metrics",
    "ROWS_MIGHT_MATCH": "engine.expressions.metrics",
    "BoundExpressionVisitor": "engine.expressions.metrics",
    "ColumnMetrics": "engine.expressions.metrics",
    "InclusiveMetricsEvaluator": "engine.expressions.metrics",
    "might_match": "engine.expressions.metrics",
    "visit": "engine.expressions.metrics",
    "parse": "engine.expressions.parser",
    "FALSE": "engine.expressions.tree",
    "TRUE": "engine.expressions.tree",
    "AlwaysFalse": "engine.expressions.tree",
    "AlwaysTrue": "engine.expressions.tree",
    "And": "engine.expressions.tree",
    "BoundLiteral": "engine.expressions.tree",
    "BoundReference": "engine.expressions.tree",
    "Expression": "engine.expressions.tree",
    "Literal": "engine.expressions.tree",
    "LiteralKind": "engine.expressions.tree",
    "Not": "engine.expressions.tree",
    "Op": "engine.expressions.tree",
    "Or": "engine.expressions.tree",
    "Predicate": "engine.expressions.tree",
    "Reference": "engine.expressions.tree",
    "Where": "engine.expressions.tree",
    "and_": "engine.expressions.tree",
    "between": "engine.expressions.tree",
    "col": "engine.expressions.tree",
    "conjuncts": "engine.expressions.tree",
    "op_from_symbol": "engine.expressions.tree",
    "or_": "engine.expressions.tree",
    "predicate": "engine.expressions.tree",
    "references": "engine.expressions.tree",
    "rewrite_not": "engine.expressions.tree",
}

__all__ = [
    "FALSE",
    "ROWS_CANNOT_MATCH",
    "ROWS_MIGHT_MATCH",
    "TRUE",
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "BoundExpressionVisitor",
    "BoundLiteral",
    "BoundReference",
    "ColumnMetrics",
    "Expression",
    "ExpressionError",
    "InclusiveMetricsEvaluator",
    "Literal",
    "LiteralKind",
    "Not",
    "Op",
    "Or",
    "Predicate",
    "Reference",
    "Where",
    "and_",
    "between",
    "bind",
    "bound",
    "col",
    "comparable",
    "conjuncts",
    "is_bound",
    "might_match",
    "op_from_symbol",
    "or_",
    "parse",
    "predicate",
    "references",
    "resolve",
    "rewrite_not",
    "visit",
]  # fmt: skip


def bound(expr: Where, schema: pa.Schema) -> Expression:
    """An expression bound to ``schema``, from its text, an (un)bound tree, or a pyiceberg
    ``BooleanExpression`` (an Iceberg row filter, unbound)."""
    from engine.expressions.binding import bind
    from engine.expressions.parser import parse
    from engine.expressions.tree import AlwaysFalse, AlwaysTrue, And, Not, Or, Predicate

    if isinstance(expr, str):
        return bind(parse(expr), schema, text=expr)
    if isinstance(expr, (And, Or, Not, Predicate, AlwaysTrue, AlwaysFalse)):
        return bind(expr, schema)
    from engine.expressions.iceberg import from_iceberg, is_iceberg_expression

    if is_iceberg_expression(expr):
        try:
            tree = from_iceberg(expr)
        except RecursionError:
            raise ExpressionError("the pyiceberg expression nests too deeply to convert (docs/PREDICATES.md, Limits)") from None
        return bind(tree, schema)
    raise ExpressionError(f"not an expression: {type(expr).__name__} (give its text, a tree of engine.expressions, or a pyiceberg expression)")


__getattr__ = attribute_loader(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
