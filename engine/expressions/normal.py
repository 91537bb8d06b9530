"""A canonical form of bound predicates: one spelling per meaning the rewrites can see, so
that equal predicates written differently share a cache entry (computed subsets,
engine/runtime/subset.py).

The rewrites hold under SQL's three-valued logic and the float order of
engine/expressions/arrow.py (NaN above every value and equal to itself), so the
canonical form selects exactly the rows the predicate does:

- NOT pushed into the predicates (``rewrite_not``): ``NOT a < 5`` is ``a >= 5``;
- AND / OR flattened, their operands deduplicated and sorted by their text, constants
  folded (``x AND true`` is ``x``, ``x OR true`` is ``true``, ``x AND false`` is ``false``);
- IN / NOT IN lists sorted by the literals' text forms (already deduplicated by the binder),
  one-value lists written as ``=`` / ``!=``.

It is not a decision procedure (``a > 1 AND a > 2`` stays as written): two predicates with
different canonical forms may still select the same rows, and then only miss the cache.
"""

from __future__ import annotations

import hashlib

from engine.expressions.tree import (
    FALSE,
    TRUE,
    AlwaysFalse,
    AlwaysTrue,
    And,
    Expression,
    Op,
    Or,
    Predicate,
    balanced,
    operands,
    rewrite_not,
)

__all__ = ["canonical", "digest", "normalise"]


def normalise(expr: Expression) -> Expression:
    """The canonical form of a bound expression (see the module's docstring)."""
    return _norm(rewrite_not(expr))


def canonical(expr: Expression) -> str:
    """The canonical form's text: equal for predicates that normalise alike."""
    return str(normalise(expr))


def digest(expr: Expression, length: int = 16) -> str:
    """A short hex digest of :func:`canonical` (a directory name)."""
    return hashlib.sha256(canonical(expr).encode()).hexdigest()[:length]


def _flatten(kind: type[And] | type[Or], e: Expression, out: list[Expression]) -> None:
    out.extend(operands(e) if isinstance(e, kind) else [e])


def _norm(e: Expression) -> Expression:
    if isinstance(e, (And, Or)):
        kind = type(e)
        parts: list[Expression] = []
        _flatten(kind, e, parts)
        unit, zero = (AlwaysTrue, AlwaysFalse) if kind is And else (AlwaysFalse, AlwaysTrue)
        seen: dict[str, Expression] = {}
        for part in parts:
            n = _norm(part)
            if isinstance(n, zero):
                return n
            if isinstance(n, unit):
                continue
            inner: list[Expression] = []
            _flatten(kind, n, inner)  # a normalised operand of the same kind: its operands
            for item in inner:
                seen.setdefault(_key(item), item)
        if not seen:
            return TRUE if kind is And else FALSE
        return balanced(kind, [seen[k] for k in sorted(seen)])  # prints as the chain it is; shallow
    if isinstance(e, Predicate) and e.op in (Op.IN, Op.NOT_IN):
        lits = tuple(sorted(e.literals, key=lambda lit: str(lit)))
        if len(lits) == 1:
            return Predicate(Op.EQ if e.op is Op.IN else Op.NE, e.term, lits)
        return Predicate(e.op, e.term, lits)
    return e


def _key(e: Expression) -> str:
    # parenthesised ORs inside an AND print the same as written: the text is a fine key
    return f"({e})" if isinstance(e, Or) else str(e)
