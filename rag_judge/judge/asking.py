"""Asking a judge: send every request, read each reply, re-ask the unreadable ones.

Rubric judging and pairwise judging share this loop. All first requests go through one
``engine.run`` (one scheduler, one rate limit, one cache); a reply that cannot be read is
re-asked up to ``reask`` times, the previous exchange followed by the parse error quoted back
(``reask_message``), all re-asks of a round again in one ``engine.run``. A call that failed for
good (after the engine's retries) is not re-asked. Every round runs in one event loop, on one
engine opened and closed once (``ask_sync``), so the client's connections and the cache live
exactly as long as the judging. A jury asks several engines at once
(``ask_panel_chunks_sync``): their rounds run concurrently in that one loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rag_judge._async import run_sync
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import Completion, CompletionRequest, LLMError, Usage
from rag_judge.llm.engine import JudgeEngine

__all__ = [
    "Outcome",
    "ask_all",
    "ask_chunks_sync",
    "ask_panel_chunks_sync",
    "ask_sync",
    "reask_message",
]

R = TypeVar("R")


def reask_message(problem: str, shape: str) -> str:
    """The follow-up user message of a re-ask: what was wrong, and the JSON ``shape`` wanted
    (e.g. ``{"reason": "<one or two sentences>", "score": <integer 1-5>}``)."""
    return (
        f"Your previous reply could not be used: {problem}. Reply again with only a JSON object "
        f"of the form {shape} and nothing else."
    )


@dataclass
class Outcome(Generic[R]):
    """One judgment's exchange: the last request sent, every reply, and what came of it (the
    reading, an ``Unscored`` with its reason, or the call's ``LLMError``)."""

    request: CompletionRequest
    replies: list[Completion] = field(default_factory=list)
    result: R | Unscored | LLMError | None = None

    @property
    def reply(self) -> Completion | None:
        """The last reply (None when no reply came): what the result was read from, with what
        the server did (``finish_reason``, ``structured_output``, the choices it sent)."""
        return self.replies[-1] if self.replies else None

    @property
    def raw(self) -> str:
        """The last reply, verbatim ("" when no reply came)."""
        return self.replies[-1].text if self.replies else ""

    @property
    def attempts(self) -> int:
        """Requests made for this judgment: one per reply (1 + re-asks), plus, when the last
        call failed for good, the attempts the engine made for it (its transport retries), so
        that a judgment whose reason says "gave up after 4 attempts" has ``attempts`` 4."""
        if isinstance(self.result, LLMError):
            return len(self.replies) + self.result.attempts
        return len(self.replies)

    @property
    def cached(self) -> bool:
        """Whether every reply came from the cache."""
        return bool(self.replies) and all(c.cached for c in self.replies)


async def ask_all(
    engine: JudgeEngine,
    requests: Sequence[CompletionRequest],
    parse: Callable[[Completion], R | Unscored] | Sequence[Callable[[Completion], R | Unscored]],
    *,
    shape: str,
    reask: int = 1,
    label: str = "judge",
) -> list[Outcome[R]]:
    """One outcome per request, in order. ``parse`` reads a reply (never raises), or one
    ``parse`` per request reads that request's replies (a reply checked against what its
    request showed); an ``Unscored`` reading is re-asked up to ``reask`` times, quoting its
    reason and ``shape``. ``label`` names the calls in the progress display (``LABEL
    re-asked`` for re-asks)."""
    outcomes: list[Outcome[R]] = [Outcome(r) for r in requests]
    each = [parse] * len(outcomes) if callable(parse) else parse
    parsers = {id(o): p for o, p in zip(outcomes, each, strict=True)}
    todo = outcomes
    for round_ in range(reask + 1):
        if round_:
            todo = [o for o in todo if isinstance(o.result, Unscored) and o.replies]
            for o in todo:
                assert isinstance(o.result, Unscored)
                message = reask_message(o.result.reason, shape)
                o.request = o.request.followed_by(o.raw, message)
        if not todo:
            break
        name = f"{label} re-asked" if round_ else label
        replies = await engine.run([o.request for o in todo], label=name)
        for o, reply in zip(todo, replies, strict=True):
            if isinstance(reply, LLMError):
                o.result = reply
            else:
                o.replies.append(reply)
                o.result = parsers[id(o)](reply)
    return outcomes


def ask_sync(
    open_engine: Callable[[], JudgeEngine],
    requests: Sequence[CompletionRequest],
    parse: Callable[[Completion], R | Unscored],
    *,
    shape: str,
    reask: int = 1,
    label: str = "judge",
) -> tuple[list[Outcome[R]], Usage]:
    """``ask_all`` from synchronous code, in one event loop (``run_sync``) over one engine:
    ``open_engine()`` is called inside the loop and the engine closed when done (its client's
    connections and the cache it opened). Returns the outcomes and the engine's usage."""

    outcomes: list[Outcome[R]] = []
    usage = ask_chunks_sync(
        open_engine, [requests], parse, outcomes.extend, shape=shape, reask=reask, label=label
    )
    return outcomes, usage


def ask_chunks_sync(
    open_engine: Callable[[], JudgeEngine],
    chunks: Iterable[Sequence[CompletionRequest]],
    parse: Callable[[Completion], R | Unscored],
    each: Callable[[list[Outcome[R]]], None],
    *,
    shape: str,
    reask: int = 1,
    label: str = "judge",
) -> Usage:
    """``ask_all`` over each chunk of requests in turn, in one event loop over one engine
    (one scheduler, one rate limit, one cache); ``each`` gets a chunk's outcomes as soon as
    they are in, so only one chunk's prompts and replies are alive at a time. ``chunks`` may
    be a generator that builds each chunk's requests when it is asked for. Returns the
    engine's usage."""
    return ask_panel_chunks_sync(
        [open_engine],
        ([requests] for requests in chunks),
        [parse],
        lambda outcomes: each(outcomes[0]),
        shape=shape,
        reask=reask,
        labels=[label],
    )


def ask_panel_chunks_sync(
    open_engines: Sequence[Callable[[], JudgeEngine]],
    chunks: Iterable[Sequence[Sequence[CompletionRequest]]],
    parses: Sequence[Callable[[Completion], R | Unscored]],
    each: Callable[[list[list[Outcome[R]]]], None],
    *,
    shape: str,
    reask: int = 1,
    labels: Sequence[str] | None = None,
) -> Usage:
    """``ask_chunks_sync`` for a panel of judges (a jury): each chunk holds one list of
    requests per engine, read by that engine's ``parses`` entry; every engine's ``ask_all``
    of a chunk runs concurrently in one event loop (each engine keeps its own scheduler and
    rate limit), and ``each`` gets the chunk's outcome lists, one per engine, in order.
    ``labels`` name each engine's calls in the progress display (default: ``judge``).
    The engines are opened inside the loop and closed when done. Returns their summed usage
    (its cost None unless every engine has prices)."""
    names = list(labels) if labels is not None else ["judge"] * len(open_engines)
    if not len(open_engines) == len(parses) == len(names):
        raise ValueError(
            f"{len(open_engines)} engines, {len(parses)} parsers and {len(names)} labels: "
            "give one of each per judge"
        )

    async def ask() -> Usage:
        async with contextlib.AsyncExitStack() as stack:
            engines = [await stack.enter_async_context(o()) for o in open_engines]
            for panel in chunks:
                if len(panel) != len(engines):
                    raise ValueError(f"{len(panel)} request lists for {len(engines)} engines")
                asked = [
                    ask_all(e, requests, p, shape=shape, reask=reask, label=name)
                    for e, requests, p, name in zip(engines, panel, parses, names, strict=True)
                ]
                each(list(await asyncio.gather(*asked)))
        usage = Usage()
        for engine in engines:
            usage += engine.usage
        # A cost is known only when every engine knows its own.
        unpriced = any(engine.usage.cost is None for engine in engines)
        return usage.model_copy(update={"cost": None}) if unpriced else usage

    return run_sync(ask())
