"""The stub judge's rules for ``rag-judge synth``'s three requests: write a question from seed
passages, grade a passage for a query (0-3), answer a query without documents.

Deterministic and free, they let CI run synth end to end; every filter finds items to keep and
items to reject among them. The rules, in short (docs/synth.md has them in full):

- question: a *pick* of a sentence (one with a number or a capitalised term, when there is
  one) and a *form*, both drawn from the prompt's variant number (by SHA-256, so the same on
  every machine). Forms: "about" the sentence's key phrase (short, kept by the filters), "blank"
  (the sentence with its key phrase blanked out: it quotes the answer) and "words" (the
  sentence's content words listed: a closed-book answer recovers it). The answer is the
  sentence(s); an unanswerable question asks for a "policy" of the key phrase somewhere the
  passage never names; a conversational item's follow-up asks about the next sentence;
- grade: the share of the query's content words found in the passage, 0-3 by ``GRADE_AT``;
- closed book: the stub knows nothing, so it answers only a query that names at least
  ``CLOSED_BOOK_WORDS`` content words, with those words, as if the query stated its answer.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Literal

from rag_judge.llm.base import CompletionRequest
from rag_judge.llm.sections import parse_sections
from rag_judge.text import split_claims

__all__ = [
    "CLOSED_BOOK_WORDS",
    "GRADE_AT",
    "asks_synth",
    "closed_book_stub",
    "content_words",
    "grade_stub",
    "question_stub",
    "synth_stub",
]

SynthRequest = Literal["question", "grade", "closed_book"]

# A share of the query's content words found in the passage of at least this is that grade.
GRADE_AT = ((0.8, 3), (0.5, 2), (0.2, 1))
CLOSED_BOOK_WORDS = 5  # content words a query names for the stub to "know" its answer
_TARGETS = ("Mars", "the year 2300", "Antarctica", "the deep sea")  # where nothing is said

_WORD = re.compile(r"[^\W_]+")  # a blank "___" is no word
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*%?")
_CAPITALISED = re.compile(r"\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")
_HEAD = re.compile(r"Question kind: (\w+)\. Variant: (-?\d+)\.")
# The stub judge's stopwords, and the words its own questions are built of: neither says
# what a question is about.
_STOPWORD_TEXT = (
    "a an and are as at be been but by do does did for from had has have he her his i if in "
    "into is it its me my no not of on or our she so than that the their them then there "
    "these they this to was we were what when where which who whom why will with you your "
    "about how can more say known fill fills blank blanks related links compare value values"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def content_words(text: str) -> list[str]:
    """The words of ``text``, case-folded, in order, without stopwords."""
    return [w for w in _WORD.findall(text.casefold()) if w not in _STOPWORDS]


def _prompt(request: CompletionRequest) -> str:
    return "\n".join(m.content for m in request.messages)


def asks_synth(request: CompletionRequest) -> SynthRequest | None:
    """Which synth request ``request`` is, by its JSON schema's keys, or without a schema by
    the sections shown (PASSAGE 1; QUERY and PASSAGE; QUERY alone); None for any other."""
    if request.json_schema is not None:
        keys = set(request.json_schema.get("properties") or {})
        if "follow_up" in keys:
            return "question"
        if "grade" in keys:
            return "grade"
        return "closed_book" if keys == {"answer"} else None
    sections = parse_sections(_prompt(request))
    if "PASSAGE 1" in sections:
        return "question"
    if "QUERY" in sections:
        return "grade" if "PASSAGE" in sections else "closed_book"
    return None


def synth_stub(request: CompletionRequest) -> str:
    """The stub's reply to a synth request (``asks_synth`` says which)."""
    kind = asks_synth(request)
    if kind == "grade":
        return grade_stub(request)
    if kind == "closed_book":
        return closed_book_stub(request)
    return question_stub(request)


def grade_stub(request: CompletionRequest) -> str:
    """``{"reason", "grade"}``: the share of the QUERY's content words in the PASSAGE."""
    sections = parse_sections(_prompt(request))
    words = content_words(sections.get("QUERY", ""))
    found = set(content_words(sections.get("PASSAGE", "")))
    share = sum(w in found for w in words) / len(words) if words else 0.0
    grade = next((g for at, g in GRADE_AT if share >= at), 0)
    reason = f"{share:.0%} of the query's content words appear in the passage"
    return json.dumps({"reason": reason, "grade": grade})


def closed_book_stub(request: CompletionRequest) -> str:
    """``{"answer"}``: the QUERY's content words when it names ``CLOSED_BOOK_WORDS`` or more,
    else null."""
    words = content_words(parse_sections(_prompt(request)).get("QUERY", ""))
    answer = " ".join(words) if len(set(words)) >= CLOSED_BOOK_WORDS else None
    return json.dumps({"answer": answer}, ensure_ascii=False)


def _draw(variant: int, what: str, n: int) -> int:
    """A number in [0, n) from the variant: the same on every machine and in every process."""
    digest = hashlib.sha256(f"{what}:{variant}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % n


def _capitalised(sentence: str) -> str | None:
    """The first run of capitalised words after the sentence's first word (which is
    capitalised anyway)."""
    rest = sentence.split(maxsplit=1)[1:]
    found = _CAPITALISED.search(rest[0]) if rest else None
    return found.group() if found else None


def _key(sentence: str) -> str:
    """The sentence's key phrase: its first number, else its first run of capitalised words
    after the first word, else its longest content word."""
    number = _NUMBER.search(sentence)
    if number:
        return number.group()
    caps = _capitalised(sentence)
    if caps:
        return caps
    words = content_words(sentence)
    return max(words, key=len) if words else sentence.strip(" .!?")


def _pick(passage: str, variant: int, what: str) -> tuple[int, list[str]]:
    """A sentence's index among the passage's sentences: one with a number or a capitalised
    term after its first word, when there is one."""
    sentences = split_claims(passage) or [passage.strip()]
    keyed = [i for i, s in enumerate(sentences) if _NUMBER.search(s) or _capitalised(s)]
    choices = keyed or list(range(len(sentences)))
    return choices[_draw(variant, what, len(choices))], sentences


def _blanked(sentence: str, key: str) -> str:
    return sentence.rstrip(" .!?").replace(key, "___", 1)


def _listed(words: list[str]) -> str:
    return f"{', '.join(words[:-1])} and {words[-1]}"


def _question(kind: str, sentences: list[str], keys: list[str], form: int) -> str:
    """A question in one of three forms (about, blank, words) over one or two sentences."""
    words = sorted(set(content_words(" ".join(sentences))))[:6]
    if form == 2 and len(words) >= 2:
        return f"How are {_listed(words)} related?"
    if form == 1:
        blanks = "; ".join(_blanked(s, k) for s, k in zip(sentences, keys, strict=True))
        what = "values fill the blanks" if len(keys) > 1 else "value fills the blank"
        return f"Which {what}: {blanks}?"
    if kind == "comparison":
        return f"How does {keys[0]} compare with {keys[1]}?"
    if kind == "multi_hop":
        return f"What links {keys[0]} and {keys[1]}?"
    return f"What is known about {keys[0]}?"


def question_stub(request: CompletionRequest) -> str:
    """``{"question", "answer", "follow_up"}`` from the PASSAGE sections, the kind and the
    variant the prompt states (the module says how)."""
    prompt = _prompt(request)
    # The kind and variant are the template's, in the user message before any data section,
    # so that a passage cannot restate them.
    user = next((m.content for m in request.messages if m.role == "user"), "")
    head = _HEAD.search(user.split("<<<BEGIN", 1)[0])
    kind, variant = (head.group(1), int(head.group(2))) if head else ("factual", 0)
    sections = parse_sections(prompt)
    passages = [sections[n] for n in ("PASSAGE 1", "PASSAGE 2") if n in sections]
    picked = [_pick(p, variant, f"pick {i}") for i, p in enumerate(passages)]
    sentences = [all_[i] for i, all_ in picked]
    keys = [_key(s) for s in sentences]
    reply: dict[str, object] = {"follow_up": None}
    if kind == "unanswerable":
        known = set(content_words(" ".join(passages)))
        start = _draw(variant, "target", len(_TARGETS))
        order = _TARGETS[start:] + _TARGETS[:start]
        target = next((t for t in order if not set(content_words(t)) & known), order[0])
        reply |= {"question": f"What is the {keys[0]} policy for {target}?", "answer": None}
        return json.dumps(reply, ensure_ascii=False)
    if kind in ("multi_hop", "comparison") and len(sentences) < 2:
        sentences, keys = sentences * 2, keys * 2
    if kind not in ("multi_hop", "comparison"):
        sentences, keys = sentences[:1], keys[:1]
    form = _draw(variant, "form", 3)
    reply |= {"question": _question(kind, sentences, keys, form), "answer": " ".join(sentences)}
    if kind == "conversational":
        at, all_ = picked[0]
        after = all_[(at + 1) % len(all_)]
        key = _key(after)
        question = f"And what about {key}?" if key != keys[0] else "Can you say more about that?"
        reply["follow_up"] = {"question": question, "answer": after}
    return json.dumps(reply, ensure_ascii=False)
