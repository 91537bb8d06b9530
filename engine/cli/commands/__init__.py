"""The ``metastore`` commands, one module per group of them; engine/cli/console.py adds them to the group."""
