"""Framework targets: a LangChain Runnable or a LlamaIndex query engine called as a rag-judge
target, its retrieved documents captured through the framework's own hooks.

``target: langchain:module:runnable`` and ``target: llamaindex:module:query_engine`` name the
object as a plain target names a function (``module`` a dotted import path or a ``.py`` file).
The attribute is the object itself or a zero-argument factory, called once, that returns one.
From Python, :func:`langchain_target` and :func:`llamaindex_target` wrap an object.

Each call gets its own recorder: a LangChain callback handler passed in the call's config, or,
for LlamaIndex, one handler on the root dispatcher that reads the call's recorder from a
context variable. Concurrent calls therefore never mix their documents. docs/frameworks.md
says what is captured and how it becomes contexts or steps.
"""

from __future__ import annotations

import contextvars
import importlib
import threading
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any

from rag_judge.errors import ConfigError

__all__ = [
    "FRAMEWORKS",
    "FRAMEWORKS_INSTALL_HINT",
    "framework_target",
    "langchain_target",
    "llamaindex_target",
    "split_framework",
]

FRAMEWORKS = ("langchain", "llamaindex")
FRAMEWORKS_INSTALL_HINT = "pip install 'rag-judge[frameworks]'"
# Where a LangChain document may carry its retrieval score (rerankers write relevance_score).
_SCORE_KEYS = ("score", "relevance_score")

Output = dict[str, Any]


def split_framework(spec: str) -> tuple[str, str]:
    """``("langchain", "module:obj")`` for ``"langchain:module:obj"``; ``("", spec)`` for a
    spec that names no framework."""
    head, sep, rest = spec.partition(":")
    if sep and head in FRAMEWORKS:
        return head, rest
    return "", spec


def framework_target(framework: str, obj: Any, spec: str) -> Callable[[str], Awaitable[Output]]:
    """The target for ``obj``, which ``spec`` named; ConfigError when it is no such object
    or the framework is not installed."""
    try:
        if framework == "langchain":
            return langchain_target(obj)
        return llamaindex_target(obj)
    except (ImportError, TypeError) as exc:
        raise ConfigError(f"target {spec!r}: {exc}") from None
    except Exception as exc:  # a user's factory may raise anything
        what = f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"target {spec!r}: the factory raised {what}") from exc


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"{name} is not installed: {FRAMEWORKS_INSTALL_HINT}") from exc


def _instance(obj: Any, cls: type, what: str) -> Any:
    """``obj`` when it is a ``cls``; else what calling it with no arguments returns."""
    if isinstance(obj, cls):
        return obj
    if callable(obj):
        made = obj()
        if isinstance(made, cls):
            return made
        raise TypeError(f"the factory returned a {type(made).__name__}, not a {what}")
    raise TypeError(f"{type(obj).__name__} is not a {what} nor a factory of one")


class _Recorder:
    """What one call retrieved: each outermost retrieval in the order it started, with its
    query and its ranked contexts. Callbacks may come from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: dict[Hashable, tuple[str | None, list[dict[str, Any]] | None]] = {}
        self._nested: set[Hashable] = set()
        self.parents: dict[Hashable, Hashable] = {}

    def _inside_retrieval(self, key: Hashable) -> bool:
        parent = self.parents.get(key)
        while parent is not None:
            if parent in self._steps or parent in self._nested:
                return True
            parent = self.parents.get(parent)
        return False

    def start(self, key: Hashable, query: str | None) -> None:
        with self._lock:
            # A retrieval inside another (a fusion or multi-query retriever) is part of it.
            if self._inside_retrieval(key):
                self._nested.add(key)
            else:
                self._steps[key] = (query, None)

    def end(self, key: Hashable, contexts: list[dict[str, Any]]) -> None:
        with self._lock:
            if key in self._steps:
                self._steps[key] = (self._steps[key][0], contexts)

    def retrievals(self) -> list[dict[str, Any]]:
        """The finished retrievals as steps; one that failed has no ranking to score."""
        with self._lock:
            done = [(q, c) for q, c in self._steps.values() if c is not None]
        return [{"query": q, "contexts": c} for q, c in done]

    def output(self, answer: str, fallback: list[dict[str, Any]] | None = None) -> Output:
        """One retrieval gives contexts; several give steps (data/conversation.py)."""
        steps = self.retrievals()
        if len(steps) > 1:
            return {"answer": answer, "steps": steps}
        contexts = steps[0]["contexts"] if steps else fallback or []
        return {"answer": answer, "contexts": contexts}


# --- LangChain ---------------------------------------------------------------------------


def langchain_target(
    runnable: Any, *, input_key: str | None = None, asynchronous: bool = True
) -> Callable[[str], Any]:
    """A target that calls a LangChain Runnable (or a zero-argument factory of one) with the
    question, or with ``{input_key: question}``. Its retriever calls are captured by a callback
    handler; the answer is the output: a string, a message's text, or a dict's ``"answer"``
    or ``"output"``. The target is a coroutine function calling ``ainvoke``; with
    ``asynchronous=False`` it is a plain function calling ``invoke``."""
    runnables = _import("langchain_core.runnables")
    chain = _instance(runnable, runnables.Runnable, "LangChain Runnable")
    sync_handler, async_handler = _langchain_handlers()

    def payload(question: str) -> Any:
        return question if input_key is None else {input_key: question}

    if not asynchronous:

        def call(question: str) -> Output:
            rec = _Recorder()
            out = chain.invoke(payload(question), config={"callbacks": [sync_handler(rec)]})
            return rec.output(_langchain_answer(out))

        return call

    async def acall(question: str) -> Output:
        rec = _Recorder()
        out = await chain.ainvoke(payload(question), config={"callbacks": [async_handler(rec)]})
        return rec.output(_langchain_answer(out))

    return acall


def _langchain_handlers() -> tuple[Callable[[_Recorder], Any], Callable[[_Recorder], Any]]:
    """A sync and an async callback handler class, each recording into one recorder."""
    from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
    from langchain_core.documents import Document

    class Handler(BaseCallbackHandler):
        def __init__(self, rec: _Recorder) -> None:
            self.rec = rec

        def on_retriever_start(
            self, serialized: dict[str, Any], query: str, *, run_id: Any, **kwargs: Any
        ) -> None:
            if kwargs.get("parent_run_id") is not None:
                self.rec.parents[run_id] = kwargs["parent_run_id"]
            self.rec.start(run_id, query)

        def on_retriever_end(self, documents: Any, *, run_id: Any, **kwargs: Any) -> None:
            self.rec.end(run_id, [_langchain_context(d) for d in documents])

    class AsyncHandler(AsyncCallbackHandler):
        def __init__(self, rec: _Recorder) -> None:
            self.rec = rec

        async def on_retriever_start(
            self, serialized: dict[str, Any], query: str, *, run_id: Any, **kwargs: Any
        ) -> None:
            if kwargs.get("parent_run_id") is not None:
                self.rec.parents[run_id] = kwargs["parent_run_id"]
            self.rec.start(run_id, query)

        async def on_retriever_end(self, documents: Any, *, run_id: Any, **kwargs: Any) -> None:
            self.rec.end(run_id, [_langchain_context(d) for d in documents])

    def _langchain_context(doc: Document) -> dict[str, Any]:
        meta = doc.metadata or {}
        doc_id = doc.id if doc.id is not None else meta.get("id")
        score = next((meta[k] for k in _SCORE_KEYS if meta.get(k) is not None), None)
        return {
            "id": None if doc_id is None else str(doc_id),
            "text": doc.page_content,
            "score": score,
        }

    return Handler, AsyncHandler


def _langchain_answer(out: Any) -> str:
    if isinstance(out, str):
        return out
    if isinstance(out, Mapping):
        for key in ("answer", "output"):
            if key in out:
                return _langchain_answer(out[key])
        raise ValueError(
            f"the runnable returned a dict with keys {sorted(map(str, out))}; expected an "
            "'answer' or 'output' key"
        )
    content = getattr(out, "content", None)
    if isinstance(content, str):
        return content
    text = getattr(out, "text", None)  # a message whose content is a list of blocks
    text = text() if callable(text) else text
    if isinstance(text, str) and content is not None:
        return text
    raise ValueError(
        f"the runnable returned a {type(out).__name__}; expected a str, a message or a dict "
        "with 'answer' or 'output'"
    )


# --- LlamaIndex --------------------------------------------------------------------------

# The recorder of the LlamaIndex call running in this context (None outside one). Each call
# sets it in its own context, so concurrent calls (threads or tasks) see their own.
_CURRENT: contextvars.ContextVar[_Recorder | None] = contextvars.ContextVar(
    "rag_judge_llamaindex_call", default=None
)
_HOOKED = threading.Lock()
_hooked = False


def llamaindex_target(engine: Any, *, asynchronous: bool = True) -> Callable[[str], Any]:
    """A target that queries a LlamaIndex query engine (or a zero-argument factory of one).
    Its retrievals are captured from the instrumentation events (``RetrievalStartEvent`` and
    ``RetrievalEndEvent``), else from the response's ``source_nodes``; the answer is
    ``str(response)``. The target is a coroutine function calling ``aquery``; with
    ``asynchronous=False`` it is a plain function calling ``query``."""
    base = _import("llama_index.core.base.base_query_engine")
    query_engine = _instance(engine, base.BaseQueryEngine, "LlamaIndex query engine")
    _hook_llamaindex()

    if not asynchronous:

        def call(question: str) -> Output:
            rec = _Recorder()
            token = _CURRENT.set(rec)
            try:
                response = query_engine.query(question)
            finally:
                _CURRENT.reset(token)
            return _llamaindex_output(rec, response)

        return call

    async def acall(question: str) -> Output:
        rec = _Recorder()
        token = _CURRENT.set(rec)
        try:
            response = await query_engine.aquery(question)
        finally:
            _CURRENT.reset(token)
        return _llamaindex_output(rec, response)

    return acall


def _llamaindex_output(rec: _Recorder, response: Any) -> Output:
    nodes = getattr(response, "source_nodes", None) or []
    # A Response without text has response=None (str() would say "None"); a streaming
    # response has no such field, and str() joins its tokens.
    empty = getattr(response, "response", "") is None
    return rec.output("" if empty else str(response), [_node_context(n) for n in nodes])


def _node_context(scored: Any) -> dict[str, Any]:
    """A ``NodeWithScore`` as a context: the node's id, its source document's id, and its
    character span in that document when the node records a valid one."""
    node = scored.node
    context: dict[str, Any] = {
        "id": node.node_id,
        "text": node.get_content(),
        "score": scored.score,
    }
    if node.ref_doc_id is not None:
        context["doc_id"] = node.ref_doc_id
        start, end = node.start_char_idx, node.end_char_idx
        if start is not None and end is not None and 0 <= start < end:
            context["start"], context["end"] = start, end
    return context


def _hook_llamaindex() -> None:
    """Add rag-judge's event and span handlers to the root dispatcher, once per process.
    Outside a target call they do nothing."""
    global _hooked
    with _HOOKED:
        if _hooked:
            return
        from llama_index.core.instrumentation.event_handlers import BaseEventHandler
        from llama_index.core.instrumentation.events import BaseEvent
        from llama_index.core.instrumentation.events.retrieval import (
            RetrievalEndEvent,
            RetrievalStartEvent,
        )
        from llama_index.core.instrumentation.span_handlers import BaseSpanHandler

        class Events(BaseEventHandler):
            def handle(self, event: BaseEvent, **kwargs: Any) -> None:
                rec = _CURRENT.get()
                if rec is None:
                    return
                if isinstance(event, RetrievalStartEvent):
                    query = event.str_or_query_bundle
                    rec.start(event.span_id, query if isinstance(query, str) else query.query_str)
                elif isinstance(event, RetrievalEndEvent):
                    rec.end(event.span_id, [_node_context(n) for n in event.nodes])

        class Spans(BaseSpanHandler[Any]):
            # Only the parent links are kept (in the call's recorder): they tell a retrieval
            # nested in another. Nothing is stored here, so no span is left open.
            def new_span(
                self,
                id_: str,
                bound_args: Any,
                instance: Any = None,
                parent_span_id: str | None = None,
                tags: dict[str, Any] | None = None,
                **kwargs: Any,
            ) -> None:
                rec = _CURRENT.get()
                if rec is not None and parent_span_id is not None:
                    rec.parents[id_] = parent_span_id

            def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
                return None

            def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
                return None

        # The root dispatcher: every LlamaIndex module's events propagate to it.
        dispatcher = _import("llama_index.core.instrumentation").get_dispatcher()
        dispatcher.add_event_handler(Events())
        dispatcher.add_span_handler(Spans())
        _hooked = True
