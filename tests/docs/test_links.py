"""Every relative link of README.md and docs/ points at a file that exists, and an anchor
(``#section``) at a heading of that file (GitHub's slugs: lower case, punctuation dropped,
spaces as dashes)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.examples import REPO, documents

_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#+\s+(.*?)\s*$")


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m[1]) for line in path.read_text(encoding="utf-8").splitlines() if (m := _HEADING.match(line))}


def test_relative_links_resolve() -> None:
    broken = []
    for doc in documents():
        for target in _LINK.findall(doc.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            name = f"{doc.relative_to(REPO)} -> {target}"
            if not file.exists():
                broken.append(f"{name}: no such file")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                broken.append(f"{name}: no such heading")
    assert not broken, "\n".join(broken)
