"""The per-file column index (docs/FORMAT.md, "File index"): per data file and column, row
count, null count, NaN count, min, max and bytes, and Bloom filters of chosen columns.

- ``build``: ``build_file_index(source, partition, ...)`` for one partition (a value);
- ``store``: ``assemble`` the partitions' values into the table's three files,
  ``write_file_index``, ``read_file_index``;
- ``plan``: ``plan_files`` over a written index (partitions first, then files).
"""
