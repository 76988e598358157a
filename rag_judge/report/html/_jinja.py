"""The Jinja environment report.html's templates (``_templates.py``) render in: autoescaping on,
undefined names an error, and the filters and globals the templates call; plus the SVG and
sample macros as Python callables.

One cached environment, shared by the page's assembly (``page.py``) and the selection of the
samples a large page holds (``_inline.py``), which renders each sample's row and details on
its own to count the page's bytes as it goes.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from jinja2 import DictLoader, Environment, StrictUndefined
from markupsafe import Markup, escape

from rag_judge.report.format import MISSING, Table, amount, html_table, interval, num, short
from rag_judge.report.html._sample_view import (
    UNJUDGED,
    context_grades,
    failures,
    grounding_view,
    judgment_state,
    not_retrieved,
    part_label,
)
from rag_judge.report.html._templates import PAGE, SAMPLES, SVG
from rag_judge.report.model import BaseJudgment, JuryJudgment, RubricJudgment, Signature

__all__ = ["env", "sample_macros", "svg_macros"]


@cache
def env() -> Environment:
    """The environment, built once."""
    environment = Environment(
        loader=DictLoader({"page": PAGE, "svg": SVG, "samples": SAMPLES}),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )
    environment.filters.update(
        num=num,
        short=short,
        interval=interval,
        amount=amount,
        f1=lambda v: f"{v:.1f}",
        repr=repr,
        plural=_plural,
        clip=_clip,
        break_after=_break_after,
        signature=_signature,
        extras=_extras,
        table=_table,
    )
    environment.globals.update(
        missing=MISSING,
        unjudged=UNJUDGED,
        context_grades=context_grades,
        not_retrieved=not_retrieved,
        grounding_view=grounding_view,
        judgment_state=judgment_state,
        failures=failures,
        part_label=part_label,
    )
    return environment


def svg_macros() -> Any:
    """The SVG macros, callable from Python (each returns markup)."""
    return env().get_template("svg").module


def sample_macros() -> Any:
    """The macros of one sample's table row and details, callable from Python."""
    return env().get_template("samples").module


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _break_after(text: str, sep: str) -> Markup:
    """``text``, escaped, with a line-break opportunity after each ``sep``."""
    return Markup(escape(sep) + Markup("<wbr>")).join(text.split(sep))


def _signature(sig: Signature) -> Markup:
    """The rendered signature with a line-break opportunity after each ``|``, nested ones too."""
    parts = [sig.name, *(f"{k}:{v}" for d in (sig.options, sig.run) for k, v in d.items())]
    return Markup("|<wbr>").join(_break_after(p, "|") for p in parts)


def _table(table: Table) -> Markup:
    # html_table escapes every heading, cell and note itself
    return Markup(html_table(table))


def _extras(j: BaseJudgment) -> str:
    """The scoring mode's own fields of a judgment (probabilities, samples, spread) and what
    the server did differently from what was asked, as JSON."""
    extra: dict[str, object] = {}
    if isinstance(j, JuryJudgment):
        extra = {"scores": j.scores, "spread": j.spread}
    elif isinstance(j, RubricJudgment):
        extra = _verdict_extras(j)
    # A request that kept its response format, and a reply that matched it, are the norm.
    usual = {"structured_output": True, "schema_valid": True}
    shown = {k: v for k, v in extra.items() if v is not None and usual.get(k) is not v}
    return json.dumps(shown, ensure_ascii=False) if shown else ""


def _verdict_extras(j: RubricJudgment) -> dict[str, object]:
    return {
        "probs": j.probs,
        "verdict": j.verdict,
        "scores": j.scores,
        "spread": j.spread,
        "unscored_choices": j.unscored_choices,
        "logprobs_missing": j.logprobs_missing,
        "choices_received": j.choices_received,
        "finish_reason": j.finish_reason,
        "structured_output": j.structured_output,
        "schema_valid": j.schema_valid,
        "label_mass": j.label_mass,
    }
