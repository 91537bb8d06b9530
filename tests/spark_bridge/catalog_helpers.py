"""Catalog entries as a Delta- or Iceberg-enabled Spark records them, without those jars.

Maven Central is not reachable from this machine, so the Delta and Iceberg Spark
runtimes cannot be installed and ``CREATE TABLE ... USING delta`` fails (Spark finds
no data source ``delta``). What such a Spark keeps in its session catalog is plain
catalog metadata, so the tests register it directly through the JVM's
``SessionCatalog.createTable`` with a ``CatalogTable`` of that provider:

- Delta (``DeltaCatalog``, ``CreateDeltaTableCommand.cleanupTableDefinition``): provider
  ``delta``, an external table at the table's location, an empty schema, no partition
  columns (the Delta log holds both), partitions tracked in the catalog.
- Iceberg in a Hive metastore (``SparkSessionCatalog`` over ``HiveCatalog``): a Hive table
  (provider ``hive``, serde ``org.apache.iceberg.mr.hive.HiveIcebergSerDe``) with the
  properties ``table_type=ICEBERG`` and ``metadata_location`` (the committed metadata
  file); or, as other setups record it, provider ``iceberg`` with a location only.
"""

from __future__ import annotations

from typing import Any

ICEBERG_SERDE = "org.apache.iceberg.mr.hive.HiveIcebergSerDe"
ICEBERG_INPUT = "org.apache.iceberg.mr.hive.HiveIcebergInputFormat"
ICEBERG_OUTPUT = "org.apache.iceberg.mr.hive.HiveIcebergOutputFormat"


def register_table(
    spark: Any,
    name: str,
    *,
    provider: str,
    location: str | None,
    schema_ddl: str = "",
    properties: dict[str, str] | None = None,
    serde: str | None = None,
    input_format: str | None = None,
    output_format: str | None = None,
) -> None:
    """Create (replacing) catalog table ``default.<name>`` with exactly this metadata."""
    jvm = spark._jvm
    jss = spark._jsparkSession
    catalog = jss.sessionState().catalog()
    scala = jvm.scala
    utils = jvm.org.apache.spark.api.python.PythonUtils
    cat = jvm.org.apache.spark.sql.catalyst.catalog
    ident = jss.sessionState().sqlParser().parseTableIdentifier(f"default.`{name}`")
    if catalog.tableExists(ident):
        catalog.dropTable(ident, True, True)

    def option(value: Any) -> Any:
        return scala.Option.apply(value)

    def smap(d: dict[str, str]) -> Any:
        m = jvm.java.util.HashMap()
        for k, v in d.items():
            m.put(k, v)
        return utils.toScalaMap(m)

    uri = None if location is None else jvm.java.net.URI(location if "://" in location else "file://" + location)
    storage = cat.CatalogStorageFormat(option(uri), option(input_format), option(output_format), option(serde), False, smap({}))
    schema = jvm.org.apache.spark.sql.types.StructType.fromDDL(schema_ddl) if schema_ddl else jvm.org.apache.spark.sql.types.StructType()
    empty = utils.toSeq(jvm.java.util.ArrayList())
    table = cat.CatalogTable(
        ident,
        cat.CatalogTableType.EXTERNAL(),
        storage,
        schema,
        option(provider),
        empty,  # partition columns: the format's log holds them
        scala.Option.empty(),  # bucket spec
        "",  # owner
        jvm.java.lang.System.currentTimeMillis(),
        -1,  # last access
        "3.5.7",  # create version
        smap(properties or {}),
        scala.Option.empty(),  # stats
        scala.Option.empty(),  # view text
        scala.Option.empty(),  # comment
        empty,  # unsupported features
        True,  # tracksPartitionsInCatalog (Delta sets it)
        True,  # schemaPreservesCase
        smap({}),  # ignored properties
        scala.Option.empty(),  # view original text
    )
    if uri is None:
        # SessionCatalog refuses an external table without a location; the external catalog
        # (what a metastore holds, e.g. a table another engine registered) takes it
        catalog.externalCatalog().createTable(table, False)
    else:
        catalog.createTable(table, False, False)
