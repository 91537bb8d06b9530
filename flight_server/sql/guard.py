"""What SQL the SQL face runs: one SELECT over the system tables, checked before it runs.

:func:`check` refuses (:class:`Refused`) everything but a single ``SELECT`` (``WITH`` and
set operations included): DDL, DML, ``COPY``, ``ATTACH``, ``INSTALL``/``LOAD``, ``SET``,
``PRAGMA``, ``CALL``, ``EXPORT``, ``EXPLAIN``, ``DESCRIBE``/``SHOW``. Inside the SELECT,
from DuckDB's own parse tree (``json_serialize_sql``):

- a table is one of the system tables (flight_server/sql/tables.py) or a CTE of the query,
  unqualified: no file paths, no other schema (``information_schema``, ``duckdb_*`` views);
- a table function is one of :data:`TABLE_FUNCTIONS` (``range``, ``generate_series``,
  ``unnest``): no ``read_*``, ``glob``, ``query``, ``duckdb_settings()``;
- no function of :data:`DENIED_FUNCTIONS` (settings, environment, variables) nor any
  ``duckdb_*`` / ``pragma_*`` function.

DuckDB's own switches (flight_server/sql/engine.py) stand behind these checks: external
access off, configuration locked, no extension loading.

:func:`table_filters` reads, from the same tree, which metastore tables each system
table reference can need: a reference whose SELECT has ``table_name = 'x'`` or
``table_name IN ('x', ...)`` (or ``= ?`` with a bound text) among the top-level ANDs of
its WHERE needs only those tables; a system table referenced anywhere else needs all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from flight_server.sql.tables import NAMES

MAX_QUERY_CHARS = 100_000
#: what GetTables calls the system tables' catalog and schema; a query may qualify a table with them
CATALOG, SCHEMA = "metastore", "main"
TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
DENIED_FUNCTIONS = frozenset(
    {
        "current_setting",
        "getenv",
        "getvariable",
        "query",
        "query_table",
        "sql_auto_complete",
        "which_secret",
        "json_serialize_sql",
        "json_deserialize_sql",
        "json_serialize_plan",
        "json_execute_serialized_sql",
        "read_text",
        "read_blob",
        "glob",
        "enable_logging",
        "disable_logging",
        "truncate_duckdb_logs",
    }
)
#: system tables whose rows change without a new published state (stale_by; a pruned catalog)
VARYING_TABLES = frozenset({"tables", "history"})
_VARYING = re.compile(r"random|uuid|now|today|current|time|date|epoch|nextval|currval|setseed|txid|version", re.IGNORECASE)
#: scalar functions whose result's size an argument sets (repeat('x', 2e9) is one 2 GB value:
#: DuckDB's memory limit does not cover single values, nor can interrupt() stop it midway)
SIZED_FUNCTIONS = frozenset({"repeat", "lpad", "rpad", "printf", "format", "list_resize", "array_resize", "range", "generate_series", "bar"})
DENIED_PREFIXES = ("duckdb_", "pragma_", "read_", "parquet_", "iceberg_", "delta_")
_TABLE_REFS = frozenset({"BASE_TABLE", "JOIN", "SUBQUERY", "TABLE_FUNCTION", "EMPTY", "EMPTY_FROM", "EXPRESSION_LIST"})


class Refused(Exception):
    """A statement the SQL face does not run (the message says why)."""


class BadQuery(Exception):
    """A statement DuckDB cannot parse (the message is DuckDB's)."""


@dataclass(frozen=True)
class Checked:
    """A statement that passed :func:`check`: its text, system tables and what they need."""

    sql: str
    tables: frozenset[str]  # the system tables it references
    filters: Filters  # what the table_name predicates allow (table_filters)
    parameters: int  # how many ? / $n parameters
    cacheable: bool = False  # its result is fixed by the published states (see SqlEngine)


def check(sql: str, con: duckdb.DuckDBPyConnection) -> Checked:
    """``sql`` if the SQL face may run it, else :class:`Refused` / :class:`BadQuery`.
    ``con``: a locked-down connection to parse with (json_serialize_sql)."""
    if len(sql) > MAX_QUERY_CHARS:
        raise Refused(f"the query is longer than {MAX_QUERY_CHARS:,} characters")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise BadQuery(one_line(exc)) from None
    if len(statements) != 1:
        raise Refused(f"one statement per query, not {len(statements)}")
    statement_type = statements[0].type
    if statement_type != duckdb.StatementType.SELECT:
        raise Refused(f"{statement_type.name} statements are refused: this SQL face is read-only and runs SELECT queries only")
    raw = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]).fetchone()
    tree: dict[str, Any] = json.loads(raw[0]) if raw else {"error": True, "error_message": "cannot parse"}
    if tree.get("error"):
        message = str(tree.get("error_message") or "cannot parse")
        if "Only SELECT" in message:  # DESCRIBE, SHOW, SUMMARIZE, PIVOT...: SELECT-typed, not plain SELECTs
            raise Refused("only plain SELECT queries are run (not DESCRIBE, SHOW, SUMMARIZE or PIVOT)")
        raise BadQuery(message)
    ctes = {str(k).lower() for k in _cte_names(tree)}
    tables: set[str] = set()
    table_calls = {id(n.get("function")) for n in _nodes(tree) if n.get("type") == "TABLE_FUNCTION"}
    for node in _nodes(tree):
        kind = node.get("type")
        if (node.get("class") == "FUNCTION" or kind == "FUNCTION") and id(node) not in table_calls:
            _check_function(node)
        elif kind == "TABLE_FUNCTION":
            name = str((node.get("function") or {}).get("function_name", "")).lower()
            if name not in TABLE_FUNCTIONS:
                raise Refused(f"table function {name}() is not allowed: only {', '.join(sorted(TABLE_FUNCTIONS))} and the system tables")
        elif kind == "BASE_TABLE":
            tables |= _check_table(node, ctes)
        elif kind == "SHOW_REF":
            raise Refused("DESCRIBE, SHOW and SUMMARIZE are not run: browse the tables with the Flight SQL catalog calls (GetTables)")
        elif _is_table_ref(node) and kind not in _TABLE_REFS:
            raise Refused(f"{str(kind).lower().replace('_', ' ')} is not allowed in a query")
    params = tree["statements"][0].get("named_param_map") or []
    if any(not str(p.get("key", "")).isdigit() for p in params):
        raise Refused("named parameters ($name) are not supported: use ? or $1, $2, ...")
    if _unqualify(tree, ctes):  # run what was checked, without the catalog and schema DuckDB does not know
        row = con.execute("SELECT json_deserialize_sql(?::JSON)", [json.dumps(tree)]).fetchone()
        sql = str(row[0]) if row else sql
    cacheable = not (tables & VARYING_TABLES) and not any(_varies(n) for n in _nodes(tree))
    return Checked(sql=sql, tables=frozenset(tables), filters=compile_filters(tree, frozenset(tables)), parameters=len(params), cacheable=cacheable)


def _varies(node: dict[str, Any]) -> bool:
    """A function whose value is not fixed by its arguments (time, randomness, sequences);
    ``current_date`` and its kin parse as column names (a false match only costs the cache)."""
    if node.get("class") == "FUNCTION" or node.get("type") == "FUNCTION":
        return bool(_VARYING.search(str(node.get("function_name", ""))))
    if node.get("type") == "COLUMN_REF":
        names = node.get("column_names") or []
        return len(names) == 1 and bool(_VARYING.search(str(names[0])))
    return False


def _unqualify(tree: dict[str, Any], ctes: set[str]) -> bool:
    """Drop ``metastore.main.`` from the system tables' references; whether any was qualified."""
    changed = False
    for node in _nodes(tree):
        if node.get("type") == "BASE_TABLE" and (node.get("schema_name") or node.get("catalog_name")):
            node["schema_name"] = node["catalog_name"] = ""
            node["qualified_name"] = {"path": [node.get("table_name", "")]}
            changed = True
    return changed


def one_line(exc: BaseException) -> str:
    """An error's whole message on one line (its lines and spaces joined by single spaces; not
    engine.exceptions.first_line, which keeps the first line only)."""
    return " ".join(str(exc).split())


def _nodes(value: object) -> Iterator[dict[str, Any]]:
    """Every object of the parse tree, depth first."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _cte_names(tree: dict[str, Any]) -> Iterator[str]:
    for node in _nodes(tree):
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            for entry in cte_map.get("map") or []:
                if isinstance(entry, dict) and "key" in entry:
                    yield entry["key"]


def _is_table_ref(node: dict[str, Any]) -> bool:
    """A FROM item (not an expression, not a query node)."""
    return "class" not in node and "sample" in node and "alias" in node and not str(node.get("type", "")).endswith("_NODE")


def _check_function(node: dict[str, Any]) -> None:
    name = str(node.get("function_name", "")).lower()
    if name in DENIED_FUNCTIONS or name.startswith(DENIED_PREFIXES):
        raise Refused(f"function {name}() is not allowed: it reads the server's settings, environment or files")
    if name in SIZED_FUNCTIONS:
        raise Refused(f"function {name}() is not allowed: an argument sets the size of its result (a memory risk for the server)")


def _check_table(node: dict[str, Any], ctes: set[str]) -> set[str]:
    name = str(node.get("table_name", ""))
    catalog, schema = node.get("catalog_name") or "", node.get("schema_name") or ""
    ours = (catalog, schema) in (("", ""), ("", SCHEMA), (CATALOG, SCHEMA))
    if not ours or node.get("at_clause"):
        raise Refused(f"table {_shown(node)} is not one of the system tables: {', '.join(NAMES)}")
    if name.lower() in ctes:
        return set()
    if name not in NAMES:
        raise Refused(f"unknown table {_shown(node)}: the tables are {', '.join(NAMES)}")
    return {name}


def _shown(node: dict[str, Any]) -> str:
    parts = [node.get("catalog_name"), node.get("schema_name"), node.get("table_name")]
    text = ".".join(str(p) for p in parts if p)
    return repr(text if len(text) <= 80 else text[:79] + "…")


# ================================================================ which metastore tables
#: a value ``table_name`` is compared with: a text constant, or a parameter's index (0-based)
Atom = str | int
#: per system table, one tuple of atoms per reference (the tables it may need), or None (all)
Filters = dict[str, tuple[tuple[Atom, ...], ...] | None]


def compile_filters(tree: dict[str, Any], tables: frozenset[str]) -> Filters:
    """Per system table the query references, what its ``table_name`` predicates allow
    (kept instead of the parse tree: a long query's tree is megabytes)."""
    ctes = {str(k).lower() for k in _cte_names(tree)}
    refs: dict[int, str] = {}
    for node in _nodes(tree):
        if node.get("type") == "BASE_TABLE" and node.get("table_name") in tables and str(node.get("table_name")).lower() not in ctes:
            refs[id(node)] = node["table_name"]
    specs: dict[str, list[tuple[Atom, ...]] | None] = {name: [] for name in refs.values()}
    seen: set[int] = set()
    for node in _nodes(tree):
        source = node.get("from_table")
        if node.get("type") != "SELECT_NODE" or not isinstance(source, dict) or id(source) not in refs:
            continue
        seen.add(id(source))
        name = refs[id(source)]
        atoms = _restriction(node.get("where_clause"), source.get("alias") or name)
        held = specs[name]
        specs[name] = None if atoms is None or held is None else [*held, atoms]
    for ref, name in refs.items():
        if ref not in seen:
            specs[name] = None
    return {name: None if spec is None else tuple(spec) for name, spec in specs.items()}


def table_filters(checked: Checked, parameters: Sequence[object] = ()) -> dict[str, frozenset[str] | None]:
    """Per system table the query references, the metastore tables it can need (None: all)."""
    needs: dict[str, frozenset[str] | None] = {}
    for name, spec in checked.filters.items():
        allowed: set[str] | None = None if spec is None else set()
        for atoms in spec or ():
            values = [a if isinstance(a, str) else (parameters[a] if a < len(parameters) else None) for a in atoms]
            texts = [v for v in values if isinstance(v, str)]
            if allowed is None or len(texts) < len(values):
                allowed = None  # a parameter bound to something else than a text: no restriction
                break
            allowed.update(texts)
        needs[name] = None if allowed is None else frozenset(allowed)
    return needs


def _restriction(where: object, alias: str) -> tuple[Atom, ...] | None:
    """The values the top-level ANDs of ``where`` allow for ``table_name``, or None."""
    if not isinstance(where, dict):
        return None
    conjuncts = where.get("children", []) if where.get("type") == "CONJUNCTION_AND" else [where]
    for c in conjuncts:
        if not isinstance(c, dict):
            continue
        if c.get("type") == "COMPARE_EQUAL":
            sides = [c.get("left"), c.get("right")]
            for col, other in (sides, sides[::-1]):
                if _is_table_name(col, alias):
                    atom = _atom(other)
                    if atom is not None:
                        return (atom,)
        if c.get("type") == "COMPARE_IN":
            children = c.get("children") or []
            if children and _is_table_name(children[0], alias):
                atoms = [_atom(v) for v in children[1:]]
                if atoms and all(a is not None for a in atoms):
                    return tuple(a for a in atoms if a is not None)
    return None


def _is_table_name(node: object, alias: str) -> bool:
    if not isinstance(node, dict) or node.get("type") != "COLUMN_REF":
        return False
    names = node.get("column_names") or []
    return names == ["table_name"] or (len(names) == 2 and names[0] == alias and names[1] == "table_name")


def _atom(node: object) -> Atom | None:
    """A text constant, or a parameter (its 0-based index)."""
    if not isinstance(node, dict):
        return None
    if node.get("type") == "VALUE_CONSTANT":
        literal = node.get("literal")  # DuckDB 2.0: {"kind": "STRING", "text": ...}
        if isinstance(literal, dict) and literal.get("kind") == "STRING" and isinstance(literal.get("text"), str):
            return str(literal["text"])
        return None
    if node.get("type") == "VALUE_PARAMETER":
        try:
            return int(node.get("identifier", "0")) - 1
        except ValueError:
            return None
    return None
