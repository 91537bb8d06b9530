"""What Spark's session catalog knows about a table: kind, format, location, schema, partitions.

    from spark_bridge.catalog import lookup_table
    info = lookup_table(spark, "db.sales")
    info.provider, info.location, info.partition_columns, info.partitions

The catalog is read through py4j (``sessionState().catalog()``), because the SQL
commands (``DESCRIBE``, ``SHOW PARTITIONS``) print partition values escaped and
leave out the partitions' locations. Everything py4j returns is turned into plain
Python values here, so the rest of the bridge never holds JVM handles.

Locations come back as ``java.net.URI`` strings, where a Hive partition folder
``s=b%2Fc`` is written ``s=b%252Fc``; they are decoded to the path that is on disk
(engine.fileio takes paths literally).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa

from engine.exceptions import InvalidArgumentError, ServiceError, TableNotFoundError
from engine.sources import registry as formats

if TYPE_CHECKING:  # pyspark is imported where a session is used
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = [
    "HIVE_DEFAULT_PARTITION",
    "SESSION_CATALOG",
    "CatalogPartition",
    "CatalogTableInfo",
    "arrow_type",
    "catalog_partition",
    "fileio_uri",
    "lookup_table",
    "table_identifier",
]

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
SESSION_CATALOG = "spark_catalog"


@dataclass(frozen=True)
class CatalogPartition:
    """One partition registered in the catalog."""

    values: tuple[tuple[str, str | None], ...]  # (column, raw value) in partition-column order; None = null
    location: str | None  # decoded URI (as engine.fileio takes it), None if the catalog has none


@dataclass(frozen=True)
class CatalogTableInfo:
    """A table of the session catalog, as plain values."""

    name: str  # "db.table", unquoted
    database: str
    table: str
    table_type: str  # MANAGED or EXTERNAL
    provider: str  # lower case: parquet, csv, orc, hive, delta, ...
    serde: str | None  # Hive serde tables only
    location: str | None  # decoded URI of the table's root
    schema_json: str  # the Spark StructType as JSON: data columns, then partition columns
    partition_columns: tuple[str, ...]
    tracks_partitions: bool  # partitions live in the catalog (else Spark discovers them from folders)
    partitions: tuple[CatalogPartition, ...] | None  # None unless tracks_partitions
    properties: tuple[tuple[str, str], ...] = ()  # the table's properties (TBLPROPERTIES), sorted by key

    def table_property(self, key: str) -> str | None:
        """A table property (keys compare case-insensitively, as Hive's do)."""
        for k, v in self.properties:
            if k.lower() == key.lower():
                return v
        return None

    @property
    def table_format(self) -> str | None:
        """``delta``, ``iceberg`` or ``hudi`` when the catalog entry is a table of that format, else None.

        What a format-enabled Spark records: Delta's catalog, the provider ``delta``;
        Iceberg's ``SparkSessionCatalog`` over a Hive metastore, a Hive table (provider
        ``hive``, serde ``HiveIcebergSerDe``) with the property ``table_type=ICEBERG``
        and the committed ``metadata_location``; other setups, the provider
        ``iceberg``; Hudi's catalog, the provider ``hudi``.
        """
        if self.provider in formats.WITH_HISTORY:
            return self.provider
        if (self.table_property("table_type") or "").upper() == "ICEBERG" or "iceberg" in (self.serde or "").lower():
            return "iceberg"
        return None

    @property
    def format_location(self) -> str | None:
        """Where the format's library opens the table: for Iceberg the catalog's committed
        ``metadata_location`` when it records one (a metadata file newer than it is an
        uncommitted or failed write), else the table location."""
        if self.table_format == "iceberg":
            metadata = self.table_property("metadata_location")
            if metadata:
                return fileio_uri(metadata)
        return self.location

    @property
    def is_parquet(self) -> bool:
        """Parquet files: a ``USING parquet`` table or a Hive table with a Parquet serde."""
        if self.provider == "parquet":
            return True
        return self.provider == "hive" and "parquet" in (self.serde or "").lower()

    @property
    def spark_schema(self) -> StructType:
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.schema_json))

    @property
    def data_columns(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.spark_schema.fields if f.name not in self.partition_columns)

    def spark_type(self, column: str) -> DataType:
        """The Spark DataType of a top-level column (case-insensitive, as Spark resolves names)."""
        for f in self.spark_schema.fields:
            if f.name.lower() == column.lower():
                return f.dataType
        raise InvalidArgumentError(f"table {self.name} has no column {column!r}")


def arrow_type(spark_type: DataType) -> pa.DataType:
    """The Arrow type Spark's Arrow conversion gives a Spark type (raises InvalidArgumentError if none)."""
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return to_arrow_type(spark_type)
    except Exception as exc:  # pyspark raises its own TypeError subclasses
        raise InvalidArgumentError(f"Spark type {spark_type.simpleString()} has no Arrow equivalent ({exc})") from exc


def _uri(java_uri: Any) -> str:
    return fileio_uri(str(java_uri.toString()))


def fileio_uri(text: str) -> str:
    """A URI as Spark/Hadoop write it (``java.net.URI``) as engine.fileio reads it.

    The path is percent-decoded (``s=a%252Fb`` -> ``s=a%2Fb``, the folder's real name);
    local files become plain paths.
    """
    parts = urlsplit(text)
    path = unquote(parts.path)
    if parts.scheme in ("", "file"):
        return path
    return f"{parts.scheme}://{parts.netloc}{path}"


def _java_error(exc: BaseException) -> str:
    from spark_bridge.session import first_line

    return first_line(exc)


def table_identifier(spark: SparkSession, table: str) -> tuple[Any, str, list[str]]:
    """``(TableIdentifier, "db.table", parts as given)`` of a name of the session catalog (1, 2 or 3 parts)."""
    jss = spark._jsparkSession
    try:
        parts = [str(p) for p in _seq(jss.sessionState().sqlParser().parseMultipartIdentifier(table))]
    except Exception as exc:
        raise InvalidArgumentError(f"{table!r} is not a table name: {_java_error(exc)}") from exc
    if len(parts) == 3:
        if parts[0].lower() != SESSION_CATALOG:
            raise InvalidArgumentError(
                f"{table}: only tables of Spark's session catalog ({SESSION_CATALOG}) are supported, not catalog "
                f"{parts[0]!r}; analyze(spark.table({table!r})) analyzes any table's rows as a DataFrame"
            )
        parts = parts[1:]
    given = list(parts)
    if len(parts) not in (1, 2):
        raise InvalidArgumentError(f"{table!r} is not a table name (expected table, db.table or {SESSION_CATALOG}.db.table)")
    catalog = jss.sessionState().catalog()
    if len(parts) == 1:
        parts = [str(catalog.getCurrentDatabase()), parts[0]]
    quoted = ".".join("`" + p.replace("`", "``") + "`" for p in parts)
    ident = jss.sessionState().sqlParser().parseTableIdentifier(quoted)
    return ident, f"{parts[0]}.{parts[1]}", given


def _seq(seq: Any) -> list[Any]:
    """A Scala Seq as a Python list (one py4j call per element)."""
    return [seq.apply(i) for i in range(seq.size())]


def _properties(scala_map: Any) -> tuple[tuple[str, str], ...]:
    """A Scala ``Map[String, String]`` as sorted (key, value) pairs (one py4j call per entry)."""
    keys = _seq(scala_map.keys().toSeq())
    return tuple(sorted((str(k), str(scala_map.apply(k))) for k in keys))


def _option(opt: Any) -> Any:
    return opt.get() if opt.isDefined() else None


def catalog_partition(partition: Any, partition_columns: tuple[str, ...]) -> CatalogPartition:
    """A JVM ``CatalogTablePartition`` as plain values."""
    spec = partition.spec()
    values = []
    for c in partition_columns:
        raw = _option(spec.get(c))
        values.append((c, None if raw is None or str(raw) == HIVE_DEFAULT_PARTITION else str(raw)))
    loc = _option(partition.storage().locationUri())
    return CatalogPartition(tuple(values), None if loc is None else _uri(loc))


def lookup_table(spark: SparkSession, table: str) -> CatalogTableInfo:
    """The catalog's description of ``table``; clear errors for unknown tables and views."""
    ident, qualified, given = table_identifier(spark, table)
    catalog = spark._jsparkSession.sessionState().catalog()
    jvm: Any = spark._jvm  # py4j's view of the JVM: untyped (Optional in pyspark's types; set on a live session)
    try:
        if catalog.isTempView(jvm.org.apache.spark.api.python.PythonUtils.toSeq(given)):
            raise InvalidArgumentError(
                f"{table} is a temporary view, not a table of the catalog; analyze(spark.table({table!r})) analyzes a view's rows"
            )
        if not catalog.tableExists(ident):
            raise TableNotFoundError(f"Spark's catalog has no table {qualified}")
        meta = catalog.getTableMetadata(ident)
        table_type = str(meta.tableType().name())
        if table_type == "VIEW":
            raise InvalidArgumentError(f"{qualified} is a view, not a table; analyze(spark.table({qualified!r})) analyzes a view's rows")
        provider = _option(meta.provider())
        storage = meta.storage()
        location = _option(storage.locationUri())
        partition_columns = tuple(str(c) for c in _seq(meta.partitionColumnNames()))
        tracks = bool(meta.tracksPartitionsInCatalog())
        partitions: tuple[CatalogPartition, ...] | None = None
        if partition_columns and tracks:
            listed = _seq(catalog.listPartitions(ident, jvm.scala.Option.empty()))
            partitions = tuple(catalog_partition(p, partition_columns) for p in listed)
        return CatalogTableInfo(
            name=qualified,
            database=qualified.split(".", 1)[0],
            table=qualified.split(".", 1)[1],
            table_type=table_type,
            provider=str(provider).lower() if provider is not None else "",
            serde=None if _option(storage.serde()) is None else str(_option(storage.serde())),
            location=None if location is None else _uri(location),
            schema_json=str(meta.schema().json()),
            partition_columns=partition_columns,
            tracks_partitions=tracks,
            partitions=partitions,
            properties=_properties(meta.properties()),
        )
    except (InvalidArgumentError, TableNotFoundError):
        raise
    except Exception as exc:
        raise ServiceError(f"could not read table {qualified} from Spark's catalog: {_java_error(exc)}") from exc
