"""The per-file column index (docs/FORMAT.md, "File index"): per data file and column, row
count, null count, NaN count, min, max and bytes, and Bloom filters of chosen columns.

- ``sources``: ``index_partition(source, partition, ...)``: one partition of any table format;
- ``build``: ``build_file_index(source, partition, ...)`` for one partition of Parquet files
  (a value); ``iceberg`` (manifests, footers by field id), ``hudi`` (file slices' base files);
- ``store``: ``assemble`` the partitions' values into the table's three files,
  ``write_file_index``, ``read_file_index``;
- ``plan``: ``plan_files`` over a written index (partitions first, then files).
"""
