"""Writing a self-contained HTML page the CLI made (``preview --html``, ``diff --html``)."""

from __future__ import annotations

import os
import tempfile


def write_html(path: str, text: str, prefix: str) -> str:
    """``text`` to ``path`` through a temporary file (named ``prefix``...) renamed over it, so
    a reader never sees half a file; readable as the umask allows (mkstemp's 0600 is for
    secrets, not for a report to share). Returns the absolute path."""
    target = os.path.abspath(path)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".html", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    return target
