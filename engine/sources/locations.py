"""Where a table format's log may send a reader: inside the table's location, or under a data root.

A Delta, Iceberg or Hudi table names its files in its own metadata (add actions and
deletion vectors, manifests, file slices), and those names may be absolute URIs or
``../`` paths. Without a check, a table inside a location a server may analyze (its
``--analyze-root``) could name any file the server can read, and its statistics (min,
max, frequent values) would publish that file's contents (issue #33). So every file a
format names must lie inside the table's location, or under one of the caller's
``data_roots`` (the server's analyze roots; the CLI's ``--data-root``): else the table is
refused with one line naming the entry, before anything is read.

The check is on the names as the reader opens them, ``..`` applied (no file system is
touched): a local name is also accepted when its resolved path (symbolic links
followed) lies inside the table's resolved location, so a table reached through a
linked folder keeps its absolute names. Remote names with ``.`` or ``..`` segments are
refused (engine.fileio.canonical).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from engine import fileio
from engine.exceptions import InvalidArgumentError, InvalidTableLayoutError

__all__ = ["Locations"]


def _lexical(uri: str) -> str:
    """``uri`` spelled for containment, ``..`` applied, no file system touched."""
    if fileio.is_local(uri):
        return os.path.normpath(fileio.resolve(uri)[1])
    return fileio.canonical(uri)


class Locations:
    """The places a table's files may be: its location and the caller's data roots."""

    def __init__(self, table_uri: str, data_roots: Sequence[str] = ()) -> None:
        self.table_uri = table_uri
        self._roots = [_lexical(table_uri), *(_lexical(r) for r in data_roots)]
        self._resolved: list[str] | None = None  # realpaths of the local roots, when first needed
        self._has_data_roots = bool(data_roots)

    def check(self, uri: str, entry: str) -> None:
        """Raise InvalidTableLayoutError naming ``entry`` (what the log calls the file) unless
        ``uri`` (a file's URI or absolute path, as the reader opens it) is inside a root."""
        if not self.inside(uri):
            where = "the table's location" + (" or a data root" if self._has_data_roots else "")
            raise InvalidTableLayoutError(f"{self.table_uri}: {entry} names {uri}, outside {where}: not read")

    def check_relative(self, path: str, entry: str) -> str:
        """The URI of ``path`` (relative to the table, or an absolute URI), checked."""
        uri = path if "://" in path or path.startswith("/") else fileio.join(self.table_uri, path)
        self.check(uri, entry)
        return uri

    def inside(self, uri: str) -> bool:
        try:
            spelled = _lexical(uri)
        except InvalidArgumentError:
            return False
        if any(fileio.is_within(spelled, root) for root in self._roots):
            return True
        if not fileio.is_local(uri):
            return False
        if self._resolved is None:
            self._resolved = [os.path.realpath(r) for r in self._roots if r.startswith("/")]
        real = os.path.realpath(spelled)
        return any(fileio.is_within(real, root) for root in self._resolved)
