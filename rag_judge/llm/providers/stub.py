"""A deterministic client for CI and demos: replies come from a plain function of the request.

``StubClient(responder)`` calls ``responder(request)`` and wraps a returned string into a
``Completion`` (a responder may also return a ``Completion``, or raise ``LLMError`` to script a
failure). Ready-made responders: ``fixed(score)``, ``scripted(replies)`` and
``lexical_support()``, a rule-based judge that reads the prompt's delimited sections
(``rag_judge.llm.sections``). ``fixed`` and ``lexical_support`` answer rubric and pairwise
requests alike: a request that asks for a winner (``is_pairwise``) gets a pairwise verdict
(``always_tie``, ``pairwise_lexical``), any other a 1-5 score. The same request gives the same
reply on every machine and in every process: nothing here depends on ``hash()``
randomisation, the clock or a random generator.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence

from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.llm.providers.stub_arguments import arguments_stub, asks_arguments
from rag_judge.llm.providers.stub_synth import asks_synth, synth_stub
from rag_judge.llm.ratelimit import Sleeper, estimate_tokens
from rag_judge.llm.sections import parse_sections
from rag_judge.text import DEFAULT_CITATION_PATTERN, claim_sentences, is_abstention

__all__ = [
    "Responder",
    "StubClient",
    "always_tie",
    "entails",
    "fixed",
    "grounding_stub",
    "is_pairwise",
    "lexical_support",
    "pairwise_lexical",
    "parse_sections",
    "scripted",
    "support",
]

Responder = Callable[[CompletionRequest], str | Completion]

_WORD = re.compile(r"\w+")
_STOPWORD_TEXT = (
    "a an and are as at be been but by do does did for from had has have he her his i if in into "
    "is it its me my no not of on or our she so than that the their them then there these they "
    "this to was we were what when where which who whom why will with you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_ASCII_STOPWORDS = frozenset(w.encode() for w in _STOPWORDS)


class StubClient:
    """An ``LLMClient`` whose replies come from ``responder`` (default: ``lexical_support()``).

    ``model`` names the responder in cache keys (default: the responder's ``name`` attribute).
    ``delay`` seconds are awaited per call through ``sleep`` (for tests of slow servers).
    ``calls`` counts the calls made.
    """

    provider = "stub"
    is_stub = True  # offline: its numbers measure nothing, and reports say so
    scores_labels = False
    supports_logprobs = False
    cancellable = True
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


def _prompt(request: CompletionRequest) -> str:
    return "\n".join(m.content for m in request.messages)


def is_pairwise(request: CompletionRequest) -> bool:
    """Whether ``request`` asks which of two answers wins: its JSON schema has a ``winner``,
    or, without a schema, its prompt shows an ANSWER 1 and an ANSWER 2 section."""
    if request.json_schema is not None:
        return "winner" in (request.json_schema.get("properties") or {})
    sections = parse_sections(_prompt(request))
    return "ANSWER 1" in sections and "ANSWER 2" in sections


def _labelled(request: CompletionRequest, label: str, key: str, reason: str) -> str | Completion:
    """JSON ``{"reason", key: label}``; for a scoring request (``score_labels``), the label and
    a one-hot distribution over the labels, as the local client answers."""
    labels = request.score_labels
    if labels and label in labels:
        probs = {other: float(other == label) for other in labels}
        return Completion(choices=[label], completion_tokens=1, score_probs=probs)
    value: int | str = int(label) if key == "score" else label
    return json.dumps({"reason": reason, key: value})


def _verdict(request: CompletionRequest, score: int, reason: str) -> str | Completion:
    return _labelled(request, str(score), "score", reason)


def _preference(request: CompletionRequest, winner: str, reason: str) -> str | Completion:
    return _labelled(request, winner, "winner", reason)


def fixed(score: int = 3, reason: str = "fixed stub verdict") -> Responder:
    """Always the same verdict: ``score``, or a tie for a pairwise request."""

    def respond(request: CompletionRequest) -> str | Completion:
        if is_pairwise(request):
            return always_tie(request)
        if _grounding_key(request):
            return grounding_stub(request)
        if asks_arguments(request):
            return arguments_stub(request)
        if asks_synth(request):
            return synth_stub(request)
        return _verdict(request, score, reason)

    return _named(respond, f"stub-fixed-{score}")


def always_tie(request: CompletionRequest) -> str | Completion:
    """The pairwise verdict of ``fixed``: always a tie."""
    return _preference(request, "tie", "fixed stub verdict")


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


# Citation markers ("[1]", "[d3]") are where a statement comes from, not what it says.
_MARKERS = re.compile(DEFAULT_CITATION_PATTERN)


def _unmarked(text: str) -> str:
    if "[" in text:  # a marker needs its bracket: most texts have none, and skip the scan
        text = _MARKERS.sub(" ", text)
    return text


def _words(text: str) -> list[str]:
    return _WORD.findall(_unmarked(text).casefold())


def _content_words(text: str) -> list[str]:
    return [w for w in _words(text) if w not in _STOPWORDS]


def support(answer: str, evidence: Iterable[str]) -> float:
    """Share of the answer's content words (stopwords and citation markers dropped) found in
    the evidence, in [0, 1]; 0 for an answer with no content words."""
    # One scan of all the evidence: NUL is neither a word character nor part of a citation
    # marker, so no word or marker spans two texts, and stopwords found do not matter (the
    # answer's words have none).
    joined = "\0".join(evidence)
    if answer.isascii() and joined.isascii():
        # In ASCII, \w is [A-Za-z0-9_] and casefold is lower: with every other byte a space,
        # the words are what split() gives, and a word is in the evidence where " word " is
        # (a search at C speed instead of a set of words).
        said = [w for w in _ascii_words(answer).split() if w not in _ASCII_STOPWORDS]
        if not said:
            return 0.0
        padded = b" " + _ascii_words(joined) + b" "
        return sum(b" " + w + b" " in padded for w in said) / len(said)
    words = _content_words(answer)
    if not words:
        return 0.0
    found = set(_words(joined))
    return sum(w in found for w in words) / len(words)


def _ascii_words(text: str) -> bytes:
    """An ASCII text's words, lower-cased and apart: every other byte a space."""
    return _unmarked(text).encode().translate(_ASCII_WORDS)


# Each byte to itself if it is an ASCII word character (lower-cased), else to a space.
_ASCII_WORDS = bytes(
    c if chr(c).isascii() and (chr(c).isalnum() or chr(c) == "_") else 32 for c in range(256)
).lower()


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
      punishes repetition;
    * a conversation (``TURN n ASSISTANT`` sections, no ANSWER): the share of the brief's
      content words (GOAL, ROLE, TOPIC sections), else of the user turns', that the assistant's
      replies use (the conversation rubrics).

    A pairwise request is answered by ``pairwise_lexical``, a claim or claim-verdict request
    (grounding) by ``grounding_stub``, a synth request by ``stub_synth.synth_stub``.
    Deterministic and free, it checks the plumbing; it is not a judgment of meaning.
    """
    pairwise = pairwise_lexical()

    def respond(request: CompletionRequest) -> str | Completion:
        if is_pairwise(request):
            return pairwise(request)
        if _grounding_key(request):
            return grounding_stub(request)
        if asks_arguments(request):
            return arguments_stub(request)
        if asks_synth(request):
            return synth_stub(request)
        sections = parse_sections(_prompt(request))
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
        elif replies := [b for n, b in sections.items() if _REPLY.fullmatch(n)]:
            brief = [b for n, b in sections.items() if _BRIEF.fullmatch(n)]
            asked = brief or [b for n, b in sections.items() if _USER.fullmatch(n)]
            share = support(" ".join(asked), replies)
            what = "of the brief's or the user's content words are taken up by the replies"
        else:
            return _verdict(request, 1, "no ANSWER, CONTEXT or QUESTION section in the prompt")
        score = 1 + math.floor(4 * share + 0.5)
        return _verdict(request, score, f"{share:.0%} {what}")

    return _named(respond, "stub-lexical-support")


# The sections of a conversation (rag_judge.judge.conversation) and of its brief.
_REPLY = re.compile(r"TURN \d+ ASSISTANT")
_USER = re.compile(r"TURN \d+ USER")
_BRIEF = re.compile(r"GOAL|ROLE|TOPIC \d+")


def pairwise_lexical() -> Responder:
    """A deterministic pairwise judge: each answer's word-overlap share (``support``) with the
    references and its own contexts, or else with the question; the higher share wins, equal
    shares tie. Symmetric in the positions, so its verdicts never flip with the order."""

    def respond(request: CompletionRequest) -> str | Completion:
        sections = parse_sections(_prompt(request))
        shares = []
        for n in ("1", "2"):
            answer = sections.get(f"ANSWER {n}", "")
            evidence = [
                b
                for k, b in sections.items()
                if k.startswith("REFERENCE") or k.startswith(f"ANSWER {n} CONTEXT")
            ]
            if evidence:
                shares.append(support(answer, evidence))
            else:
                shares.append(support(sections.get("QUESTION", ""), [answer]))
        winner = "tie" if math.isclose(*shares) else ("1" if shares[0] > shares[1] else "2")
        reason = f"word overlap {shares[0]:.0%} (answer 1) vs {shares[1]:.0%} (answer 2)"
        return _preference(request, winner, reason)

    return _named(respond, "stub-pairwise-lexical")


def _grounding_key(request: CompletionRequest) -> str | None:
    """``"claims"``, ``"verdicts"`` or ``"statements"`` for the grounding evaluator's
    requests (by the JSON schema's key, or without a schema by the sections shown), else
    None."""
    if request.json_schema is not None:
        keys = request.json_schema.get("properties") or {}
        return next((k for k in ("claims", "verdicts", "statements") if k in keys), None)
    sections = parse_sections(_prompt(request))
    if "CLAIM 1" in sections:
        return "verdicts"
    if any(_STATEMENT.fullmatch(name) for name in sections):
        return "statements"
    return None


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_STATEMENT = re.compile(r"STATEMENT (\d+) CITES ([\d ]+)")
SUPPORT_SHARE = 0.75  # of a claim's content words a supporting context must contain
CONTRADICT_SHARE = 0.5  # ... a context must contain to contradict the claim's numbers


def grounding_stub(request: CompletionRequest) -> str:
    """The stub's grounding judge, by rule. Claims: the answer's sentences
    (``rag_judge.text.claim_sentences``), none when ``is_abstention`` says it declines. A claim's
    verdict, from word overlap with each context: *supported* by every context that holds at
    least ``SUPPORT_SHARE`` of its content words and every number it states; else
    *contradicted* by every context that holds at least ``CONTRADICT_SHARE`` of its words and
    numbers but none of the claim's; else *unsupported*. ALCE's citation questions by the same
    rule over a set of contexts (``entails``): whether the cited contexts together entail the
    statement, which entail it alone, and without which the others still do."""
    sections = parse_sections(_prompt(request))
    key = _grounding_key(request)
    if key == "claims":
        answer = sections.get("ANSWER", "")
        abstains = is_abstention(answer)
        claims = [] if abstains else claim_sentences(answer)
        return json.dumps({"abstention": abstains, "claims": claims}, ensure_ascii=False)
    contexts = {int(n.split()[1]): b for n, b in sections.items() if n.startswith("CONTEXT ")}
    if key == "statements":
        return json.dumps({"statements": _statement_verdicts(sections, contexts)})
    numbered = sorted((int(n.split()[1]), b) for n, b in sections.items() if n.startswith("CLAIM "))
    return json.dumps({"verdicts": [_claim_verdict(i, c, contexts) for i, c in numbered]})


def entails(claim: str, texts: Iterable[str]) -> bool:
    """The stub's entailment rule over a set of texts: together they hold at least
    ``SUPPORT_SHARE`` of the claim's content words and every number it states."""
    texts = list(texts)
    found = {n for text in texts for n in _NUMBER.findall(text)}
    share = support(claim, texts) if texts else 0.0
    return share >= SUPPORT_SHARE and set(_NUMBER.findall(claim)) <= found


def _statement_verdicts(
    sections: dict[str, str], contexts: dict[int, str]
) -> list[dict[str, object]]:
    out: list[tuple[int, dict[str, object]]] = []
    for name, text in sections.items():
        found = _STATEMENT.fullmatch(name)
        if found is None:
            continue
        cited = [int(r) for r in found.group(2).split()]
        joint = entails(text, (contexts.get(r, "") for r in cited))
        alone = [r for r in cited if entails(text, [contexts.get(r, "")])]
        without = []
        if len(cited) > 1:
            rest = {r: [contexts.get(o, "") for o in cited if o != r] for r in cited}
            without = [r for r in cited if entails(text, rest[r])]
        reason = "the cited contexts " + ("entail" if joint else "do not entail") + " it"
        n = int(found.group(1))
        verdict = {"statement": n, "entailed": joint, "alone": alone, "without": without}
        out.append((n, verdict | {"reason": reason}))
    return [verdict for _, verdict in sorted(out, key=lambda item: item[0])]


def _claim_verdict(number: int, claim: str, contexts: dict[int, str]) -> dict[str, object]:
    numbers = set(_NUMBER.findall(claim))
    shares = {r: support(claim, [text]) for r, text in sorted(contexts.items())}
    found = {r: set(_NUMBER.findall(text)) for r, text in contexts.items()}
    backing = [r for r, share in shares.items() if share >= SUPPORT_SHARE and numbers <= found[r]]
    if backing:
        best = max(shares[r] for r in backing)
        reason = f"{best:.0%} of the claim's content words appear in context {backing[0]}"
        return {"claim": number, "verdict": "supported", "contexts": backing, "reason": reason}
    against = [
        r
        for r, share in shares.items()
        if numbers and share >= CONTRADICT_SHARE and found[r] and not numbers & found[r]
    ]
    if against:
        stated = ", ".join(sorted(numbers))
        reason = f"context {against[0]} covers the claim but states other figures than {stated}"
        return {"claim": number, "verdict": "contradicted", "contexts": against, "reason": reason}
    best = max(shares.values(), default=0.0)
    reason = f"at most {best:.0%} of the claim's content words appear in any context"
    return {"claim": number, "verdict": "unsupported", "contexts": [], "reason": reason}
