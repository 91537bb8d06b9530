"""The UI app over HTTP (no browser): the JSON endpoints equal the lookups API, 404s name what is
unknown, a damaged file gives an error card, and the Host check, tokens and security headers."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pytest
from conftest import EVIL_COLUMN

pytestmark = pytest.mark.ray


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=60) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def get_json(url: str) -> dict:
    status, _, body = get(url)
    assert status == 200, body
    return json.loads(body)


def q(**params: object) -> str:
    return urllib.parse.urlencode(params)


# ---------------------------------------------------------------- JSON equals the API
def test_api_tables_lists_every_table_with_its_rows(ui_store, ui_url) -> None:
    from engine.lookup import open_statistics

    doc = get_json(f"{ui_url}/api/tables")
    by_name = {t["name"]: t for t in doc["tables"]}
    assert set(by_name) == {"sales", "wide", "evil", "damaged"}
    for name, t in by_name.items():
        ts = open_statistics(ui_store.store, name)
        assert t["rows"] == ts.manifest["rows"]
        assert t["partitions"] == len(ts.partitions())
        assert t["snapshot"] == ts.snapshot and t["txn_id"] == ts.txn_id
        assert t["stale_by"] is None  # unknown until source snapshots are tracked (issue #14)
    assert by_name["sales"]["rows"] == ui_store.second.rows
    assert by_name["wide"]["columns"] == 301  # 300 + the partition column


def test_api_card_equals_the_lookups(ui_store, ui_url) -> None:
    from engine.cli.output import to_jsonable
    from engine.lookup import open_statistics

    ts = open_statistics(ui_store.store, "sales")
    for column in ("price", "city", "event_time", "amount"):
        card = get_json(f"{ui_url}/api/tables/sales/card?{q(column=column, top=5, bars=25)}")
        assert card["statistics"] == to_jsonable(ts.column_statistics(column))
        stats = ts.column_statistics(column)
        if stats["frequencies"] is not None:
            top = ts.top_frequencies(column, 5)
            assert [v["count"] for v in card["top"]["values"]] == top["frequency"].to_pylist()
        if stats["histogram_bins"]:
            counts = np.array(ts.histogram(column)["count"].to_pylist())
            edges = [i * len(counts) // 25 for i in range(25)]
            assert [b["count"] for b in card["histogram"]["bars"]] == np.add.reduceat(counts, edges).tolist()
            non_null = stats["row_count"] - stats["null_count"] - (stats["nan_count"] or 0)
            assert card["histogram"]["counted"] == non_null


def test_api_card_with_a_partition_beside_the_table(ui_store, ui_url) -> None:
    from engine.cli.output import to_jsonable
    from engine.lookup import open_statistics

    ts = open_statistics(ui_store.store, "sales")
    key = ts.partitions()[1].key
    card = get_json(f"{ui_url}/api/tables/sales/card?{q(column='quantity', partition=key)}")
    assert card["other_statistics"] == to_jsonable(ts.column_statistics("quantity", key))
    part_counts = np.array(ts.histogram("quantity", key)["count"].to_pylist())
    assert sum(b["other"] for b in card["histogram"]["bars"]) == part_counts.sum() == card["histogram"]["other_counted"]


def test_api_histogram_zoom_reads_a_bin_range_or_a_value_range(ui_store, ui_url) -> None:
    from engine.lookup import open_statistics

    ts = open_statistics(ui_store.store, "sales")
    h = get_json(f"{ui_url}/api/tables/sales/histogram?{q(column='price', start=100, stop=300, bars=10)}")
    raw = ts.histogram("price", bins=(100, 300))["count"].to_pylist()
    assert (h["start"], h["stop"], len(h["bars"]), h["zoomed"]) == (100, 300, 10, True)
    assert [b["count"] for b in h["bars"]] == [sum(raw[i * 20 : (i + 1) * 20]) for i in range(10)]
    v = get_json(f"{ui_url}/api/tables/sales/histogram?{q(column='quantity', lo=1000, hi=2000, bars=1000)}")
    expected = ts.histogram("quantity", value_range=(1000, 2000))
    assert v["start"] == expected["bin"][0].as_py() and v["stop"] == expected["bin"][-1].as_py() + 1
    assert [b["count"] for b in v["bars"]] == expected["count"].to_pylist()


def test_a_page_draws_its_first_cards_and_leaves_the_others_to_load(ui_url) -> None:
    import html as html_lib

    from engine.ui.viewmodel import EAGER_CARDS, PAGE_SIZE

    status, _, body = get(f"{ui_url}/table/wide?bars=25")
    assert status == 200 and body.count('<section class="ms-card') == PAGE_SIZE
    sources = [html_lib.unescape(m) for m in __import__("re").findall(r'class="ms-lazy" data-src="([^"]+)"', body)]
    assert len(sources) == PAGE_SIZE - EAGER_CARDS
    assert sources[0] == f"/table/wide/card?column=c{EAGER_CARDS:04d}&bars=25&top=10"
    status, _, fragment = get(ui_url + sources[0])
    assert status == 200 and "ms-lazy" not in fragment and f'data-column="c{EAGER_CARDS:04d}"' in fragment
    assert ('class="ms-hist"' in fragment) or ('class="ms-top-values"' in fragment)


def test_api_columns_search_and_pages(ui_url) -> None:
    doc = get_json(f"{ui_url}/api/tables/wide/columns?{q(q='c02', page=2, page_size=40)}")
    expected = [f"c{i:04d}" for i in range(300) if "c02" in f"c{i:04d}"]
    assert doc["matched"] == len(expected) and doc["pages"] == -(-len(expected) // 40)
    assert [c["name"] for c in doc["columns"]] == expected[40:80]


def test_api_time_travel_and_history(ui_store, ui_url) -> None:
    hist = get_json(f"{ui_url}/api/tables/sales/history")
    assert [t["txn_id"] for t in hist["transactions"]] == [2, 1]
    assert [t["job_id"] for t in hist["transactions"]] == [ui_store.second.job_id, ui_store.first.job_id]
    old = get_json(f"{ui_url}/api/tables/sales?at=1")
    assert old["rows"] == ui_store.first.rows and old["txn_id"] == 1 and len(old["partition_list"]) == 2
    card = get_json(f"{ui_url}/api/tables/sales/card?{q(column='id', at=1)}")
    assert card["statistics"]["row_count"] == ui_store.first.rows


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "path, words",
    [
        ("/table/nosuch", ["no published statistics", "nosuch"]),
        ("/table/sales?partition=part%3D99", ["no partition", "part=99"]),
        ("/table/sales/card?column=nosuch", ["no column", "nosuch"]),
        ("/table/sales?at=9", ["no transaction 9"]),
        ("/table/..", ["no table", ".."]),
        ("/api/tables/sales/card?column=%3Cscript%3E", ["no column", "<script>"]),
        ("/api/tables/sales/histogram?column=city", ["has no histogram", "city"]),
        ("/nothing/here", ["no page", "/nothing/here"]),
    ],
)
def test_unknown_names_are_404s_naming_them(ui_url, path: str, words: list[str]) -> None:
    status, _, body = get(ui_url + path)
    assert status == 404
    text = json.loads(body)["error"] if path.startswith("/api/") else body
    for word in words:
        assert (word if path.startswith("/api/") else word.replace("<", "&lt;").replace(">", "&gt;")) in text
    if not path.startswith("/api/"):
        assert "<script>" not in body.replace('<script src="/static/ui.js"></script>', "")


@pytest.mark.parametrize("path", ["/table/sales?page=x", "/table/sales?bars=0", "/api/tables/sales/histogram?column=quantity&lo=abc"])
def test_bad_parameters_are_400s(ui_url, path: str) -> None:
    status, _, body = get(ui_url + path)
    assert status == 400, body


def test_a_damaged_file_gives_error_cards_not_a_failed_page(ui_store, ui_url) -> None:
    status, _, body = get(f"{ui_url}/table/damaged")
    assert status == 200
    # price and the partition column (integers) have histograms; city has none
    assert body.count('class="ms-card ms-card-error" data-column="price"') == 1
    assert body.count('class="ms-card ms-card-error" data-column="part"') == 1
    assert body.count('class="ms-card" data-column="city"') == 1
    assert ui_store.damaged_histograms_shown in body and ui_store.damaged_histograms not in body
    card = get_json(f"{ui_url}/api/tables/damaged/card?column=price")
    assert card["statistics"]["row_count"] == 6 and card["histogram"] is None
    assert [e["section"] for e in card["errors"]] == ["histogram"] and card["errors"][0]["file"] == ui_store.damaged_histograms_shown
    city = get_json(f"{ui_url}/api/tables/damaged/card?column=city")
    assert city["errors"] == [] and [v["count"] for v in city["top"]["values"]] == [4, 2]
    # the partition whose statistics file is damaged: every card says so, the page still renders
    status, _, body = get(f"{ui_url}/table/damaged?partition=part%3D1")
    assert status == 200 and body.count("ms-card ms-card-error") == 3 and ui_store.damaged_partition_statistics_shown in body


def test_html_in_names_and_values_is_escaped(ui_url) -> None:
    status, _, body = get(f"{ui_url}/table/evil")
    assert status == 200
    assert EVIL_COLUMN not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<img src=x" not in body and "&lt;img src=x onerror=alert(2)&gt;" in body
    assert "<b>bold</b>" not in body


# ---------------------------------------------------------------- safety
def test_no_answer_names_where_the_store_is(ui_store, ui_url) -> None:
    """Pages, JSON, error cards and errors name tables and paths inside the store, never the
    store's location (absolute, resolved or as a file URI): the client gets what the operator
    serves, not a map of the server's file system."""
    import os

    root = os.path.abspath(ui_store.store)
    spellings = {root, os.path.realpath(root), os.path.dirname(root)}
    paths = [
        "/", "/healthz", "/api/tables", "/api/tables/sales", "/api/tables/sales/history", "/table/sales",
        "/table/damaged", "/table/damaged?partition=part%3D1", "/api/tables/damaged/card?column=price",
        "/table/damaged/column?column=price", "/table/damaged/overview?partition=part%3D1&offset=0",
        "/api/tables/nosuch", "/table/nosuch", "/api/tables/sales/card?column=nosuch",
    ]  # fmt: skip
    for path in paths:
        status, _, body = get(ui_url + path)
        assert status in (200, 404), (path, status, body[:300])
        assert not [s for s in spellings if s in body], (path, body[:2000])
    assert get_json(f"{ui_url}/healthz") == {"status": "ok"}
    assert get_json(f"{ui_url}/api/tables")["store"] == os.path.basename(root)
    status, _, body = get(f"{ui_url}/api/tables/nosuch")
    assert status == 404 and "'nosuch'" in json.loads(body)["error"]


def test_security_headers_and_loopback_host_check(ui_url) -> None:
    status, headers, _ = get(f"{ui_url}/")
    assert status == 200
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"
    status, _, body = get(f"{ui_url}/api/tables", headers={"Host": "attacker.example:80"})
    assert status == 400 and "loopback" in json.loads(body)["error"]
    status, _, _ = get(f"{ui_url}/api/tables", headers={"Host": "localhost"})
    assert status == 200


def test_tokens_as_for_the_flight_server(ui_store, tmp_path) -> None:
    from engine.ui.app import UiServer, authenticator_for

    auth = authenticator_for("127.0.0.1", ["s3cret-token"], None, False)
    server = UiServer(ui_store.store, authenticator=auth)
    url = server.start().rstrip("/")
    try:
        status, headers, body = get(f"{url}/api/tables")
        assert status == 401 and headers["www-authenticate"] == "Bearer" and "authentication required" in json.loads(body)["error"]
        assert get(f"{url}/api/tables", {"Authorization": "Bearer wrong"})[0] == 401
        assert get(f"{url}/api/tables", {"Authorization": "Bearer s3cret-token"})[0] == 200
        status, headers, _ = get(f"{url}/table/sales?token=s3cret-token&bars=25")
        assert status == 303 and headers["location"] == "/table/sales?bars=25"
        cookie = headers["set-cookie"].split(";")[0]
        assert "httponly" in headers["set-cookie"].lower() and "samesite=strict" in headers["set-cookie"].lower()
        assert get(f"{url}/table/sales?bars=25", {"Cookie": cookie})[0] == 200
        assert get(f"{url}/table/sales?token=nope")[0] == 401
    finally:
        server.stop()


def test_a_non_loopback_address_requires_tokens() -> None:
    from engine.exceptions import InvalidArgumentError
    from engine.ui.app import authenticator_for

    with pytest.raises(InvalidArgumentError, match="not a loopback address: give --token"):
        authenticator_for("0.0.0.0", [], None, False)
    assert authenticator_for("0.0.0.0", [], None, True) is None
    assert authenticator_for("::1", [], None, False) is None


def test_the_app_over_an_s3_store(ui_store, s3_server) -> None:
    """The same store copied to S3 (moto on loopback): the app reads it there, time travel included."""
    import pyarrow.fs as pafs

    from engine import fileio
    from engine.cli.output import to_jsonable
    from engine.lookup import open_statistics
    from engine.ui.app import UiServer

    fs, path = fileio.resolve("s3://bucket/ui-store/sales")
    pafs.copy_files(f"{ui_store.store}/sales", path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    server = UiServer("s3://bucket/ui-store")
    url = server.start().rstrip("/")
    try:
        tables = get_json(f"{url}/api/tables")["tables"]
        assert [(t["name"], t["rows"], t["txn_id"]) for t in tables] == [("sales", ui_store.second.rows, 2)]
        local = open_statistics(ui_store.store, "sales")
        card = get_json(f"{url}/api/tables/sales/card?column=price")
        assert card["statistics"] == to_jsonable(local.column_statistics("price")) and card["errors"] == []
        assert get_json(f"{url}/api/tables/sales?at=1")["rows"] == ui_store.first.rows
        status, _, body = get(f"{url}/table/sales?partition=part%3D01")
        assert status == 200 and body.count('<section class="ms-card') == 13
    finally:
        server.stop()
