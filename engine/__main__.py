"""``python -m engine``: the metastore command line."""

from engine.cli.console import main

if __name__ == "__main__":
    main()
