"""Statistics of a filtered subset of a table (docs/SUBSETS.md): each answer says how it was
obtained (``stored``, ``estimated`` with bounds and its assumption, ``computed``).

- ``answer.Subset``: the entry point (the lookups' ``where=`` delegates to it);
- ``partitions``: the partitions split into all / some / none by the metrics evaluators;
- ``stored``: what a subset reads of the statistics files (the I/O edge);
- ``rowcounts``: each cut partition's matching rows as an interval;
- ``merge``, ``estimates``, ``distributions``: whole partitions merged, cut ones estimated;
- ``tables``: the answers as the lookups' tables; ``computed``: the computed path (its
  runner passed in from above);
- ``counts``, ``predicates``, ``textforms``, ``mask``: pure kernels (intervals, what a
  predicate says about a column, stored text forms, a one-column predicate over values);
- ``model``: ``Method``, ``Answer`` and the schema-metadata form (``methods_of``).
"""

from __future__ import annotations

from engine.subset.answer import Subset
from engine.subset.computed import SubsetRunner
from engine.subset.model import METADATA_KEY, Answer, Method, SubsetMethods, methods_of

__all__ = ["METADATA_KEY", "Answer", "Method", "Subset", "SubsetMethods", "SubsetRunner", "methods_of"]
