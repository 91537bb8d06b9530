#!/usr/bin/env python
"""Analyze the same table as a plain Parquet directory, an Iceberg table and a Delta table,
then re-analyze each after appending one partition.

The data is the sample table (``--rows``, 16 partitions, engine.sample), with its partition
column ``part`` as int64 in all three (the Parquet directory infers it so). Iceberg
(pyiceberg, SQL catalog on sqlite) and Delta (deltalake) get the same rows, one append
per partition, zstd and 131,072-row row groups like the directory. All measured in the
same run, the systems interleaved:

- a full analyze (``inherit=False``) of each, ``--repeat`` times: wall seconds and task CPU
  seconds (``AnalyzeResult.timings["cpu_s"]``), ratio to the Parquet directory;
- one partition of new rows appended as ``part=16`` (the generator's 17th partition, held back
  until then: new ids, new times, as a real append adds them), then a re-analyze with
  inheritance into the store of the last full analyze, against a full analyze of the
  appended table: task CPU ratio (the issue's target: at most 1/8).

Usage: python bench/bench_formats.py [--rows 5000000] [--repeat 3] [--data DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

ROW_GROUP = 128 * 1024
PARTITIONS = 16


def _partition_tables(parquet_dir: Path):
    import pyarrow as pa
    import pyarrow.dataset as ds

    dataset = ds.dataset(str(parquet_dir), format="parquet", partitioning=ds.partitioning(pa.schema([("part", pa.int64())]), flavor="hive"))
    for p in range(PARTITIONS):
        yield p, dataset.to_table(filter=ds.field("part") == p)


def _write_iceberg(root: Path, parts) -> str:
    from pyiceberg.catalog.sql import SqlCatalog

    root.mkdir(parents=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace("db")
    table = None
    for _, t in parts:
        if table is None:
            table = catalog.create_table(
                "db.sales", schema=t.schema,
                properties={"write.parquet.compression-codec": "zstd", "write.parquet.row-group-limit": str(ROW_GROUP)},
            )  # fmt: skip
            with table.update_spec() as spec:
                spec.add_identity("part")
        table.append(t)
    return table.location().removeprefix("file://")


def _write_delta(uri: Path, parts) -> str:
    from deltalake import WriterProperties, write_deltalake

    props = WriterProperties(compression="ZSTD", max_row_group_size=ROW_GROUP)
    for i, (_, t) in enumerate(parts):
        write_deltalake(str(uri), t, partition_by=["part"], mode="append" if i else "error", writer_properties=props)
    return str(uri)


def _append(kind: str, uri: str, rows) -> None:
    import pyarrow as pa

    new = rows.append_column("part", pa.array([PARTITIONS] * rows.num_rows, pa.int64()))
    if kind == "parquet":
        import pyarrow.parquet as pq

        folder = Path(uri) / f"part={PARTITIONS}"
        folder.mkdir()
        pq.write_table(new.drop_columns(["part"]), folder / "data-0.parquet", compression="zstd", row_group_size=ROW_GROUP)
    elif kind == "iceberg":
        from pyiceberg.catalog.sql import SqlCatalog

        root = Path(uri).parents[2]
        SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse").load_table("db.sales").append(new)
    else:
        from deltalake import WriterProperties, write_deltalake

        write_deltalake(
            uri, new, partition_by=["part"], mode="append", writer_properties=WriterProperties(compression="ZSTD", max_row_group_size=ROW_GROUP)
        )


def _analyze(uri: str, store: Path, inherit: bool) -> dict:
    from engine.api import analyze

    t0 = time.perf_counter()
    r = analyze(uri, store=str(store), name="sales", inherit=inherit)
    return {
        "wall_s": round(time.perf_counter() - t0, 3),
        "job_s": round(r.elapsed_s, 3),
        "cpu_s": round(r.timings["cpu_s"], 3),
        # where the task CPU went (an append's: the new partition's profile, the inherited states,
        # re-binning, the reductions with the append task and the segment)
        **{k: round(r.timings.get(k, 0.0), 3) for k in ("cpu_profile_s", "cpu_inherit_s", "cpu_histograms_s", "cpu_reduce_s")},
        "rows": r.rows,
        "partitions": r.partitions,
        "inherited": r.inherited,
        "recomputed": r.recomputed,
        "rebinned": r.rebinned,
        "frequency_segments": r.frequency_segments,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", default=str(REPO / "bench" / "data" / "formats"), help="scratch directory (rebuilt)")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)

    from engine.runtime.ray_runtime import ensure_ray
    from engine.sample import generate_table
    from engine.stats.user import register_examples

    data = Path(args.data).resolve()
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    uris = {"parquet": str(data / "parquet" / "sales")}
    t0 = time.perf_counter()
    # one partition more, held back: the rows appended later
    generate_table(uris["parquet"], rows=args.rows // PARTITIONS * (PARTITIONS + 1), partitions=PARTITIONS + 1, seed=0, row_group_size=ROW_GROUP)
    held = data / f"held-part={PARTITIONS}"
    shutil.move(str(Path(uris["parquet"]) / f"part={PARTITIONS}"), str(held))
    import pyarrow.dataset as ds

    appended_rows = ds.dataset(str(held), format="parquet").to_table()
    uris["iceberg"] = _write_iceberg(data / "iceberg", _partition_tables(Path(uris["parquet"])))
    uris["delta"] = _write_delta(data / "delta" / "sales", _partition_tables(Path(uris["parquet"])))
    print(f"tables written in {time.perf_counter() - t0:.1f} s", flush=True)

    register_examples()
    ensure_ray()
    kinds = ["parquet", "iceberg", "delta"]
    _analyze(uris["parquet"], data / "warmup", inherit=False)  # Ray workers and caches warm
    full: dict[str, list[dict]] = {k: [] for k in kinds}
    for i in range(args.repeat):
        for k in kinds:
            store = data / f"store-{k}-{i}"
            full[k].append(_analyze(uris[k], store, inherit=False))
            print(k, full[k][-1], flush=True)
    incremental: dict[str, dict] = {}
    for k in kinds:
        _append(k, uris[k], appended_rows)
        again = _analyze(uris[k], data / f"store-{k}-{args.repeat - 1}", inherit=True)
        fresh = _analyze(uris[k], data / f"fresh-{k}", inherit=False)
        incremental[k] = {"reanalyze": again, "full": fresh, "cpu_ratio": round(again["cpu_s"] / fresh["cpu_s"], 3)}
        print(k, "append", incremental[k], flush=True)

    med = {k: {m: statistics.median(r[m] for r in full[k]) for m in ("wall_s", "cpu_s")} for k in kinds}
    print("\n| table | full analyze wall s (runs) | median wall s | median CPU s | wall / Parquet | CPU / Parquet |")
    print("|---|---|---|---|---|---|")
    for k in kinds:
        runs = ", ".join(f"{r['wall_s']:.2f}" for r in full[k])
        print(
            f"| {k} | {runs} | {med[k]['wall_s']:.2f} | {med[k]['cpu_s']:.1f} | "
            f"{med[k]['wall_s'] / med['parquet']['wall_s']:.2f} | {med[k]['cpu_s'] / med['parquet']['cpu_s']:.2f} |"
        )
    print(
        "\n| table | re-analyze after appending one partition: CPU s (wall s) | full analyze CPU s (wall s) | CPU ratio | inherited / recomputed / re-binned |"
    )
    print("|---|---|---|---|---|")
    for k in kinds:
        a, f = incremental[k]["reanalyze"], incremental[k]["full"]
        print(
            f"| {k} | {a['cpu_s']:.1f} ({a['wall_s']:.1f}) | {f['cpu_s']:.1f} ({f['wall_s']:.1f}) | {incremental[k]['cpu_ratio']:.2f} | {a['inherited']} / {a['recomputed']} / {a['rebinned']} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": args.rows, "full": full, "median": med, "incremental": incremental}, indent=2))
    shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
