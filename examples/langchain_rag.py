"""A LangChain RAG chain over the demo corpus, to show a framework target
(docs/frameworks.md). rag-judge calls the chain unchanged and reads the retrieved documents
from LangChain's callbacks. Use it as

    target: langchain:../examples/langchain_rag.py:chain   # in a config next to configs/demo.yaml

or from Python::

    from rag_judge.data.frameworks import langchain_target
    target = langchain_target(make_chain())

The chain is LCEL: retriever | prompt | model | parser. The retriever ranks the demo's chunks
by the share of the question's keywords each holds, a score it writes into the documents'
metadata. The model is a deterministic stand-in for a chat model, so the example runs offline:
it answers with the sentence of the first context that shares the most words with the
question. Swap in any chat model (``ChatOpenAI(...)``) and the chain is a real one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

CORPUS = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.jsonl"
# The toy RAG system's stopwords (examples/toy_rag.py): the two rank alike.
_STOPWORD_TEXT = (
    "a an and are at be by can do does for from how i if in is it my of on or the to what when "
    "where which who why will with you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
PROMPT = ChatPromptTemplate.from_template(
    "Answer from the context.\n\nContext:\n{context}\n\nQuestion: {question}"
)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS}


def load_documents() -> list[Document]:
    """Every chunk of the demo dataset as a Document whose id is the chunk's doc id."""
    seen: dict[str, Document] = {}
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        for ctx in json.loads(line).get("contexts", []) if line.strip() else []:
            seen.setdefault(ctx["id"], Document(id=ctx["id"], page_content=ctx["text"]))
    return list(seen.values())


class KeywordRetriever(BaseRetriever):
    """The ``k`` documents sharing the most keywords with the query; ties go to the shorter
    text, then the smaller id. ``metadata["score"]`` is the share of the query's keywords."""

    documents: list[Document]
    k: int = 4

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        asked = _words(query)
        ranked = []
        for doc in self.documents:
            shared = len(asked & _words(doc.page_content))
            if shared:
                ranked.append((-shared, len(doc.page_content), str(doc.id), doc))
        ranked.sort(key=lambda row: row[:3])
        return [
            Document(id=d.id, page_content=d.page_content, metadata={"score": -neg / len(asked)})
            for neg, _, _, d in ranked[: self.k]
        ]


def _format(documents: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in documents)


def _extractive_model(prompt: PromptValue) -> AIMessage:
    """The stand-in chat model: the first context's sentence closest to the question."""
    text = prompt.to_string()
    context, _, question = text.partition("\n\nQuestion: ")
    first = context.partition("Context:\n")[2].split("\n\n")[0]
    if not first.strip():
        return AIMessage(content="I don't know.")
    asked = _words(question)
    sentences = re.split(r"(?<=[.!?])\s+", first)
    return AIMessage(content=max(sentences, key=lambda s: len(asked & _words(s))))


def make_chain(k: int = 4) -> Runnable[str, str]:
    """The RAG chain: question in, answer out."""
    retriever = KeywordRetriever(documents=load_documents(), k=k)
    setup: Any = {"context": retriever | _format, "question": RunnablePassthrough()}
    return setup | PROMPT | RunnableLambda(_extractive_model) | StrOutputParser()  # type: ignore[no-any-return]


chain = make_chain()
