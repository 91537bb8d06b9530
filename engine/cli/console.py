"""The ``metastore`` command line: analyze tables, look at their statistics.

A click group modelled on pyiceberg's CLI: global options on the group (also
accepted after the command name), every command builds a plain document and an
:class:`engine.cli.output.Output` prints it as rich text or JSON. Errors
Metastore raises on purpose (and missing files / permissions) become one line
on stderr and exit code 1; ``--debug`` adds the traceback.

This module holds the group and ``main`` (the console script's entry point); the
commands live one module per group of them in engine/cli/commands/, what they
share in engine/cli/command.py (settings, error handling, common options). A
command's module is imported when that command runs (``COMMANDS``), so that
``metastore show`` loads the read commands' module alone (start-up, issue #30).
"""

from __future__ import annotations

import gc
import sys
from typing import Any

import click

from engine.cli.command import DEFAULT_STORE, STORE_ENV, LazyCommands, MetastoreGroup, Settings

#: every command: its name and ``module:function`` in engine/cli/commands/ (one module per
#: group of them), imported when the command runs or ``--help`` lists it
COMMANDS: dict[str, str] = {
    "analyze": "engine.cli.commands.analyze:analyze",
    "publish": "engine.cli.commands.analyze:publish",
    "show": "engine.cli.commands.read:show",
    "history": "engine.cli.commands.history:history",
    "diff": "engine.cli.commands.history:diff",
    "gc": "engine.cli.commands.maintenance:gc",
    "expire": "engine.cli.commands.maintenance:expire",
    "prune": "engine.cli.commands.maintenance:prune",
    "config": "engine.cli.commands.maintenance:config",
    "rebuild": "engine.cli.commands.maintenance:rebuild",
    "verify": "engine.cli.commands.maintenance:verify",
    "tables": "engine.cli.commands.read:tables",
    "demo": "engine.cli.commands.demo:demo",
    "partitions-of": "engine.cli.commands.read:partitions_of",
    "files": "engine.cli.commands.read:files",
    "quantiles": "engine.cli.commands.quantiles:quantiles",
    "serve": "engine.cli.commands.servers:serve",
    "query": "engine.cli.commands.query:query",
    "ui": "engine.cli.commands.servers:ui",
    "preview": "engine.cli.commands.read:preview",
}


@click.group(cls=MetastoreGroup, commands=LazyCommands(COMMANDS), context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--store", "-s", metavar="DIR_OR_URI", envvar=STORE_ENV, default=DEFAULT_STORE, show_default=True,
    help=f"Statistics store: a directory or an s3:// prefix [env: {STORE_ENV}].",
)  # fmt: skip
@click.option(
    "--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Rich text for people or JSON for programs."
)
@click.option("--debug", is_flag=True, default=False, help="Show tracebacks of errors.")
@click.pass_context
def metastore(ctx: click.Context, store: str, output: str, debug: bool) -> None:
    """Metastore: column statistics of data-lake tables, computed on Ray.

    Analyze a table once; then read its statistics, top frequencies and
    histograms back per table or per partition.

    \b
    Examples:
      metastore demo                                 generate a sample table, analyze it, show it
      metastore analyze data/sales                   analyze a table into ./.metastore
      metastore analyze s3://bucket/sales --bins 10000 --columns price,city
      metastore publish db.events --catalog prod     statistics into an Iceberg table's metadata
      metastore tables                               tables with published statistics
      metastore show sales                           one row of statistics per column
      metastore show sales --column price --column city --top 5
      metastore show sales --partition part=03 --output json
      metastore show sales --at 2                    an earlier state (ids: metastore history sales)
      metastore history sales                        catalog transactions of a table, newest first
      metastore gc sales --dry-run                   statistics files no state references
      metastore config sales --retain-last 10 --retain-for 7d    the table's retention policy
      metastore expire sales --keep-last 5           let go of older states (and gc their files)
      metastore prune sales --before 12              drop the history before transaction 12
      metastore rebuild sales                        re-create the catalog from the files
      metastore verify sales                         check the catalog and every file (exit 1 on a problem)
      metastore quantiles data/sales price -q 0.5    exact quantiles by a distributed sort
      metastore partitions-of sales city Berlin      partitions holding a value (analyze --value-partitions)
      metastore ui                                   a web app over the store (http://127.0.0.1:8816/)
      metastore preview sales --html sales.html      one self-contained HTML page of a table
      metastore files sales --where "city = 'Berlin'"   data files that might hold matching rows
      metastore --store s3://bucket/stats show sales

    \b
    One meaning per short option in every command: -c column, -p partition,
    -k top, -w where, -q quantile (a probability; was -p in quantiles),
    -s store, -o output. Durations: 30s, 15m, 1h, 7d, 2w or seconds.
    """
    ctx.obj = Settings(store=store, output=output, debug=debug)


#: Commands that only read a store or a server: they need neither Ray, numba nor pandas.
READ_COMMANDS = frozenset({"show", "tables", "history", "query", "partitions-of", "config"})


def _command_of(argv: list[str]) -> str | None:
    """The subcommand of a command line (the first argument that is one; options may precede it)."""
    return next((a for a in argv if a in metastore.commands), None)


def _without_pandas() -> None:
    """pyarrow imports pandas on its first ``pa.array``/``pa.scalar`` call, only to ask whether
    an argument is a pandas object: 0.6-0.9 s of a read command's 1 s start-up. A read
    command's process never holds one, so it tells the import system pandas is absent
    (pyarrow then skips the check). Only in the console script's own process, before any
    pyarrow call, and never when pandas is loaded already."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())


class _NoPandas:
    """An import finder under which ``import pandas`` raises ImportError (see _without_pandas)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not loaded by metastore's read commands", name=name)
        return None


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``metastore`` console script."""
    args = sys.argv[1:] if argv is None else argv
    if _command_of(args) in READ_COMMANDS:
        _without_pandas()
        # A read command is a short process that allocates mostly while importing (~370 modules:
        # pyarrow, numpy, protobuf): the cyclic collector ran ~80 times in `metastore show`, 25-30 ms
        # of its ~0.45 s CPU, and freed nothing that matters before the exit. Reference counting
        # still frees every acyclic object (issue #30 target 5).
        gc.disable()
    metastore.main(args=args, prog_name="metastore")


if __name__ == "__main__":
    main()
