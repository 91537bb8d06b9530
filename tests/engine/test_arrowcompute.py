"""engine/arrowcompute.py: every kernel it calls by name gives what pyarrow.compute gives.

pyarrow.compute is the oracle (imported here, in the test process only); the inputs hold
nulls, empty strings, slices (non-zero offsets) and chunked arrays, and every error the
read path relies on (a checked cast, a checked multiplication) must still be raised.
"""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine import arrowcompute as ac

REPO = Path(__file__).resolve().parents[2]

STRINGS = pa.array(["12", "-0042", None, "", "x7", "3.25", "0010", "-"]).slice(1)
INTS = pa.array([5, None, -3, 0, 2**40, 7], pa.int64())
BOOLS = pa.array([True, None, False, True, False, None])
STRUCTS = pa.array([{"lower": 1.0, "upper": 2.0, "count": 3}, None, {"lower": 2.0, "upper": 4.5, "count": 0}])

CASES = [
    ("cast", (STRINGS.slice(0, 2), pa.int32()), {}),
    ("cast", (INTS, pa.string()), {}),
    ("cast", (pa.array([1.5, None, -2.25]), pa.int8()), {"safe": False}),
    ("cast", (pa.chunked_array([INTS, INTS.slice(2)]), pa.float64()), {}),
    ("cast", (pa.scalar(7, pa.int64()), pa.int16()), {}),
    ("dictionary_encode", (STRINGS,), {}),
    ("fill_null", (STRINGS, "zz"), {}),
    ("fill_null", (INTS, -1), {}),
    ("fill_null", (INTS, pa.scalar(9, pa.int32())), {}),
    ("take", (pa.table({"a": INTS, "b": INTS}), pa.array([4, 0, 0], pa.int64())), {}),
    ("take", (STRINGS, pa.array([3, None, 0])), {}),
    ("struct_field", (STRUCTS, "upper"), {}),
    ("struct_field", (STRUCTS, "count"), {}),
    ("equal", (STRINGS, "12"), {}),
    ("or_", (BOOLS, BOOLS.slice(1).fill_null(True).take(pa.array([0, 1, 2, 3, 4, 4]))), {}),
    ("invert", (BOOLS,), {}),
    ("if_else", (BOOLS, INTS, pa.scalar(0)), {}),
    ("is_valid", (STRINGS,), {}),
    ("all", (BOOLS,), {"skip_nulls": True, "min_count": 0}),
    ("all", (pa.array([], pa.bool_()),), {"skip_nulls": True, "min_count": 0}),
    ("all", (BOOLS.slice(0, 1),), {}),
    ("is_in", (INTS, pa.array([0, 7, None], pa.int64())), {}),
    ("is_in", (INTS, pa.array([0, 7, None], pa.int64())), {"skip_nulls": True}),
    ("index_in", (STRINGS, pa.array(["", "12", "x7"])), {}),
    ("index", (STRINGS, "x7"), {}),
    ("index", (STRINGS, "absent"), {}),
    ("index", (INTS, pa.scalar(0, pa.int8())), {}),
    ("add_checked", (INTS, 1), {}),
    ("multiply_checked", (INTS, 3), {}),
    ("match_substring", (STRINGS, "X"), {"ignore_case": True}),
    ("match_substring_regex", (STRINGS, r"^-?[0-9]+$"), {}),
    ("starts_with", (STRINGS, "-"), {}),
    ("extract_regex", (STRINGS, r"^(?P<sign>-?)(?P<digits>[0-9]*)$"), {}),
    ("ascii_lpad", (STRINGS, 5), {"padding": "0"}),
    ("ascii_rpad", (STRINGS, 3), {"padding": "0"}),
    ("ascii_ltrim", (STRINGS, "-0"), {}),
    ("utf8_slice_codeunits", (STRINGS, 0, -1), {}),
    ("utf8_slice_codeunits", (STRINGS, -2), {}),
    ("binary_join_element_wise", (STRINGS, STRINGS, "."), {}),
    ("binary_join_element_wise", ("-", STRINGS, ""), {}),
    ("binary_length", (pa.array([b"ab", None, b""]),), {}),
    ("utf8_length", (pa.array(["ab", None, "", "é€"]),), {}),
    ("is_nan", (pa.array([1.5, None, float("nan"), -0.0]),), {}),
    ("sum", (INTS,), {}),
    ("sum", (pa.array([], pa.int64()),), {}),
    ("sum", (pa.array([None], pa.int64()),), {"min_count": 0}),
    ("sum", (pa.array([Decimal("1.50"), None, Decimal("-0.25")], pa.decimal256(76, 2)),), {}),
    ("max", (INTS,), {}),
    ("max", (pa.array([None, None], pa.int32()),), {}),
    ("max", (INTS,), {"skip_nulls": False}),
    ("list_value_length", (pa.array([[1, 2], None, []]),), {}),
]


@pytest.mark.parametrize(("name", "args", "kwargs"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_kernel_gives_what_pyarrow_compute_gives(name: str, args: tuple, kwargs: dict) -> None:
    expected = getattr(pc, name)(*args, **kwargs)
    got = getattr(ac, name)(*args, **kwargs)
    assert type(got) is type(expected)
    assert got.equals(expected), (name, got, expected)
    assert getattr(got, "type", None) == getattr(expected, "type", None)  # (a Table has a schema, equal above)


def test_every_exported_name_is_checked() -> None:
    assert {c[0] for c in CASES} | {"byte_buffers", "call_function", "contiguous"} == set(ac.__all__)


@pytest.mark.parametrize(
    "chunked",
    [
        pa.chunked_array([], pa.string()),
        pa.chunked_array([pa.array(["a", None, "c"])]),
        pa.chunked_array([pa.array(["a", None, "c", "d"]).slice(1, 2)]),
        pa.chunked_array([pa.array([1, 2]), pa.array([3]).slice(0, 0), pa.array([None, 5])]),
    ],
)
def test_contiguous_equals_combine_chunks_and_copies_no_single_chunk(chunked: pa.ChunkedArray) -> None:
    got = ac.contiguous(chunked)
    assert isinstance(got, pa.Array) and got.equals(chunked.combine_chunks()) and got.type == chunked.type
    if chunked.num_chunks == 1:  # the chunk itself, its buffers shared
        assert got.buffers()[-1].address == chunked.chunk(0).buffers()[-1].address
    assert ac.contiguous(got) is got


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("cast", (pa.array(["1", "x"]), pa.int64()), {}),
        ("cast", (pa.array([300]), pa.int8()), {}),
        ("multiply_checked", (pa.array([2**62]), 4), {}),
        ("take", (INTS, pa.array([99])), {}),
    ],
)
def test_errors_are_pyarrow_computes(name: str, args: tuple, kwargs: dict) -> None:
    with pytest.raises(pa.ArrowException) as expected:
        getattr(pc, name)(*args, **kwargs)
    with pytest.raises(type(expected.value)):
        getattr(ac, name)(*args, **kwargs)


def test_importing_it_leaves_pyarrow_compute_unloaded() -> None:
    # pandas kept out as the read commands keep it out (engine.cli.console._without_pandas):
    # pyarrow's first pa.array would import it, and it imports pyarrow.compute
    code = (
        "import sys\n"
        "from engine.cli.console import _without_pandas\n"
        "_without_pandas()\n"
        "import pyarrow as pa\n"
        "from engine import arrowcompute as ac, values\n"
        "ac.take(pa.table({'a': [1, 2]}), pa.array([1]))\n"
        "values.decode_scalar('2024-02-29T12:00:00.000001', pa.timestamp('us'))\n"
        "values.decode(pa.array(['1.5', None, '-0.05']), pa.decimal128(5, 2))\n"
        "print('pyarrow.compute' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO), env={"PYTHONPATH": str(REPO)}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
