"""Table names: each is one directory name of a store (``<store>/<name>/``), checked before any work.

A name that could leave the store (``..``, ``/abs``, ``a/b``, ``a\\b``) or that no file system
takes (empty, control characters, over 255 bytes in UTF-8) is refused with one line, by
every entry point that names a table for writing (``engine.api.analyze``, the job itself,
the CLI through them) and by the readers that build paths from a request (the web app).
"""

from __future__ import annotations

from engine.exceptions import InvalidArgumentError

#: the longest directory name local file systems and S3 keys' components take, in UTF-8 bytes
MAX_NAME_BYTES = 255


def table_name_problem(name: object) -> str | None:
    """Why ``name`` is not a table name, or None."""
    if not isinstance(name, str):
        return f"a table name is text, not {type(name).__name__}"
    if not name:
        return "a table name is not empty"
    if name in (".", ".."):
        return "a table name is not '.' or '..'"
    if "/" in name or "\\" in name:
        return "a table name is one directory name of the store: no '/' or '\\'"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "a table name has no control characters"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "a table name is valid Unicode (no lone surrogates)"
    if size > MAX_NAME_BYTES:
        return f"a table name is at most {MAX_NAME_BYTES} bytes in UTF-8, not {size}"
    return None


def shown(name: object, limit: int = 80) -> str:
    """``name`` in an error line: repr, cut to ``limit`` characters."""
    text = repr(name)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_table_name(name: str) -> str:
    """``name`` if it is a table name, else InvalidArgumentError (one line)."""
    problem = table_name_problem(name)
    if problem is not None:
        raise InvalidArgumentError(f"bad table name {shown(name)}: {problem}")
    return name
