"""Column paths are sequences: a top-level column ``s.x`` and field ``x`` of a struct ``s``
are two columns, analyzed and looked up apart (issue #21, item 11)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.api import analyze, open_statistics
from engine.columns import column_name, column_path, display_name, display_path, leaf_columns, parse_display_name, select
from engine.exceptions import InvalidArgumentError


@given(st.lists(st.text(alphabet=st.sampled_from("ab.\\x"), max_size=5), min_size=1, max_size=4))
def test_column_name_round_trips_every_path(path):
    assert column_path(column_name(tuple(path))) == tuple(path)


@given(
    st.lists(st.text(alphabet=st.sampled_from("ab.\\"), max_size=4), min_size=1, max_size=3),
    st.lists(st.text(alphabet=st.sampled_from("ab.\\"), max_size=4), min_size=1, max_size=3),
)
def test_different_paths_have_different_names(p, q):
    assert (column_name(tuple(p)) == column_name(tuple(q))) == (tuple(p) == tuple(q))


@given(st.lists(st.text(alphabet=st.sampled_from("ab.\\ >"), max_size=5), min_size=1, max_size=4))
def test_display_form_is_the_path_as_in_the_data(path):
    stored = column_name(tuple(path))
    assert display_path(stored) == list(path) and display_name(stored) == display_name(tuple(path)) == " > ".join(path)
    if len(path) > 1 and not any(">" in c for c in path):  # a leaf's display form reads back as its path
        assert parse_display_name(display_name(stored)) == tuple(path)
    if len(path) == 1:  # a top-level column is shown as it is named in the data
        assert display_name(stored) == path[0]


def test_plain_names_are_stored_as_they_are():
    assert column_name(("price",)) == "price" and column_name(("address", "city")) == "address.city"
    assert column_name(("s.x",)) == "s\\.x" and column_name(("s", "x")) == "s.x"


def test_leaves_of_a_dotted_column_beside_a_struct_are_distinct_and_selectable():
    schema = pa.schema([("s.x", pa.int64()), ("s", pa.struct([("x", pa.float64()), ("y", pa.string())]))])
    leaves = leaf_columns(schema)
    assert [(l.name, l.full_path) for l in leaves] == [("s\\.x", ("s.x",)), ("s.x", ("s", "x")), ("s.y", ("s", "y"))]
    assert [l.name for l in select(leaves, ["s.x"])] == ["s.x"]  # a leaf name wins over a top-level name
    assert [l.name for l in select(leaves, ["s\\.x"])] == ["s\\.x"]
    assert [l.name for l in select(leaves, [("s.x",)])] == ["s\\.x"]
    assert [l.name for l in select(leaves, ["s"])] == ["s.x", "s.y"]
    with pytest.raises(InvalidArgumentError, match="unknown column"):
        select(leaves, ["t"])


@pytest.mark.ray
def test_a_top_level_dotted_column_and_a_struct_field_are_analyzed_and_looked_up_apart(ray_runtime, tmp_path):
    rng = np.random.default_rng(7)
    n = 500
    top = pa.array(rng.integers(0, 10, n), pa.int64())  # top-level "s.x"
    fx = pa.array(rng.integers(1000, 1100, n), pa.int64())  # s -> x
    fy = pa.array([f"v{i % 5}" for i in range(n)], pa.string())
    t = pa.table({"s.x": top, "s": pa.StructArray.from_arrays([fx, fy], names=["x", "y"])})
    (tmp_path / "t" / "p=0").mkdir(parents=True)
    pq.write_table(t, tmp_path / "t" / "p=0" / "a.parquet")
    store = str(tmp_path / "store")
    result = analyze(str(tmp_path / "t"), store=store, user_statistics=[])
    ts = open_statistics(store, result.table)
    assert ts.statistics()["column"].to_pylist() == ["s\\.x", "s.x", "s.y", "p"]
    # oracle: pyarrow.compute on the generated columns
    for asked, arr in ((("s.x",), top), ("s\\.x", top), ("s.x", fx), (("s", "x"), fx)):
        r = ts.column_statistics(asked)
        assert (r["min"], r["max"], r["distinct_count"]) == (pc.min(arr).as_py(), pc.max(arr).as_py(), len(pc.unique(arr))), asked
        top_values = ts.top_frequencies(asked, 3, typed=True)
        vc = pc.value_counts(arr).to_pylist()
        best = max(c["counts"] for c in vc)
        assert top_values["frequency"].to_pylist()[0] == best
        assert sum(ts.histogram(asked)["count"].to_pylist()) == n
    # the top-level column by its name as in the data: the struct leaf of the same text wins
    assert ts.column_statistics("s.x")["max"] == pc.max(fx).as_py()
    assert ts.resolve_column("s.y") == "s.y"
    # the names of a request at once (the Flight server's hot path): each as resolve_column has it
    for names in (["s.x", "s.y", "p"], ["s\\.x", "s > x", "s.x"], ["s.y", "nope", "s > y"], []):
        assert ts.resolve_columns(names) == tuple(ts.resolve_column(n) for n in names), names
