"""A Spark DataFrame as a :class:`~engine.sources.base.TableSource`, through a Ray Dataset.

The DataFrame moves once from Spark to Ray with ``ray.data.from_spark`` (RayDP):
each Spark partition becomes one Arrow block in the Ray object store; nothing is
collected to the driver. Partitions (the units analyze publishes statistics for):

- with ``partition_by``: the DataFrame is first hash-repartitioned by those
  columns in Spark (one shuffle), so every partition value lives in one block
  (a block may hold several values) - unless it is a scan of files partitioned
  by those columns (:func:`files_partitioned_by`), whose splits already hold few
  values each (no shuffle). One Ray task per block then lists the
  values it holds with their row counts (the "index": small, it alone reaches
  the driver). A partition is the set of blocks holding its value; reading it
  filters those blocks. Keys are Hive paths (``city=Paris``), as on disk.
- without: every block (Spark partition) is a partition keyed
  ``spark_partition=00000``; one block is the unpartitioned table (key "").

The source pickles as block ObjectRefs plus the small index, so tasks borrow the
blocks, and ``read_batches`` (in a task) ``ray.get``s only its partition's blocks.

Columns of types Spark cannot convert to Arrow (``interval``, ``interval year to
month``) are refused with their names before anything moves; lists and maps move
and get the per-column ``unsupported`` marker, structs are flattened. The snapshot
id is content-based when the DataFrame reads files (spark_bridge.identity).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import ray

from engine.exceptions import InvalidArgumentError, ServiceError
from engine.sources.base import DEFAULT_BATCH_SIZE, DataFile, Partition, TableSource

if TYPE_CHECKING:  # pyspark is imported where a session is used
    from pyspark.sql import DataFrame

__all__ = ["RayDatasetSource", "check_spark_types", "hive_escape", "value_text"]

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_HIVE_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^")


def hive_escape(text: str) -> str:
    """A partition key or value as Hive writes it in a path (``%XX`` for special characters)."""
    return "".join(f"%{ord(c):02X}" if (c in _HIVE_ESCAPED or ord(c) < 0x20) else c for c in text)


def value_text(value: object) -> str | None:
    """The text Spark writes in a partition path for ``value`` (None for null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ") if hasattr(value, "hour") else value.isoformat()
    return str(value)


@ray.remote(num_cpus=0.5)
def _index_block(block: pa.Table, columns: list[str]) -> tuple[int, int, list[tuple[tuple[Any, ...], int]]]:
    """(rows, bytes, [(partition values, rows)]) of one block."""
    if not columns:
        return block.num_rows, block.nbytes, []
    counts = block.select(columns).group_by(columns, use_threads=False).aggregate([([], "count_all")])
    keys = [counts.column(c).to_pylist() for c in columns]
    n = counts.column("count_all").to_pylist()
    return block.num_rows, block.nbytes, [(tuple(k[i] for k in keys), n[i]) for i in range(counts.num_rows)]


_UNMOVABLE = re.compile(r"interval( year( to month)?| month)?$")  # CalendarInterval, YearMonthInterval


def _unmovable(path: str, t: Any, out: list[str]) -> None:
    """Collect the columns (struct fields, elements) of a JSON Spark type that cannot become Arrow."""
    if isinstance(t, str):
        if _UNMOVABLE.match(t):
            out.append(f"{path} ({t})")
    elif t.get("type") == "struct":
        for f in t["fields"]:
            _unmovable(f"{path}.{f['name']}", f["type"], out)
    elif t.get("type") == "array":
        _unmovable(f"{path}[]", t["elementType"], out)
    elif t.get("type") == "map":
        _unmovable(f"{path}{{key}}", t["keyType"], out)
        _unmovable(f"{path}{{value}}", t["valueType"], out)


def check_spark_types(schema_json: str, partition_by: Sequence[str] = ()) -> None:
    """Refuse, by name, columns Spark cannot hand to Arrow, and partition columns that cannot key a partition.

    ``schema_json``: the DataFrame's schema as the JVM writes it (``df._jdf.schema().json()``;
    PySpark cannot even parse an ``interval`` column's schema). Spark fails on ``interval``
    columns only inside its executors (after four task retries, as a JVM stack trace)
    and Arrow cannot read ``interval year to month`` blocks; both are caught here,
    before anything moves.
    """
    fields = json.loads(schema_json)["fields"]
    bad: list[str] = []
    for f in fields:
        _unmovable(f["name"], f["type"], bad)
    if bad:
        tops = dict.fromkeys(re.split(r"[.\[{]", b.split(" (", 1)[0], 1)[0] for b in bad)
        raise InvalidArgumentError(
            f"column(s) {', '.join(bad)}: Spark cannot convert these types to Arrow, so they cannot be analyzed; "
            f"drop or cast them first (df.drop({', '.join(map(repr, tops))}))"
        )
    types = {f["name"]: f["type"] for f in fields}
    for c in partition_by:
        t = types[c]
        kind = t if isinstance(t, str) else t.get("type")
        if kind in ("struct", "array", "map", "udt", "binary", "void") or (isinstance(t, str) and t.startswith("interval")):
            shown = t if isinstance(t, str) else _simple(t)
            raise InvalidArgumentError(
                f"partition_by column {c!r} is of type {shown}; partitions are keyed by atomic values (strings, numbers, dates, booleans)"
            )


def _simple(t: Any) -> str:
    """A JSON Spark type in SQL's short form (``array<bigint>``)."""
    names = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}
    if isinstance(t, str):
        return names.get(t, t)
    if t["type"] == "array":
        return f"array<{_simple(t['elementType'])}>"
    if t["type"] == "map":
        return f"map<{_simple(t['keyType'])},{_simple(t['valueType'])}>"
    if t["type"] == "struct":
        return "struct<" + ",".join(f"{f['name']}:{_simple(f['type'])}" for f in t["fields"]) + ">"
    return str(t["type"])


#: plan nodes that keep every row in the Spark partition (file split) it was read in
_NARROW = frozenset({"Project", "Filter", "SubqueryAlias", "LogicalRelation"})


def files_partitioned_by(df: DataFrame, columns: Sequence[str]) -> bool:
    """Whether ``df`` reads Hive-partitioned files by ``columns`` and only projects and filters them.

    Then each Spark partition (a split of the files) holds the rows of few partition
    values - the files of one folder, or a few small files packed together - and the
    move can skip the shuffle: a partition is the few blocks holding its value. The
    columns must pass through unchanged (same expression ids as the scan's partition
    columns); any other node (join, aggregate, repartition...) may mix the values.
    """
    try:
        plan = df._jdf.queryExecution().analyzed()
        stack, leaf = [plan], None
        while stack:
            node = stack.pop()
            kind = str(node.getClass().getSimpleName())
            if kind not in _NARROW:
                return False
            if kind == "LogicalRelation":
                if leaf is not None:
                    return False
                leaf = node
            children = node.children()
            stack.extend(children.apply(i) for i in range(children.size()))
        if leaf is None or str(leaf.relation().getClass().getSimpleName()) != "HadoopFsRelation":
            return False
        partition_names = set(str(n) for n in leaf.relation().partitionSchema().fieldNames())

        def ids(attrs: Any) -> dict[str, int]:
            return {str(a.name()): int(a.exprId().id()) for a in (attrs.apply(i) for i in range(attrs.size()))}

        out, scanned = ids(plan.output()), ids(leaf.output())
        return all(c in partition_names and c in out and out[c] == scanned.get(c) for c in columns)
    except Exception:  # an unexpected plan: shuffle, which is always correct
        return False


class RayDatasetSource(TableSource):
    """The rows of a Spark DataFrame, moved to Ray blocks, grouped into partitions."""

    def __init__(
        self,
        df: DataFrame,
        partition_by: Sequence[str] | None = None,
        name: str = "dataframe",
        partition_keys: dict[tuple[str | None, ...], str] | None = None,
    ) -> None:
        """``partition_keys``: key to use for the partition whose values have these texts
        (``value_text``), e.g. a catalog partition's folder ``part=00`` for the value 0;
        other partitions are keyed ``column=text``."""
        from raydp.spark.dataset import release_spark_recoverable  # noqa: F401 (RayDP must be importable)

        if isinstance(partition_by, str):
            partition_by = [partition_by]
        self.partition_by = list(partition_by or [])
        schema_json = str(df._jdf.schema().json())  # df.schema: PySpark cannot parse every type (interval)
        columns = [f["name"] for f in json.loads(schema_json)["fields"]]
        missing = [c for c in self.partition_by if c not in columns]
        if missing:
            raise InvalidArgumentError(f"partition_by: no column(s) {missing} in the DataFrame (columns: {columns})")
        if len(set(self.partition_by)) != len(self.partition_by):
            raise InvalidArgumentError(f"partition_by names a column twice: {self.partition_by}")
        check_spark_types(schema_json, self.partition_by)
        self.name = name
        self.uri = f"spark:{name}"
        self._partition_keys = dict(partition_keys or {})
        self.timings: dict[str, float] = {}
        from spark_bridge.identity import dataframe_identity

        started = time.perf_counter()
        self.identity = dataframe_identity(df, self.partition_by, schema_json)
        self.timings["identity_s"] = time.perf_counter() - started
        started = time.perf_counter()
        # a scan of files partitioned by these columns keeps each value in few blocks: no shuffle
        shuffle = bool(self.partition_by) and not files_partitioned_by(df, self.partition_by)
        self.timings["spark_shuffle"] = 1.0 if shuffle else 0.0
        moved = df.repartition(*self.partition_by) if shuffle else df
        try:
            dataset = ray.data.from_spark(moved)
            refs = list(dataset.to_arrow_refs())
            self._spark_df: DataFrame | None = moved  # to release RayDP's cached copy (driver side only; not pickled)
            indexed = ray.get([_index_block.remote(r, self.partition_by) for r in refs])
            schema = dataset.schema()
        except Exception as exc:
            from spark_bridge.session import first_line

            raise ServiceError(f"could not move the DataFrame from Spark to Ray: {type(exc).__name__}: {first_line(exc)}") from exc
        self.timings["spark_to_ray_s"] = time.perf_counter() - started
        self._refs = refs
        self._schema = self._arrow_schema(df, schema)
        self._partition_fields = [self._schema.field(c) for c in self.partition_by]
        self._partitions, self._filters = self._build_partitions(indexed)
        self.rows = sum(rows for rows, _, _ in indexed)
        self._snapshot_id = self.identity.snapshot_id

    # ------------------------------------------------------------ construction (driver)
    def _arrow_schema(self, df: DataFrame, dataset_schema: Any) -> pa.Schema:
        base = getattr(dataset_schema, "base_schema", None)
        if not isinstance(base, pa.Schema):
            from pyspark.sql.pandas.types import to_arrow_schema

            base = to_arrow_schema(df.schema)
        base = base.remove_metadata()
        data = [f for f in base if f.name not in self.partition_by]
        parts = [base.field(c) for c in self.partition_by]
        return pa.schema(data + parts)

    def _build_partitions(
        self, indexed: list[tuple[int, int, list[tuple[tuple[Any, ...], int]]]]
    ) -> tuple[list[Partition], dict[str, tuple[Any, ...]]]:
        def block_file(i: int, rows: int) -> DataFile:
            return DataFile(path=f"ray-block-{i:05d}", size=indexed[i][1], mtime_ns=None, num_rows=rows)

        if not self.partition_by:
            if len(indexed) <= 1:
                files = tuple(block_file(i, r) for i, (r, _, _) in enumerate(indexed))
                return [Partition("", (), files)], {}
            width = max(5, len(str(len(indexed) - 1)))
            return [
                Partition(f"spark_partition={i:0{width}d}", (("spark_partition", str(i)),), (block_file(i, r),))
                for i, (r, _, _) in enumerate(indexed)
            ], {}
        by_key: dict[str, tuple[tuple[Any, ...], list[DataFile]]] = {}
        for i, (_, _, groups) in enumerate(indexed):
            for values, rows in groups:
                texts = tuple(value_text(v) for v in values)
                key = self._partition_keys.get(texts) or "/".join(
                    f"{hive_escape(c)}={HIVE_DEFAULT_PARTITION if t is None else hive_escape(t)}" for c, t in zip(self.partition_by, texts)
                )
                by_key.setdefault(key, (values, []))[1].append(block_file(i, rows))
        partitions = []
        filters = {}
        for key in sorted(by_key):
            key_values, key_files = by_key[key]
            named = tuple((c, value_text(v)) for c, v in zip(self.partition_by, key_values))
            partitions.append(Partition(key, named, tuple(key_files)))
            filters[key] = key_values
        return partitions, filters

    def close(self) -> None:
        """Let Spark drop its cached Arrow copy of the DataFrame (the Ray blocks stay while referenced)."""
        df = self.__dict__.get("_spark_df")
        if df is not None:
            from raydp.spark.dataset import release_spark_recoverable

            try:
                release_spark_recoverable(df)
            except Exception:  # Spark already stopped: nothing is cached any more
                pass
            self._spark_df = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_spark_df"] = None  # a py4j handle: driver only
        return state

    # ------------------------------------------------------------ TableSource
    def read_batches(
        self,
        partition: Partition,
        columns: list[str],
        batch_size: int = DEFAULT_BATCH_SIZE,
        *,
        dictionary: Collection[str] = (),  # blocks hold decoded Arrow: nothing to keep encoded
    ) -> Iterator[pa.RecordBatch]:
        if isinstance(columns, str):
            raise InvalidArgumentError("columns must be a list of column names, not a string")
        unknown = [c for c in columns if c not in self._schema.names]
        if unknown:
            raise InvalidArgumentError(f"{self.uri}: unknown column(s) {unknown}")
        target = pa.schema([self._schema.field(c) for c in columns])
        values = self._filters.get(partition.key)
        for f in partition.files:
            block: pa.Table = ray.get(self._refs[int(f.path.rsplit("-", 1)[1])])
            if values is not None:
                block = block.filter(self._mask(block, values))
            projected = block.select(columns)
            if columns:
                projected = projected.cast(target, safe=True)
            for batch in projected.to_batches(max_chunksize=batch_size):
                yield batch

    def _mask(self, block: pa.Table, values: tuple[Any, ...]) -> pa.ChunkedArray:
        mask = None
        for column, value in zip(self.partition_by, values):
            col = block.column(column)
            m = pc.is_null(col) if value is None else pc.fill_null(pc.equal(col, pa.scalar(value, col.type)), False)
            mask = m if mask is None else pc.and_(mask, m)
        return mask
