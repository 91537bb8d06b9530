"""The analyze job's task bodies (plain Python, run inside Ray tasks), one module per stage."""
