"""The file index of a Hudi partition: one entry per file slice (its base file, as the
source names the partition's data files). A slice without log files is its base file,
indexed from its Parquet footer (and, for Bloom columns, its values) as a directory's
file is; a slice with log files (merge-on-read updates and deletes not yet compacted)
is listed without statistics, so planning always keeps it: the base file's footer does
not bound the rows its logs add or change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine import fileio
from engine.fileindex.build import (
    DEFAULT_BLOOM_FPR,
    IndexColumns,
    PartitionFileIndex,
    index_parquet_file,
    partition_index,
    unindexed_file,
)

if TYPE_CHECKING:
    from engine.sources.base import Partition
    from engine.sources.hudi import HudiSource


def build_hudi_index(source: HudiSource, partition: Partition, cols: IndexColumns, bloom_fpr: float = DEFAULT_BLOOM_FPR) -> PartitionFileIndex:
    """The index of one partition of a ``HudiSource`` (engine/sources/hudi.py)."""
    fs = fileio.resolve(source.uri)[0]
    logs = source.slice_log_files(partition)
    files = []
    for data_file in partition.files:
        if logs.get(data_file.path) or data_file.path.endswith("/"):  # log files, or no base file
            files.append(unindexed_file(data_file.path, data_file.size))
            continue
        with fs.open_input_file(data_file.path) as handle:
            files.append(index_parquet_file(handle, data_file.path, data_file.size, cols, bloom_fpr))
    return partition_index(partition.key, files, cols, bloom_fpr)
