"""Statistics of a filtered subset of a table (docs/SUBSETS.md): each answer says how it was
obtained (``stored``, ``estimated`` with bounds and its assumption, ``computed``).

- ``answer.Subset``: the partitions split by the strict and inclusive metrics evaluators,
  then statistics, top frequencies and histograms of the matching rows;
- ``counts``: pure interval kernels (AND/OR bounds, ranges over histogram bins);
- ``model``: ``Method``, ``Answer`` and the schema-metadata form (``methods_of``);
- ``mask``: a one-column predicate over stored values.
"""

from __future__ import annotations

from engine.subset.answer import Subset
from engine.subset.model import METADATA_KEY, Answer, Method, SubsetMethods, methods_of

__all__ = ["METADATA_KEY", "Answer", "Method", "Subset", "SubsetMethods", "methods_of"]
