"""A deterministic client for CI and demos: replies come from a plain function of the request.

``StubClient(responder)`` calls ``responder(request)`` and wraps a returned string into a
``Completion`` (a responder may also return a ``Completion``, or raise ``LLMError`` to script a
failure). Ready-made responders: ``fixed(score)``, ``scripted(replies)`` and
``lexical_support()``, a rule-based judge that reads the prompt's delimited sections. The same
request gives the same reply on every machine and in every process: nothing here depends on
``hash()`` randomisation, the clock or a random generator.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence

from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.llm.ratelimit import Sleeper, estimate_tokens

__all__ = [
    "Responder",
    "StubClient",
    "fixed",
    "lexical_support",
    "parse_sections",
    "scripted",
    "support",
]

Responder = Callable[[CompletionRequest], str | Completion]

# The template side renders untrusted text as <<<BEGIN NAME>>>\n...\n<<<END NAME>>>, with NAME in
# QUESTION, ANSWER, CONTEXT 1, CONTEXT 2, ..., REFERENCE (or REFERENCE 1, ...).
_SECTION = re.compile(r"<<<BEGIN ([A-Z]+(?: \d+)?)>>>\n(.*?)\n?<<<END \1>>>", re.DOTALL)
_WORD = re.compile(r"\w+")
_STOPWORD_TEXT = (
    "a an and are as at be been but by do does did for from had has have he her his i if in into "
    "is it its me my no not of on or our she so than that the their them then there these they "
    "this to was we were what when where which who whom why will with you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


class StubClient:
    """An ``LLMClient`` whose replies come from ``responder`` (default: ``lexical_support()``).

    ``model`` names the responder in cache keys (default: the responder's ``name`` attribute).
    ``delay`` seconds are awaited per call through ``sleep`` (for tests of slow servers).
    ``calls`` counts the calls made.
    """

    provider = "stub"
    base_url: str | None = None

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        model: str | None = None,
        delay: float = 0.0,
        sleep: Sleeper = asyncio.sleep,
    ) -> None:
        self.responder: Responder = responder if responder is not None else lexical_support()
        self.model = model or str(getattr(self.responder, "name", "stub"))
        self.delay = delay
        self._sleep = sleep
        self.calls = 0

    async def complete(self, request: CompletionRequest) -> Completion:
        self.calls += 1
        if self.delay:
            await self._sleep(self.delay)
        reply = self.responder(request)
        if isinstance(reply, Completion):
            return reply
        return Completion(
            choices=[reply] * request.n,
            prompt_tokens=estimate_tokens(request.messages),
            completion_tokens=math.ceil(len(reply) / 4) * request.n,
        )


def _named(func: Responder, name: str) -> Responder:
    func.name = name  # type: ignore[attr-defined]
    return func


def _verdict(request: CompletionRequest, score: int, reason: str) -> str | Completion:
    """JSON ``{"reason", "score"}``; for a scoring request (``score_labels``), the label and a
    one-hot distribution, as the local client answers."""
    labels = request.score_labels
    if labels and str(score) in labels:
        probs = {label: float(label == str(score)) for label in labels}
        return Completion(choices=[str(score)], completion_tokens=1, score_probs=probs)
    return json.dumps({"reason": reason, "score": score})


def fixed(score: int = 3, reason: str = "fixed stub verdict") -> Responder:
    """Always the same verdict."""

    def respond(request: CompletionRequest) -> str | Completion:
        return _verdict(request, score, reason)

    return _named(respond, f"stub-fixed-{score}")


def scripted(
    replies: Sequence[str | Completion | LLMError] | Callable[[CompletionRequest], str],
    *,
    name: str = "stub-scripted",
) -> Responder:
    """Replies in call order from a list (an ``LLMError`` entry is raised, to script a failure;
    running out raises a non-retryable one), or from a function of the request."""
    if callable(replies):
        func = replies

        def respond_with(request: CompletionRequest) -> str | Completion:
            return func(request)

        return _named(respond_with, name)
    queue = list(replies)
    position = [0]

    def respond(request: CompletionRequest) -> str | Completion:
        if position[0] >= len(queue):
            raise LLMError(f"scripted responder ran out after {len(queue)} replies")
        reply = queue[position[0]]
        position[0] += 1
        if isinstance(reply, LLMError):
            raise reply
        return reply

    return _named(respond, name)


def parse_sections(prompt: str) -> dict[str, str]:
    """The delimited sections of a rendered prompt, by name (``ANSWER``, ``CONTEXT 1``, ...)."""
    return {name: body for name, body in _SECTION.findall(prompt)}


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.casefold()) if w not in _STOPWORDS]


def support(answer: str, evidence: Iterable[str]) -> float:
    """Share of the answer's content words (stopwords dropped) found in the evidence, in [0, 1];
    0 for an answer with no content words."""
    words = _content_words(answer)
    if not words:
        return 0.0
    found = set()
    for text in evidence:
        found.update(_content_words(text))
    return sum(w in found for w in words) / len(words)


def lexical_support() -> Responder:
    """A rule-based judge from word overlap between the prompt's sections, mapped to 1-5 as
    ``1 + round(4 * share)`` (halves round up). What it compares depends on what the rubric
    shows the judge:

    * ANSWER with CONTEXT / REFERENCE sections: the share of the answer's content words found
      in them (faithfulness, correctness, coverage ...);
    * ANSWER with only a QUESTION: the share of the question's content words the answer uses
      (answer relevance);
    * CONTEXT with a QUESTION and no ANSWER: the share of the question's content words the
      context contains (context relevance, one context at a time);
    * ANSWER alone: the share of distinct content words, a crude fluency/coherence proxy that
      punishes repetition.

    Deterministic and free, it checks the plumbing; it is not a judgment of meaning.
    """

    def respond(request: CompletionRequest) -> str | Completion:
        prompt = "\n".join(m.content for m in request.messages)
        sections = parse_sections(prompt)
        answer, question = sections.get("ANSWER"), sections.get("QUESTION")
        contexts = [b for n, b in sections.items() if n.startswith("CONTEXT")]
        evidence = contexts + [b for n, b in sections.items() if n.startswith("REFERENCE")]
        if answer is not None and evidence:
            share = support(answer, evidence)
            what = "of the answer's content words appear in the evidence"
        elif answer is not None and question is not None:
            share = support(question, [answer])
            what = "of the question's content words are addressed by the answer"
        elif contexts and question is not None:
            share = support(question, contexts)
            what = "of the question's content words appear in the context"
        elif answer is not None:
            words = _content_words(answer)
            share = len(set(words)) / len(words) if words else 0.0
            what = "of the answer's content words are distinct"
        else:
            return _verdict(request, 1, "no ANSWER, CONTEXT or QUESTION section in the prompt")
        score = 1 + math.floor(4 * share + 0.5)
        return _verdict(request, score, f"{share:.0%} {what}")

    return _named(respond, "stub-lexical-support")
