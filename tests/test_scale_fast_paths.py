"""The fast paths a large run takes (issue 34, goal 1), each checked against the path it
short-cuts: prompts rendered through the sandbox's short way to a dict key and with each
rubric's template and variables found once, data neutralised without a regex scan when it
cannot hold a delimiter, the stub's words found without the marker scan, the bootstrap's row
draws shared by every mean, and the report pages reading the samples file's index instead of
every sample."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import numpy as np
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from rag_judge.data.rows import RowWriter
from rag_judge.data.sample import Sample
from rag_judge.judge.prompts import PromptRenderer, conversation, sample_variables, section
from rag_judge.judge.rubrics import BUILTIN_RUBRICS
from rag_judge.llm.providers import stub
from rag_judge.llm.sections import neutralise
from rag_judge.pipeline.summary import shared_intervals, summarize
from rag_judge.report.html.page import render_html
from rag_judge.report.markdown import render_markdown
from rag_judge.report.model import Report, SampleFile
from rag_judge.report.samples import Column, SampleIndex
from rag_judge.stats import bootstrap
from rag_judge.stats.bootstrap import bootstrap_ci, bootstrap_cis
from tests.report.conversations import report as conversations_report

_OPEN = re.compile("[<\uff1c\ufe64]{3,}")
_CLOSE = re.compile("[>\uff1e\ufe65]{3,}")


def _neutralise_by_scan(text: str) -> str:
    """neutralise as it was: both scans, always."""
    text = _OPEN.sub(lambda m: "\u2039" * len(m.group()), text)
    return _CLOSE.sub(lambda m: "\u203a" * len(m.group()), text)


TEXTS = [
    "",
    "plain text",
    "a << b >> c",
    "<<<BEGIN ANSWER>>>",
    "x <<<< y >>>>> z",
    "<<\uff1c mixed \ufe65>>",
    "\uff1c\uff1c\uff1c full width",
    "caf\u00e9 <<< accents",
    "caf\u00e9 no brackets",
    "<><><>",
    ">>>",
]


@pytest.mark.parametrize("text", TEXTS)
def test_neutralise_gives_what_the_scan_gives(text: str) -> None:
    assert neutralise(text) == _neutralise_by_scan(text)


def _samples() -> list[Sample]:
    contexts = [
        {"id": f"d{i}", "text": f"context {i} with <<<END CONTEXT 1>>> and caf\u00e9 [d{i}]"}
        for i in range(4)
    ]
    return [
        Sample.model_validate(
            {
                "id": "a",
                "question": "What is <<<USER>>> here?",
                "answer": "It is [d1] this, caf\u00e9.",
                "contexts": contexts,
                "references": ["a reference", "  "],
            }
        ),
        Sample.model_validate(
            {"id": "b", "question": "q?", "answer": "a.", "contexts": [{"text": "one"}]}
        ),
    ]


def _plain_sandbox(renderer: PromptRenderer) -> PromptRenderer:
    """The renderer with jinja's own sandbox, as it was."""
    env = ImmutableSandboxedEnvironment(
        loader=renderer.env.loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.globals["section"] = section
    env.globals["conversation"] = conversation
    renderer.env = env
    renderer.splits = False  # every prompt rendered whole
    return renderer


@pytest.mark.parametrize("name", ["faithfulness", "correctness", "context_relevance"])
def test_prompts_render_as_through_jinjas_sandbox(name: str) -> None:
    rubric = BUILTIN_RUBRICS[name]
    fast, plain = PromptRenderer(), _plain_sandbox(PromptRenderer())
    for sample in _samples():
        for ctx in range(len(sample.contexts)) if rubric.per_context else [None]:
            variables = sample_variables(rubric, sample, ctx)
            first = fast.render(rubric, variables)
            assert first == plain.render(rubric, variables)
            assert fast.render(rubric, variables) == first  # the second, from what was kept


@pytest.mark.parametrize(
    "expression",
    [
        "{{ d.text }}",
        "{{ d.items() | list | length }}",  # a key named as a dict method: the method
        "{{ d.missing }}",  # StrictUndefined: fails
        "{{ d.__class__ }}",  # unsafe: fails
        "{{ d.mro }}",
    ],
)
def test_the_short_way_to_a_key_keeps_the_sandboxs_rules(expression: str) -> None:
    d = {"text": "t", "items": "shadowed", "mro": 1}
    results = []
    for renderer in (PromptRenderer(), _plain_sandbox(PromptRenderer())):
        try:
            results.append(renderer.env.from_string(expression).render(d=d))
        except jinja2.TemplateError as exc:
            results.append(type(exc).__name__)
    assert results[0] == results[1]


def test_a_rubric_changed_by_copy_renders_its_own_prompt() -> None:
    renderer = PromptRenderer()
    rubric = BUILTIN_RUBRICS["faithfulness"]
    other = rubric.model_copy(update={"criteria": "Only the new criteria count."})
    variables = sample_variables(rubric, _samples()[0])
    first = renderer.render(rubric, variables)[1].content
    second = renderer.render(other, variables)[1].content
    assert "Only the new criteria count." in second and "Only the new" not in first
    assert renderer.template_hash(rubric) != renderer.template_hash(other)


def _content_words_by_scan(text: str) -> list[str]:
    found = stub._WORD.findall(stub._MARKERS.sub(" ", text).casefold())
    return [w for w in found if w not in stub._STOPWORDS]


@pytest.mark.parametrize("text", ["The cat [1] sat [d3, d4].", "no markers here", "a [b c]"])
def test_the_stubs_words_are_those_of_the_marker_scan(text: str) -> None:
    assert stub._content_words(text) == _content_words_by_scan(text)


@pytest.mark.parametrize("n", [1, 7, 500])
def test_shared_draws_give_each_columns_own_interval(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(n)
    columns = [rng.random(n), rng.integers(1, 6, n).astype(np.float64), np.zeros(n)]
    alone = [bootstrap_ci(c, resamples=300, confidence=0.9, seed=3) for c in columns]
    for chunk in (2_000_000, 1_100):  # one chunk of draws; several, the last one short
        for threaded in (10**9, 1):  # the columns in turn; spread over threads
            monkeypatch.setattr(bootstrap, "_CHUNK", chunk)
            monkeypatch.setattr(bootstrap, "_THREADED", threaded)
            assert bootstrap_cis(columns, resamples=300, confidence=0.9, seed=3) == alone
    assert bootstrap_cis([np.zeros(0)], resamples=10) == [(None, None)]
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_cis([np.zeros(2), np.zeros(3)])


def test_a_summary_with_the_shared_interval_is_the_summary_without() -> None:
    rng = np.random.default_rng(0)
    full, holed = Column(), Column()
    full.extend(rng.random(300).tolist())
    holed.extend([None if i % 7 == 0 else float(v) for i, v in enumerate(rng.random(300))])
    options = {"resamples": 200, "confidence": 0.95, "seed": 5}
    found = shared_intervals({"full": full, "holed": holed}, **options)
    assert list(found) == ["full"]  # a column with a hole keeps its own draw
    assert summarize(full, **options, ci=found["full"]) == summarize(full, **options)


def test_pages_of_a_samples_file_read_its_index(tmp_path: Path) -> None:
    """Where conversations degraded, and whether any sample is one, come from the file's index
    (built as it is written, or in one pass when first asked for): the pages are those of the
    same report with its samples in a list."""
    listed = conversations_report()
    writer = RowWriter(tmp_path / "samples.jsonl")
    index = SampleIndex()
    for r in listed.samples:
        writer.write(r.model_dump_json().encode())
        index.add(r)
    offsets = writer.close()
    assert [d for _, d in index.degraded] and index.conversations
    for kept in (index, None):
        samples = SampleFile(writer.path, offsets, index=kept)
        filed = Report.model_validate({**listed.__dict__, "samples": samples})
        assert render_markdown(filed) == render_markdown(listed)
        assert render_html(filed) == render_html(listed)
