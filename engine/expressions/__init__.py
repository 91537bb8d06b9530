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

from typing import Any

import pyarrow as pa

from engine.exceptions import ExpressionError
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


def bound(expr: str | Expression | Any, schema: pa.Schema) -> Expression:
    """An expression bound to ``schema``, from its text, an (un)bound tree, or a pyiceberg
    ``BooleanExpression`` (an Iceberg row filter, unbound)."""
    if isinstance(expr, str):
        return bind(parse(expr), schema, text=expr)
    if isinstance(expr, (And, Or, Not, Predicate, AlwaysTrue, AlwaysFalse)):
        return bind(expr, schema)
    from engine.expressions.iceberg import from_iceberg, is_iceberg_expression

    if is_iceberg_expression(expr):
        return bind(from_iceberg(expr), schema)
    raise ExpressionError(f"not an expression: {type(expr).__name__} (give its text, a tree of engine.expressions, or a pyiceberg expression)")
