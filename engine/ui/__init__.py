"""Previews of a table's statistics people can look at: a local web app (``metastore ui``),
a self-contained HTML report (``metastore preview --html``) and the notebook view
(``TableStatistics._repr_html_``), all drawing the same cards (docs/UI.md).

- ``viewmodel``: the cards' data from the lookups (engine/lookup/), no HTML;
- ``render``: Jinja2 templates and the inline SVG charts, shared by the three views;
- ``app``: the Starlette app and its JSON endpoints, served by uvicorn.
"""
