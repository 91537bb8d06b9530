"""Session fixtures of the UI tests: one store of small analyzed tables, one app server, one browser."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import ui_testkit

WIDE_COLUMNS = 300  # > 2 x EAGER_ROWS (100) overview rows and > MAX_PAGE_SIZE (200) cards
EVIL_COLUMN = "<script>alert(1)</script>"


@pytest.fixture(scope="session")
def ui_store(two_jobs, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A copy of the ``two_jobs`` store (``sales``: two catalog transactions, 3 partitions now)
    plus, analyzed once: ``wide`` (300 columns), ``evil`` (HTML in a column name and in values,
    with the example user statistics) and ``damaged`` (its table histograms file then overwritten
    with garbage, one partition's statistics file too)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from engine.api import analyze
    from engine.lookup import open_statistics
    from engine.sample import generate_wide_table
    from engine.stats.user import register_examples, registered

    root = tmp_path_factory.mktemp("ui")
    store = root / "store"
    shutil.copytree(two_jobs.store, store)
    generate_wide_table(str(root / "wide"), columns=WIDE_COLUMNS, rows=300, partitions=1, seed=0)
    analyze(str(root / "wide"), store=str(store), user_statistics=[])
    (root / "evil").mkdir()
    values = ["<b>bold</b>", "a&b", "<img src=x onerror=alert(2)>", "plain"]
    pq.write_table(
        pa.table({EVIL_COLUMN: values * 6, "n": list(range(24)), "x": [float(i % 7) for i in range(24)]}),
        root / "evil" / "data.parquet",
    )
    register_examples()
    analyze(str(root / "evil"), store=str(store), user_statistics=[u for u in registered() if u.name in ("zero_count", "top1_share")])
    (root / "damaged").mkdir()
    for p in range(2):
        (root / "damaged" / f"part={p}").mkdir()
        pq.write_table(pa.table({"city": ["Oslo", "Rome", "Oslo"], "price": [1.5 + p, 2.5, 9.0]}), root / "damaged" / f"part={p}" / "data.parquet")
    analyze(str(root / "damaged"), store=str(store), user_statistics=[])
    ts = open_statistics(str(store), "damaged")
    damaged_hist = ts.file_uri("histograms.parquet")
    damaged_part_stats = ts.file_uri("statistics.parquet", "part=1")
    for uri in (damaged_hist, damaged_part_stats):
        with open(uri, "r+b") as f:  # same size, garbage from the middle on (footer gone)
            size = f.seek(0, 2)
            f.seek(size // 2)
            f.write(b"\x00garbage" * (size // 16 + 1))
            f.truncate(size)
    return SimpleNamespace(
        store=str(store), first=two_jobs.first, second=two_jobs.second,
        damaged_histograms=damaged_hist, damaged_partition_statistics=damaged_part_stats,
        # as the app names them: inside the store (engine.disclosure), e.g. damaged/runs/<job>/table/histograms.parquet
        damaged_histograms_shown=os.path.relpath(damaged_hist, store),
        damaged_partition_statistics_shown=os.path.relpath(damaged_part_stats, store),
    )  # fmt: skip


@pytest.fixture(scope="session")
def ui_url(ui_store) -> Iterator[str]:
    """The app over ``ui_store`` on a free loopback port (one per session); its base URL."""
    from engine.ui.app import UiServer

    server = UiServer(ui_store.store)
    url = server.start()
    try:
        yield url.rstrip("/")
    finally:
        server.stop()


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory):
    """One headless Chromium for the session (a fresh profile, no network features)."""
    driver = ui_testkit.start_browser(str(tmp_path_factory.mktemp("chromium-profile")))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
