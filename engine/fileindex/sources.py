"""Which builder indexes a partition of which table format (docs/FORMAT.md, "File index"):
Parquet directories and Delta tables by their files' footers (engine/fileindex/build.py),
Iceberg tables by their manifests (engine/fileindex/iceberg.py), Hudi tables by their file
slices' base files (engine/fileindex/hudi.py)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.fileindex.build import (
    DEFAULT_BLOOM_FPR,
    PartitionFileIndex,
    build_file_index,
    check_fpr,
    index_columns,
)
from engine.sources.base import Partition, TableSource


def indexable(source: TableSource) -> bool:
    """Whether the file index can describe ``source``'s data files."""
    from engine.sources.hudi import HudiSource
    from engine.sources.iceberg import IcebergSource
    from engine.sources.parquet import ParquetDirectorySource

    return isinstance(source, (ParquetDirectorySource, IcebergSource, HudiSource))


def index_partition(
    source: TableSource,
    partition: Partition,
    *,
    columns: Sequence[str] | None = None,
    bloom_columns: Sequence[str] = (),
    bloom_fpr: float = DEFAULT_BLOOM_FPR,
) -> PartitionFileIndex:
    """The file index of one partition of ``source`` (any format :func:`indexable` accepts)."""
    from engine.sources.hudi import HudiSource
    from engine.sources.iceberg import IcebergSource

    check_fpr(bloom_fpr)
    if isinstance(source, IcebergSource):
        from engine.fileindex.iceberg import build_iceberg_index

        return build_iceberg_index(source, partition, index_columns(source, columns, bloom_columns), bloom_fpr)
    if isinstance(source, HudiSource):
        from engine.fileindex.hudi import build_hudi_index

        return build_hudi_index(source, partition, index_columns(source, columns, bloom_columns), bloom_fpr)
    return build_file_index(source, partition, columns=columns, bloom_columns=bloom_columns, bloom_fpr=bloom_fpr)
