"""report.html: one self-contained page (``page.py``) and its parts: which samples it holds
(``_inline.py``), a sample's row and details (``_sample_view.py``), a conversation's turns and
steps (``_conversation_view.py``), the review mode and its
script (``_review.py``, ``_review_js.py``), the charts' geometry (``charts.py``), the Jinja
templates, environment and assets (``_templates.py``, ``_jinja.py``, ``_assets.py``)."""

from __future__ import annotations

from rag_judge.report.html.page import (
    INLINE_ROWS,
    SAMPLE_BUDGET,
    SEED,
    column_groups,
    context_grades,
    k_families,
    library_versions,
    not_retrieved,
    render_html,
    scale_of,
    svg_histogram,
    svg_k_chart,
    write_html,
)

__all__ = [
    "INLINE_ROWS",
    "SAMPLE_BUDGET",
    "SEED",
    "column_groups",
    "context_grades",
    "k_families",
    "library_versions",
    "not_retrieved",
    "render_html",
    "scale_of",
    "svg_histogram",
    "svg_k_chart",
    "write_html",
]
