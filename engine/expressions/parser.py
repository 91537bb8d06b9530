"""The predicate language: text to an unbound expression, with errors that point at a character.

Grammar (keywords in any case)::

    expr      := or
    or        := and (OR and)*
    and       := unary (AND unary)*
    unary     := NOT unary | '(' expr ')' | TRUE | FALSE | predicate
    predicate := column cmp literal                 cmp: = == != <> < <= > >=
               | column [NOT] IN '(' literal (',' literal)* ')'
               | column [NOT] BETWEEN literal AND literal
               | column [NOT] LIKE 'prefix%'        (STARTS WITH)
               | column [NOT] STARTS WITH literal
               | column IS [NOT] NULL | column IS [NOT] NAN
               | column is_null | not_null | is_nan | not_nan   (the old Flight names)
    column    := name ('.' name)*                   a struct leaf: parent.child
    name      := word | "double quoted" | `back quoted`      ("" and `` escape the quote)
    literal   := 'single quoted' | number | true | false | nan | inf | -inf | bare word

This is the language of Iceberg's row filters (pyiceberg's ``parser.parse``), so a
planner's filter passes through, plus ``!=``/``==``, backticks, exponents and bare
words: an unquoted literal such as ``2024-10-01`` or ``Berlin`` is read as the
quoted text, so ``city == Berlin and price > 5`` means what it says. A quoted name
is one name, dots and spaces included (``"a.b"`` is a column called a.b; ``a.b`` is
field b of struct a).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from engine.exceptions import ExpressionError
from engine.expressions.tree import (
    FALSE,
    KEYWORDS,
    MAX_TERMS,
    TRUE,
    And,
    Expression,
    Literal,
    LiteralKind,
    Not,
    Op,
    Or,
    Predicate,
    Reference,
    balanced,
)

MAX_EXPRESSION_CHARS = 64 * 1024
#: nesting of parentheses and NOTs (the parser recurses); the tree's limits: tree.MAX_DEPTH, tree.MAX_TERMS
MAX_NESTING = 200

_CMP = {"=": Op.EQ, "==": Op.EQ, "!=": Op.NE, "<>": Op.NE, "<": Op.LT, "<=": Op.LE, ">": Op.GT, ">=": Op.GE}
_OLD_UNARY = {"is_null": Op.IS_NULL, "not_null": Op.NOT_NULL, "is_nan": Op.IS_NAN, "not_nan": Op.NOT_NAN}
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_FLOAT_WORDS = {"nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}
_STOP = set(" \t\r\n()',=<>!\"`")  # characters that end a word


@dataclass(frozen=True)
class _Token:
    kind: str  # word, string, quoted (a quoted name), op, punct, end
    text: str  # the value (unescaped for string / quoted)
    start: int
    end: int

    @property
    def keyword(self) -> str | None:
        up = self.text.upper()
        return up if self.kind == "word" and up in KEYWORDS else None


def parse(text: str) -> Expression:
    """The unbound expression of ``text``; ExpressionError (one line, with the position) if malformed."""
    if not isinstance(text, str):
        raise ExpressionError(f"an expression must be text, not {type(text).__name__}")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"the expression is too long ({len(text):,} characters; at most {MAX_EXPRESSION_CHARS:,})")
    return _Parser(text).parse()


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
            continue
        start = i
        if c in "(),":
            out.append(_Token("punct", c, i, i + 1))
            i += 1
        elif c in "=<>!":
            two = text[i : i + 2]
            if two in ("==", "!=", "<>", "<=", ">="):
                out.append(_Token("op", two, i, i + 2))
                i += 2
            elif c == "!":
                raise ExpressionError("unknown operator '!' (not equal is != or <>)", i, text)
            else:
                out.append(_Token("op", c, i, i + 1))
                i += 1
        elif c in "'\"`":
            i += 1
            parts = []
            while True:
                j = text.find(c, i)
                if j < 0:
                    what = "string" if c == "'" else "quoted name"
                    raise ExpressionError(f"unterminated {what}: no closing {c}", start, text)
                parts.append(text[i:j])
                if text[j + 1 : j + 2] == c:  # doubled quote: one quote character
                    parts.append(c)
                    i = j + 2
                    continue
                i = j + 1
                break
            out.append(_Token("string" if c == "'" else "quoted", "".join(parts), start, i))
        else:
            while i < n and text[i] not in _STOP:
                i += 1
            out.append(_Token("word", text[start:i], start, i))
    out.append(_Token("end", "", n, n))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0
        self.terms = 0

    # ------------------------------------------------------------ helpers
    @property
    def tok(self) -> _Token:
        return self.toks[self.i]

    def advance(self) -> _Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def error(self, message: str, at: _Token | int | None = None) -> ExpressionError:
        pos = at if isinstance(at, int) else (at or self.tok).start
        return ExpressionError(message, pos, self.text)

    def at_keyword(self, *words: str) -> bool:
        return self.tok.keyword in words

    def expect_keyword(self, word: str, context: str) -> _Token:
        if not self.at_keyword(word):
            raise self.error(f"expected {word} {context}, found {self.describe(self.tok)}")
        return self.advance()

    def describe(self, t: _Token) -> str:
        if t.kind == "end":
            return "the end of the expression"
        if t.kind == "string":
            return f"the string {self.text[t.start : t.end]}"
        return repr(self.text[t.start : t.end])

    # ------------------------------------------------------------ grammar
    def parse(self) -> Expression:
        if self.tok.kind == "end":
            raise self.error("empty expression")
        expr = self.or_()
        t = self.tok
        if t.kind == "punct" and t.text == ")":
            raise self.error("unbalanced parentheses: ')' without '('", t)
        if t.kind != "end":
            raise self.error(f"expected AND, OR or the end of the expression, found {self.describe(t)}", t)
        return expr

    def or_(self) -> Expression:
        terms = [self.and_()]
        while self.at_keyword("OR"):
            self.advance()
            terms.append(self.and_())
        return balanced(Or, terms)  # a long chain stays shallow (tree.balanced)

    def and_(self) -> Expression:
        terms = [self.unary()]
        while self.at_keyword("AND"):
            self.advance()
            terms.append(self.unary())
        return balanced(And, terms)

    def count(self, n: int, at: _Token) -> None:
        """``n`` more predicates; an error past tree.MAX_TERMS (the binder's limit, told early)."""
        self.terms += n
        if self.terms > MAX_TERMS:
            raise self.error(f"the expression has too many predicates (more than {MAX_TERMS:,}; IN (...) takes a long list of values as one)", at)

    def unary(self) -> Expression:
        t = self.tok
        if t.keyword == "NOT" or (t.kind == "punct" and t.text == "("):
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise self.error(f"the expression nests too deeply (more than {MAX_NESTING} parentheses or NOTs)")
            try:
                return self.negation() if t.keyword == "NOT" else self.parenthesised()
            finally:
                self.depth -= 1
        if t.keyword in ("TRUE", "FALSE") and self._ends_operand(self.toks[self.i + 1]):
            self.advance()
            self.count(1, t)
            return TRUE if t.keyword == "TRUE" else FALSE
        expr = self.predicate()
        self.count(2 if isinstance(expr, (And, Not)) else 1, t)  # a BETWEEN is two
        return expr

    def negation(self) -> Expression:
        self.advance()
        return Not(self.unary())

    def parenthesised(self) -> Expression:
        t = self.advance()
        expr = self.or_()
        if not (self.tok.kind == "punct" and self.tok.text == ")"):
            if self.tok.kind == "end":
                raise self.error("unbalanced parentheses: '(' is never closed", t)
            raise self.error(f"expected ')' or AND/OR, found {self.describe(self.tok)}")
        self.advance()
        return expr

    @staticmethod
    def _ends_operand(t: _Token) -> bool:
        return t.kind == "end" or (t.kind == "punct" and t.text == ")") or t.keyword in ("AND", "OR")

    def predicate(self) -> Expression:
        ref = self.column()
        t = self.tok
        if t.kind == "op":
            self.advance()
            return Predicate(_CMP[t.text], ref, (self.literal(f"after {t.text}"),))
        if t.kind == "word" and t.text.lower() in _OLD_UNARY:
            self.advance()
            return Predicate(_OLD_UNARY[t.text.lower()], ref)
        negated = False
        if t.keyword == "IS":
            self.advance()
            nt = self.at_keyword("NOT")
            if nt:
                self.advance()
            what = self.tok
            if what.keyword == "NULL":
                self.advance()
                return Predicate(Op.NOT_NULL if nt else Op.IS_NULL, ref)
            if what.keyword == "NAN":
                self.advance()
                return Predicate(Op.NOT_NAN if nt else Op.IS_NAN, ref)
            raise self.error(f"expected NULL or NAN after IS{' NOT' if nt else ''}, found {self.describe(what)}")
        if t.keyword == "NOT":
            negated = True
            self.advance()
            t = self.tok
            if t.keyword not in ("IN", "BETWEEN", "LIKE", "STARTS"):
                raise self.error(f"expected IN, BETWEEN, LIKE or STARTS WITH after NOT, found {self.describe(t)}")
        if t.keyword == "IN":
            self.advance()
            values = self.literal_list()
            return Predicate(Op.NOT_IN if negated else Op.IN, ref, values)
        if t.keyword == "BETWEEN":
            self.advance()
            lo = self.literal("after BETWEEN")
            self.expect_keyword("AND", "between the bounds of BETWEEN")
            hi = self.literal("after BETWEEN ... AND")
            expr: Expression = And(Predicate(Op.GE, ref, (lo,)), Predicate(Op.LE, ref, (hi,)))
            return Not(expr) if negated else expr
        if t.keyword == "STARTS":
            self.advance()
            self.expect_keyword("WITH", "after STARTS")
            prefix = self.literal("after STARTS WITH")
            return Predicate(Op.NOT_STARTS_WITH if negated else Op.STARTS_WITH, ref, (prefix,))
        if t.keyword == "LIKE":
            self.advance()
            return self.like(ref, negated)
        if t.kind == "end":
            raise self.error(f"expected an operator after the column {ref}, found the end of the expression")
        raise self.error(f"unknown operator {self.describe(t)} (expected one of = != < <= > >= IN BETWEEN LIKE STARTS WITH IS)")

    def like(self, ref: Reference, negated: bool) -> Expression:
        t = self.tok
        if t.kind != "string":
            raise self.error(f"LIKE takes a quoted pattern such as 'abc%', found {self.describe(t)}")
        self.advance()
        pattern, chars, i = t.text, [], 0
        while i < len(pattern):
            c = pattern[i]
            if c == "\\" and i + 1 < len(pattern) and pattern[i + 1] in "%_\\":
                chars.append(pattern[i + 1])
                i += 2
                continue
            if c in "%_" and not (c == "%" and i == len(pattern) - 1):
                raise self.error(
                    f"only LIKE 'prefix%' is supported (a prefix, then one % at the end; \\% and \\_ for the characters), not {pattern!r}", t
                )
            if c == "%":
                lit = Literal(LiteralKind.STRING, "".join(chars), t.start)
                return Predicate(Op.NOT_STARTS_WITH if negated else Op.STARTS_WITH, ref, (lit,))
            chars.append(c)
            i += 1
        lit = Literal(LiteralKind.STRING, "".join(chars), t.start)  # no wildcard: equality
        return Predicate(Op.NE if negated else Op.EQ, ref, (lit,))

    def column(self) -> Reference:
        t = self.tok
        if t.kind == "end":
            raise self.error("expected a column, found the end of the expression")
        if t.kind == "string":
            raise self.error(f'expected a column, found the string {self.text[t.start : t.end]} (quote column names with " or `)')
        if t.kind in ("op", "punct"):
            if t.text == ")":
                raise self.error("unbalanced parentheses: ')' without '('", t)
            raise self.error(f"expected a column, found {self.describe(t)}")
        if t.keyword is not None:
            raise self.error(f'expected a column, found the keyword {t.text} (quote a column of that name: "{t.text}")')
        parts: list[str] = []
        want_part = True  # a name must come next (at the start, and after a dot)
        end = t.start
        first = t
        while self.tok.kind in ("word", "quoted") and self.tok.start == end:  # adjacent: "s"."x", s.`x`
            t = self.tok
            if t.kind == "quoted":
                if not want_part:
                    raise self.error("expected '.' between the parts of a column name", t)
                if not t.text:
                    raise self.error("empty column name", t)
                parts.append(t.text)
                want_part = False
            else:
                want_part = self._word_parts(t, first, parts, want_part)
            end = t.end
            self.advance()
        if want_part:
            raise self.error("a column name must not end with '.'", end - 1)
        return Reference(tuple(parts), first.start)

    def _word_parts(self, t: _Token, first: _Token, parts: list[str], want_part: bool) -> bool:
        """The names of a word of a column (``a.b``, ``.b`` after a quoted name, ``a.``
        before one) appended to ``parts``; whether a name must come next."""
        for k, piece in enumerate(t.text.split(".")):
            if k > 0:  # a dot came before this piece
                if want_part:
                    raise self.error(f"bad column name {self.text[first.start : t.end]!r} (an empty part between dots)", t)
                want_part = True
            if piece == "":
                continue
            if not want_part:
                raise self.error("expected '.' between the parts of a column name", t)
            if not (piece[0].isalpha() or piece[0] == "_") or not all(ch.isalnum() or ch in "_$" for ch in piece):
                what = "a number" if _NUMBER.fullmatch(self.text[first.start : t.end]) else repr(piece)
                raise self.error(f'expected a column, found {what} (quote names with other characters: "{piece}")', t)
            parts.append(piece)
            want_part = False
        return want_part

    def literal_list(self) -> tuple[Literal, ...]:
        t = self.tok
        if not (t.kind == "punct" and t.text == "("):
            raise self.error(f"IN takes a list in parentheses such as (1, 2), found {self.describe(t)}")
        self.advance()
        values = [self.literal("in the IN list")]
        while self.tok.kind == "punct" and self.tok.text == ",":
            self.advance()
            values.append(self.literal("in the IN list"))
        if not (self.tok.kind == "punct" and self.tok.text == ")"):
            if self.tok.kind == "end":
                raise self.error("unbalanced parentheses: the IN list's '(' is never closed", t)
            raise self.error(f"expected ',' or ')' in the IN list, found {self.describe(self.tok)}")
        self.advance()
        return tuple(values)

    def literal(self, where: str) -> Literal:
        t = self.tok
        if t.kind == "string":
            self.advance()
            return Literal(LiteralKind.STRING, t.text, t.start)
        if t.kind == "word":
            kw = t.keyword
            if kw in ("TRUE", "FALSE"):
                self.advance()
                return Literal(LiteralKind.BOOLEAN, kw == "TRUE", t.start)
            if kw == "NULL":
                raise self.error("a comparison with NULL is never true: use IS NULL / IS NOT NULL", t)
            if kw == "NAN" or t.text.lower() in _FLOAT_WORDS:
                self.advance()
                return Literal(LiteralKind.NUMBER, t.text.lower(), t.start)
            if kw is not None:
                raise self.error(f"expected a value {where}, found the keyword {t.text} (quote it: '{t.text}')", t)
            self.advance()
            if _NUMBER.fullmatch(t.text):
                if math.isinf(float(t.text)):  # as Flight's JSON reader: no number silently becomes inf
                    shown = t.text if len(t.text) <= 40 else t.text[:39] + "…"
                    raise self.error(f"number {shown} is out of range (beyond float64; write inf for infinity)", t)
                return Literal(LiteralKind.NUMBER, t.text, t.start)
            return Literal(LiteralKind.STRING, t.text, t.start)  # a bare word reads as the quoted text
        if t.kind == "quoted":
            raise self.error(f"expected a value {where}, found the quoted name {self.text[t.start : t.end]} (strings take single quotes)", t)
        if t.kind == "end":
            raise self.error(f"expected a value {where}, found the end of the expression", t)
        raise self.error(f"expected a value {where}, found {self.describe(t)}", t)
