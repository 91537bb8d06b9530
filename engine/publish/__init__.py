"""Statistics where planners already look: a table's statistics written into its own Iceberg
metadata (Puffin theta sketches, partition statistics), docs/PLANNERS.md.

``puffin`` (the container, pure), ``iceberg_theta`` (Iceberg's single-value serialization
and theta hashes, pure), ``partition_stats`` (the spec's partition statistics file),
``commit`` (the files written and committed through the table's catalog).
"""
