"""``metastore demo``: generate a sample table, analyze it, show the result."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import click

from engine.cli.command import Settings, command, common_options
from engine.cli.documents import analyze_doc, column_doc, overview_doc

DEMO_TABLE = "sample"


class _Count(click.ParamType[int, Any]):
    """An integer that may be written with separators: 1,000,000 or 1_000_000."""

    name = "N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            n = int(str(value).replace(",", "").replace("_", ""))
        except ValueError:
            self.fail(f"{value!r} is not a whole number", param, ctx)
        if n < 1:
            self.fail(f"{value} must be at least 1", param, ctx)
        return n


def _stamp_matches(path: Path, stamp: dict[str, Any]) -> bool:
    try:
        return json.loads(path.read_text()) == stamp
    except (OSError, ValueError):
        return False


@command(short_help="Generate a sample table, analyze it, show the result.")
@click.option("--rows", type=_Count(), default="1,000,000", show_default=True, help="Rows of the sample table.")
@click.option("--partitions", type=click.IntRange(min=1), default=8, show_default=True, help="Partitions of the sample table.")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=".demo",
    show_default=True,
    help="Where the table (DIR/table) and the store (DIR/store) go.",
)
@common_options(store=False)
@click.pass_obj
def demo(settings: Settings, rows: int, partitions: int, directory: str) -> None:
    """Generate a sample table, analyze it and show what Metastore knows about it.

    The table is generated once per --rows/--partitions (a stamp file records
    them); the analyze runs every time. The statistics go to DIR/store.

    \b
    Examples:
      metastore demo
      metastore demo --rows 5,000,000 --partitions 16 --dir /tmp/demo
    """
    from engine import api
    from engine.lookup import open_statistics
    from engine.sample import SAMPLE_VERSION, generate_table

    out = settings.out()
    root = Path(directory)
    table_dir, store_dir, stamp_path = root / "table", root / "store", root / "table.stamp.json"
    stamp = {"rows": rows, "partitions": partitions, "seed": 0, "sample_version": SAMPLE_VERSION}
    generated = False
    if table_dir.is_dir() and _stamp_matches(stamp_path, stamp):
        out.status(f"sample table {table_dir} already generated ({rows:,} rows, {partitions} partitions)")
    else:
        out.status(f"generating the sample table: {rows:,} rows in {partitions} partitions under {table_dir}")
        root.mkdir(parents=True, exist_ok=True)
        stamp_path.unlink(missing_ok=True)
        generate_table(table_dir, rows=rows, partitions=partitions, seed=0)
        stamp_path.write_text(json.dumps(stamp) + "\n")
        generated = True
    out.status(f"analyzing {table_dir} into {store_dir}")
    result = api.analyze(str(table_dir), str(store_dir), name=DEMO_TABLE, progress=not settings.json)
    ts = open_statistics(str(store_dir), result.table)
    store_arg = shlex.quote(str(store_dir))
    out.demo(
        {
            "table_dir": str(table_dir),
            "generated": generated,
            "analyze": analyze_doc(result),
            "overview": overview_doc(ts),
            "columns": [column_doc(ts, "category", top=10), column_doc(ts, "price", top=10)],
            "next": [
                f"metastore --store {store_arg} show {DEMO_TABLE} --column price --column city",
                f"metastore --store {store_arg} show {DEMO_TABLE} --partition part=00",
                f"metastore --store {store_arg} show {DEMO_TABLE} --column amount --output json",
            ],
        }
    )
