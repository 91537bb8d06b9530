"""JSON values as the type checker sees them: what ``json.loads`` gives and ``json.dumps`` takes.

One alias for the documents Metastore writes and reads as JSON (Flight requests and action
replies, manifests, the web app's payloads), so they are not typed ``Any`` (docs/TYPES.md).
"""

from __future__ import annotations

from typing import TypeAlias

#: a JSON value: an object, an array, a string, a number, true/false or null
JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None
#: a JSON object (the top level of a request, a reply or a manifest)
JSONObject: TypeAlias = dict[str, JSON]
