"""Independent oracles for bound predicates: which rows of a table match, per Arrow compute
(IEEE: NaN compares false, != true) and per DuckDB (NaN is the largest value, NaN = NaN).

A unit (partition, file) that either oracle finds a matching row in must never be pruned.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from engine import expressions as ex
from engine.expressions import Op


def arrow_mask(t: pa.Table, e: ex.Expression):
    """The predicate's Kleene truth value per row (null = unknown)."""
    if isinstance(e, ex.And):
        return pc.and_kleene(arrow_mask(t, e.left), arrow_mask(t, e.right))
    if isinstance(e, ex.Or):
        return pc.or_kleene(arrow_mask(t, e.left), arrow_mask(t, e.right))
    if isinstance(e, ex.Not):
        return pc.invert(arrow_mask(t, e.child))
    if isinstance(e, ex.AlwaysTrue):
        return pa.array([True] * len(t))
    if isinstance(e, ex.AlwaysFalse):
        return pa.array([False] * len(t))
    col = t.column(e.term.path[0])
    for name in e.term.path[1:]:
        col = pc.struct_field(col, name)
    if pt.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    lits = [lit.scalar for lit in e.literals]
    op = e.op
    if op is Op.IS_NULL:
        return pc.is_null(col)
    if op is Op.NOT_NULL:
        return pc.is_valid(col)
    if op is Op.IS_NAN:
        return pc.is_nan(col)
    if op is Op.NOT_NAN:
        return pc.invert(pc.is_nan(col))
    if op in (Op.IN, Op.NOT_IN):
        any_eq = pc.equal(col, lits[0])
        for s in lits[1:]:
            any_eq = pc.or_kleene(any_eq, pc.equal(col, s))
        return any_eq if op is Op.IN else pc.invert(any_eq)
    if op is Op.STARTS_WITH:
        return pc.starts_with(col, lits[0].as_py())
    if op is Op.NOT_STARTS_WITH:
        return pc.invert(pc.starts_with(col, lits[0].as_py()))
    fn = {Op.EQ: pc.equal, Op.NE: pc.not_equal, Op.LT: pc.less, Op.LE: pc.less_equal, Op.GT: pc.greater, Op.GE: pc.greater_equal}[op]
    return fn(col, lits[0])


def arrow_matches(t: pa.Table, expr: ex.Expression) -> bool:
    if len(t) == 0:
        return False
    return bool(pc.any(pc.fill_null(arrow_mask(t, expr), False)).as_py())


def sql(e: ex.Expression) -> str:
    """DuckDB SQL of a bound expression; temporal columns compared as their storage count."""
    if isinstance(e, ex.And):
        return f"({sql(e.left)} AND {sql(e.right)})"
    if isinstance(e, ex.Or):
        return f"({sql(e.left)} OR {sql(e.right)})"
    if isinstance(e, ex.Not):
        return f"(NOT {sql(e.child)})"
    if isinstance(e, ex.AlwaysTrue):
        return "TRUE"
    if isinstance(e, ex.AlwaysFalse):
        return "FALSE"
    t = e.term.type
    col = ".".join('"' + p.replace('"', '""') + '"' for p in e.term.path)
    if pt.is_timestamp(t):
        col = {"s": "epoch", "ms": "epoch_ms", "us": "epoch_us", "ns": "epoch_ns"}[t.unit] + f"({col})"
    elif pt.is_date32(t):
        col = f"(({col}) - DATE '1970-01-01')"
    lits = [_literal(t, lit) for lit in e.literals]
    op = e.op
    if op is Op.IS_NULL:
        return f"({col} IS NULL)"
    if op is Op.NOT_NULL:
        return f"({col} IS NOT NULL)"
    if op is Op.IS_NAN:
        return f"isnan({col})"
    if op is Op.NOT_NAN:
        return f"(NOT isnan({col}))"
    if op in (Op.IN, Op.NOT_IN):
        return f"({col} {'NOT ' if op is Op.NOT_IN else ''}IN ({', '.join(lits)}))"
    if op is Op.STARTS_WITH:
        return f"starts_with({col}, {lits[0]})"
    if op is Op.NOT_STARTS_WITH:
        return f"(NOT starts_with({col}, {lits[0]}))"
    return f"({col} {op.value} {lits[0]})"


_SQL_TYPES = {
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
    pa.uint8(): "UTINYINT", pa.uint16(): "USMALLINT", pa.uint32(): "UINTEGER", pa.uint64(): "UBIGINT",
    pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN",
}  # fmt: skip


def _literal(t: pa.DataType, lit: ex.BoundLiteral) -> str:
    if pt.is_timestamp(t) or pt.is_date32(t):
        return f"CAST({lit.value} AS BIGINT)"
    if pt.is_decimal(t):
        return f"CAST('{lit.text}' AS DECIMAL({t.precision}, {t.scale}))"
    if t in _SQL_TYPES:
        return f"CAST('{lit.text}' AS {_SQL_TYPES[t]})"
    if pt.is_string(t) or pt.is_large_string(t):
        return "'" + lit.value.replace("'", "''") + "'"
    raise NotImplementedError(f"no DuckDB literal for {t}")


def duckdb_matches(con: duckdb.DuckDBPyConnection, t: pa.Table, expr: ex.Expression) -> bool:
    if len(t) == 0:
        return False
    cur = con.cursor()
    try:
        cur.register("unit", t)
        return cur.execute(f"SELECT count(*) FROM unit WHERE {sql(expr)}").fetchall()[0][0] > 0
    finally:
        cur.close()
