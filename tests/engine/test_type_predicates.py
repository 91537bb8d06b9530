"""engine/types.py is the one place that asks pyarrow what a type is.

The predicates are checked against the Arrow types they should and should not
take (pyarrow.types itself the oracle for the one-type predicates, the sets
written out for the families), and a guard fails on a raw ``pyarrow.types``
use anywhere else in engine/, flight_server/ and spark_bridge/.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.types as pt
import pytest

from engine import types as mt

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "flight_server", "spark_bridge")
#: the module that may (and alone does) import pyarrow.types
HOME = "engine/types.py"
#: paths still to follow (an entry per package not yet clean; none left since issue #32)
ALLOWED: tuple[str, ...] = ()

TYPES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint64": pa.uint64(),
    "float16": pa.float16(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "decimal32": pa.decimal32(5, 2),
    "decimal64": pa.decimal64(12, 2),
    "decimal128": pa.decimal128(20, 2),
    "decimal256": pa.decimal256(60, 2),
    "date32": pa.date32(),
    "date64": pa.date64(),
    "time32": pa.time32("ms"),
    "time64": pa.time64("ns"),
    "timestamp": pa.timestamp("us"),
    "timestamp_tz": pa.timestamp("ns", tz="Europe/Paris"),
    "duration": pa.duration("s"),
    "interval": pa.month_day_nano_interval(),
    "string": pa.string(),
    "large_string": pa.large_string(),
    "string_view": pa.string_view(),
    "binary": pa.binary(),
    "large_binary": pa.large_binary(),
    "binary_view": pa.binary_view(),
    "fixed_size_binary": pa.binary(4),
    "list": pa.list_(pa.int32()),
    "large_list": pa.large_list(pa.int32()),
    "fixed_size_list": pa.list_(pa.int32(), 2),
    "list_view": pa.list_view(pa.int32()),
    "large_list_view": pa.large_list_view(pa.int32()),
    "map": pa.map_(pa.string(), pa.int32()),
    "struct": pa.struct([("a", pa.int32())]),
    "union": pa.dense_union([pa.field("a", pa.int32())]),
    "run_end_encoded": pa.run_end_encoded(pa.int32(), pa.string()),
    "dictionary": pa.dictionary(pa.int8(), pa.string()),
    "uuid": pa.uuid(),
}

INTEGERS = {"int8", "int64", "uint8", "uint64"}
FLOATS = {"float16", "float32", "float64"}
DECIMALS = {"decimal32", "decimal64", "decimal128", "decimal256"}
TICKS = {"date32", "date64", "time32", "time64", "timestamp", "timestamp_tz", "duration"}
STRINGS = {"string", "large_string", "string_view"}
BINARIES = {"binary", "large_binary", "binary_view", "fixed_size_binary"}
LISTS = {"list", "large_list", "fixed_size_list", "list_view", "large_list_view"}
NESTED = LISTS | {"map", "struct", "union", "run_end_encoded"}

FAMILIES: dict[str, set[str]] = {
    "is_offset_string": {"string", "large_string"},
    "is_offset_binary": {"binary", "large_binary"},
    "is_variable_binary": {"binary", "large_binary", "binary_view"},
    "is_list_like": LISTS,
    "is_integer_temporal": TICKS,
    "is_temporal32": {"date32", "time32"},
    "is_string_like": STRINGS,
    "is_binary_like": BINARIES,
    "is_temporal": TICKS | {"interval"},
    "is_nested": NESTED,
    "is_numeric": INTEGERS | FLOATS | DECIMALS,
    "is_native_number": INTEGERS | FLOATS,
    "is_fractional": FLOATS | DECIMALS,
    "is_exact_number": INTEGERS | DECIMALS,
    "is_discrete": STRINGS | BINARIES | INTEGERS | DECIMALS | {"bool", "date32", "date64"},
    "has_length": STRINGS | BINARIES,
    "has_percentiles": INTEGERS | FLOATS | DECIMALS | TICKS,
    "is_orderable": set(TYPES) - NESTED - {"null", "interval", "dictionary"},
    "is_extension": {"uuid"},
}


def _predicates() -> dict[str, Callable[[pa.DataType], bool]]:
    return {
        name: f
        for name, f in vars(mt).items()
        if (name.startswith("is_") or name.startswith("has_")) and inspect.isfunction(f) and f.__module__ == mt.__name__
    }


def _accepted(predicate: Callable[[pa.DataType], bool]) -> set[str]:
    return {name for name, t in TYPES.items() if predicate(t)}


ONE_TYPE = sorted(name for name in _predicates() if name not in FAMILIES)


@pytest.mark.parametrize("name", ONE_TYPE)
def test_one_type_predicate_is_pyarrows(name: str) -> None:
    # a predicate that is not a family keeps pyarrow's name and meaning
    oracle = getattr(pt, name)
    accepted = _accepted(getattr(mt, name))
    assert accepted == _accepted(oracle)
    assert accepted, f"no sample type for {name}: add one to TYPES"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_predicate(name: str) -> None:
    assert _accepted(getattr(mt, name)) == FAMILIES[name]


@pytest.mark.parametrize("name", sorted(_predicates()))
def test_predicate_says_what_it_takes(name: str) -> None:
    doc = getattr(mt, name).__doc__
    assert doc and doc.strip(), f"{name} has no docstring"


def test_without_dictionary() -> None:
    assert mt.without_dictionary(pa.dictionary(pa.int16(), pa.large_string())) == pa.large_string()
    for t in TYPES.values():
        if not pt.is_dictionary(t):
            assert mt.without_dictionary(t) is t


def test_histogram_domain() -> None:
    by_domain = {name: mt.histogram_domain(t) for name, t in TYPES.items()}
    assert {n for n, d in by_domain.items() if d is mt.HistogramDomain.INTEGER} == INTEGERS | TICKS
    assert {n for n, d in by_domain.items() if d is mt.HistogramDomain.FLOAT} == FLOATS | DECIMALS


def _pyarrow_names(tree: ast.Module) -> set[str]:
    """Names the module binds to the pyarrow package (import pyarrow [as pa])."""
    return {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names if a.name == "pyarrow"}


def _raw_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    pyarrow = _pyarrow_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("pyarrow.types")]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module.startswith("pyarrow.types") or (node.module == "pyarrow" and any(a.name == "types" for a in node.names)):
                found.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Attribute) and node.attr == "types":
            if isinstance(node.value, ast.Name) and node.value.id in pyarrow:
                found.append(f"{node.lineno}: {node.value.id}.types")
    return found


def test_no_raw_pyarrow_types_outside_engine_types() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel == HOME or rel.startswith(ALLOWED):
                continue
            offenders += [f"{rel}:{use}" for use in _raw_uses(path)]
    assert not offenders, "ask engine.types (add a named predicate there), not pyarrow.types:\n" + "\n".join(offenders)


def test_guard_sees_each_form(tmp_path: Path) -> None:
    # the guard would catch what it claims to: each form of a raw use, and not the engine.types ones
    source = tmp_path / "m.py"
    source.write_text(
        "import pyarrow as pa\nimport pyarrow.types as pt\nfrom pyarrow import types\nfrom pyarrow.types import is_string\n"
        "from engine import types as mt\npa.types.is_integer(pa.int8())\nmt.is_integer(pa.int8())\n"
    )
    assert sorted(int(u.split(":")[0]) for u in _raw_uses(source)) == [2, 3, 4, 6]
    assert _raw_uses(REPO / HOME), "engine/types.py itself imports pyarrow.types: the guard's parser must see it"
