"""Opening a table of the store for a command: its statistics (an unknown table's error names the
tables the store has), its catalog (a table without one says what to do), and the warning of a
missing transaction the read commands print.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # loaded by the commands that open a table, not at the console's start
    from engine.catalog import Catalog
    from engine.lookup import TableStatistics


def open_table(store: str, table: str, at_transaction: int | None = None, at_snapshot: str | None = None, exact: bool = False) -> TableStatistics:
    """The table's statistics (an earlier state with ``at_*``); an unknown table's error names the tables the store has.

    ``exact``: the command computes subsets on the data (``show --where --exact``), so the
    job that computes them is registered (engine/runtime/exact.py; no Ray loaded). Only then:
    that module loads the predicate tree, which a plain ``show`` does not need (issue #30)."""
    if exact:
        import engine.runtime.exact  # noqa: F401 - registers the exact=True subsets' job
    from engine.exceptions import StatisticsNotFoundError
    from engine.lookup import open_statistics
    from engine.store import Store

    try:
        return open_statistics(store, table, at_transaction=at_transaction, at_snapshot=at_snapshot)
    except StatisticsNotFoundError as exc:
        try:
            known = Store(store).tables()
        except Exception:  # noqa: BLE001 - only a hint
            known = []
        if table in known:
            raise
        hint = f"; tables in the store: {', '.join(known[:10])}" if known else "; the store has no tables (run metastore analyze first)"
        raise StatisticsNotFoundError(f"{exc}{hint}") from exc


def catalog_of(store: str, table: str, up_to_last_good: bool = False) -> Catalog:
    """The table's catalog; a table without one is an error naming what to do."""
    from engine.catalog import Catalog
    from engine.exceptions import StatisticsNotFoundError

    cat = Catalog.open(store, table, up_to_last_good=up_to_last_good)
    if cat.state().empty:
        raise StatisticsNotFoundError(
            f"table {table!r} in store {store} has no catalog (no transactions); "
            f"analyze it, or re-create the catalog from its files with metastore rebuild {table}"
        )
    return cat


def warn_integrity(store: str, table: str) -> None:
    """One ``warning:`` line on stderr per missing transaction the cheap checks find (#21)."""
    from engine.catalog.integrity import quick_check

    for message in quick_check(store, table):
        click.echo(f"warning: {message}; run metastore verify {table}", err=True)
