"""Framework targets (docs/frameworks.md): real LangChain and LlamaIndex objects built here,
called as targets, their retrievals captured through the frameworks' own hooks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from rag_judge import Pipeline, load_config
from rag_judge.data.frameworks import langchain_target, llamaindex_target
from rag_judge.data.sample import Sample
from rag_judge.data.target import filled_sample, resolve_target, run_target_sync
from rag_judge.errors import ConfigError
from tests import REPO

TEXTS = {
    "d1": "The Team plan costs 12 dollars per user per month.",
    "d2": "Annual billing gives a 20 percent discount.",
    "d3": "The API returns HTTP 429 when the rate limit is exceeded.",
    "d4": "Files are kept for 30 days in the trash before deletion.",
    "d5": "Single sign-on is available on the Enterprise plan.",
    "d6": "Two-factor authentication can be enforced by admins.",
}
QUESTIONS = [
    "How much is the Team plan?",
    "What happens at the rate limit?",
    "How long are deleted files kept?",
    "Who can enforce two-factor authentication?",
    "Is there a discount for annual billing?",
    "Which plan has single sign-on?",
]


@pytest.fixture(scope="module")
def store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents([Document(id=i, page_content=t) for i, t in TEXTS.items()])
    return store


class ScoredRetriever(BaseRetriever):
    """A user's retriever that writes each document's similarity into its metadata."""

    store: InMemoryVectorStore
    k: int = 3

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits = self.store.similarity_search_with_score(query, k=self.k)
        return [
            Document(id=d.id, page_content=d.page_content, metadata={"score": s}) for d, s in hits
        ]


class FusionRetriever(BaseRetriever):
    """A retriever that calls another one inside it: one retrieval, not two."""

    inner: BaseRetriever

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        docs = self.inner.invoke(query, config={"callbacks": run_manager.get_child()})
        return list(reversed(docs))


def echo_model(prompt: PromptValue) -> AIMessage:
    """A stand-in chat model: the prompt's question line, so answers name their question."""
    return AIMessage(content="re: " + prompt.to_string().rsplit("Question: ", 1)[1])


PROMPT = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")


def lcel(retriever: Runnable[str, list[Document]], model: Runnable[Any, Any]) -> Runnable:  # type: ignore[type-arg]
    setup: Any = {
        "context": retriever | (lambda docs: "\n".join(d.page_content for d in docs)),
        "question": RunnablePassthrough(),
    }
    return setup | PROMPT | model | StrOutputParser()  # type: ignore[no-any-return]


def as_contexts(docs: list[Document]) -> list[dict[str, Any]]:
    """What the retriever returned, written out field by field."""
    return [{"id": d.id, "text": d.page_content, "score": d.metadata.get("score")} for d in docs]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_lcel_chain_captures_the_retrievers_ranking(
    store: InMemoryVectorStore, asynchronous: bool
) -> None:
    retriever = store.as_retriever(search_kwargs={"k": 3})
    chain = lcel(retriever, FakeListChatModel(responses=["twelve dollars"]))
    target = langchain_target(chain, asynchronous=asynchronous)
    question = QUESTIONS[0]
    out = target(question) if not asynchronous else asyncio.run(target(question))
    direct = retriever.invoke(question)
    assert len(direct) == 3 and all(d.id in TEXTS for d in direct)
    assert out == {"answer": "twelve dollars", "contexts": as_contexts(direct)}


def test_scores_from_metadata_and_concurrent_async_calls_do_not_mix(
    store: InMemoryVectorStore,
) -> None:
    retriever = ScoredRetriever(store=store)
    target = resolve_target_of(lcel(retriever, RunnableLambda(echo_model)))
    samples = [Sample(id=f"q{i}", question=q) for i, q in enumerate(QUESTIONS * 4)]
    run = run_target_sync(target, samples, concurrency=8)
    assert run.errors == [None] * len(samples)
    for sample in run.samples:
        assert sample.question is not None and sample.answer == "re: " + sample.question
        direct = as_contexts(retriever.invoke(sample.question))
        assert [c.model_dump(exclude={"relevance"}) for c in sample.contexts] == direct
        scores = [c["score"] for c in direct]
        assert scores == sorted(scores, reverse=True) and len(set(scores)) > 1


def resolve_target_of(chain: Runnable) -> Any:  # type: ignore[type-arg]
    target = langchain_target(chain)
    assert asyncio.iscoroutinefunction(target)  # run_target awaits it: ainvoke on the loop
    return target


def test_a_chain_that_retrieves_twice_gives_two_steps(store: InMemoryVectorStore) -> None:
    first = ScoredRetriever(store=store, k=2)
    second = ScoredRetriever(store=store, k=3)
    rewrite = RunnableLambda(lambda docs: docs[0].page_content)  # query by the top hit's text

    def answer(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"answer": AIMessage(content=f"{len(inputs['again'])} more"), "context": []}

    chain: Any = (
        {"docs": first, "question": RunnablePassthrough()}
        | RunnablePassthrough.assign(again=lambda x: (rewrite | second).invoke(x["docs"]))
        | RunnableLambda(answer)
    )
    question = QUESTIONS[1]
    out = asyncio.run(langchain_target(chain)(question))
    requery = first.invoke(question)[0].page_content
    assert out == {
        "answer": "3 more",
        "steps": [
            {"query": question, "contexts": as_contexts(first.invoke(question))},
            {"query": requery, "contexts": as_contexts(second.invoke(requery))},
        ],
    }
    sample = filled_sample(Sample(id="s", question=question, relevance={"d3": 1}), out)
    assert sample.turns is not None and len(sample.turns[0].steps) == 2
    assert sample.turns[0].relevance == {"d3": 1}  # the sample's gold grades each step


def test_a_retrieval_inside_a_retriever_is_one_step(store: InMemoryVectorStore) -> None:
    fusion = FusionRetriever(inner=ScoredRetriever(store=store))
    target = langchain_target(fusion | (lambda docs: {"output": docs[0].page_content}))
    out = asyncio.run(target(QUESTIONS[2]))
    assert out["contexts"] == as_contexts(fusion.invoke(QUESTIONS[2]))
    assert out["answer"] == out["contexts"][0]["text"]


def test_input_key_and_answers_of_each_shape(store: InMemoryVectorStore) -> None:
    retriever = ScoredRetriever(store=store, k=1)
    pick = RunnableLambda(lambda x: x["input"])
    dict_chain = pick | retriever | (lambda d: {"answer": AIMessage(content=d[0].page_content)})
    out = langchain_target(dict_chain, input_key="input", asynchronous=False)(QUESTIONS[3])
    assert out["contexts"] == as_contexts(retriever.invoke(QUESTIONS[3]))
    assert out["answer"] == out["contexts"][0]["text"]  # the AIMessage's content
    bad = langchain_target(RunnableLambda(lambda q: {"text": q}))
    run = run_target_sync(bad, [Sample(id="s", question="q")])
    assert run.errors == [
        "ValueError: the runnable returned a dict with keys ['text']; expected an 'answer' or "
        "'output' key"
    ]


def test_config_spec_factory_and_errors(tmp_path: Path) -> None:
    module = tmp_path / "app.py"
    module.write_text(
        "from langchain_core.runnables import RunnableLambda\n"
        "def make():\n    return RunnableLambda(lambda q: 'hi ' + q)\n"
        "chain = make()\nnumber = 3\ndef broken():\n    raise OSError('no index')\n",
        encoding="utf-8",
    )
    for attr in ("chain", "make"):
        target = resolve_target(f"langchain:app.py:{attr}", base_dir=tmp_path)
        assert asyncio.run(target("you")) == {"answer": "hi you", "contexts": []}
    with pytest.raises(ConfigError, match="int is not a LangChain Runnable nor a factory"):
        resolve_target(f"langchain:{module}:number")
    with pytest.raises(ConfigError, match="the factory raised OSError: no index"):
        resolve_target(f"langchain:{module}:broken")
    with pytest.raises(ConfigError, match="the factory returned a RunnableLambda, not a Llama"):
        resolve_target(f"llamaindex:{module}:make")
    with pytest.raises(ConfigError, match="has no attribute 'nope'"):
        resolve_target(f"langchain:{module}:nope")


def test_the_langchain_example_ranks_and_answers_as_the_toy_rag() -> None:
    """examples/langchain_rag.py, the worked example of docs/frameworks.md, is the toy RAG
    system written as an LCEL chain: same rankings, scores and answers on every question."""
    chain = resolve_target("langchain:examples/langchain_rag.py:chain", base_dir=REPO)
    toy = resolve_target("examples/toy_rag.py:answer", base_dir=REPO)
    rows = [json.loads(line) for line in (REPO / "configs/data/demo.jsonl").open()]
    for row in rows:
        assert asyncio.run(chain(row["question"])) == toy(row["question"])


def test_pipeline_run_on_a_langchain_target_from_a_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config next to its files: the `.py` of `langchain:app.py:chain` is found there."""
    (tmp_path / "app.py").write_text(
        "from langchain_core.documents import Document\n"
        "from langchain_core.runnables import RunnableLambda\n"
        "from langchain_core.retrievers import BaseRetriever\n"
        "class Fixed(BaseRetriever):\n"
        "    def _get_relevant_documents(self, query, *, run_manager):\n"
        "        return [Document(id=i, page_content=i) for i in ('d2', 'd1', 'd3')]\n"
        "chain = Fixed() | RunnableLambda(lambda docs: docs[0].page_content)\n",
        encoding="utf-8",
    )
    rows = [{"id": "a", "question": "q a", "relevance": {"d1": 1}}]
    rows.append({"id": "b", "question": "q b", "relevance": {"d2": 1, "d3": 1}})
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "exp.yaml").write_text(
        "dataset: data.jsonl\ntarget: langchain:app.py:chain\n"
        "evaluators:\n  - type: retrieval\n    metrics: [mrr, precision@3]\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(REPO)  # not the config's folder: the file is found next to the config
    config = load_config(tmp_path / "exp.yaml")
    assert config.target == f"langchain:{tmp_path / 'app.py'}:chain"
    monkeypatch.chdir(tmp_path)
    report = Pipeline(config).run().report
    assert report.summary["mrr"].mean == pytest.approx((1 / 2 + 1) / 2)
    assert report.summary["precision@3"].mean == pytest.approx((1 / 3 + 2 / 3) / 2)


# --- LlamaIndex ---------------------------------------------------------------------------


@pytest.fixture
def llama_settings() -> Iterator[None]:
    """MockLLM (it answers with its prompt) and MockEmbedding, restored afterwards."""
    from llama_index.core import Settings
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    saved = dict(vars(Settings))
    Settings.llm = MockLLM()
    Settings.embed_model = MockEmbedding(embed_dim=8)
    yield
    for key, value in saved.items():
        setattr(Settings, key, value)


def llama_index() -> Any:
    from llama_index.core import Document as LlamaDocument
    from llama_index.core import VectorStoreIndex

    docs = [LlamaDocument(text=t, id_=i) for i, t in TEXTS.items()]
    return VectorStoreIndex.from_documents(docs)


def node_contexts(nodes: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": n.node.node_id,
            "text": n.node.get_content(),
            "score": n.score,
            "doc_id": n.node.ref_doc_id,
            "start": n.node.start_char_idx,
            "end": n.node.end_char_idx,
        }
        for n in nodes
    ]


@pytest.mark.usefixtures("llama_settings")
def test_llamaindex_query_engine_sync_and_async() -> None:
    engine = llama_index().as_query_engine(similarity_top_k=3)
    direct = node_contexts(engine.retriever.retrieve(QUESTIONS[0]))
    assert [c["doc_id"] for c in direct] != [] and direct[0]["start"] == 0
    sync = llamaindex_target(engine, asynchronous=False)(QUESTIONS[0])
    awaited = asyncio.run(llamaindex_target(engine)(QUESTIONS[0]))
    for out in (sync, awaited):
        assert out["contexts"] == direct
        assert QUESTIONS[0] in out["answer"]  # MockLLM answers with its prompt
    # Outside a target call the handlers record nothing: a plain query still works.
    assert QUESTIONS[0] in str(engine.query(QUESTIONS[0]))


@pytest.mark.usefixtures("llama_settings")
def test_llamaindex_concurrent_queries_keep_their_own_nodes(tmp_path: Path) -> None:
    (tmp_path / "engine.py").write_text(
        "from llama_index.core import Document, VectorStoreIndex\n"
        "def make():\n"
        f"    docs = [Document(text=t, id_=i) for i, t in {TEXTS!r}.items()]\n"
        "    return VectorStoreIndex.from_documents(docs).as_query_engine(similarity_top_k=2)\n",
        encoding="utf-8",
    )
    target = resolve_target("llamaindex:engine.py:make", base_dir=tmp_path)
    samples = [Sample(id=f"q{i}", question=q) for i, q in enumerate(QUESTIONS * 3)]
    run = run_target_sync(target, samples, concurrency=6)
    assert run.errors == [None] * len(samples)
    for sample in run.samples:
        assert sample.turns is None and len(sample.contexts) == 2  # one retrieval each
        assert sample.question is not None and sample.question in (sample.answer or "")


@pytest.mark.usefixtures("llama_settings")
def test_llamaindex_fusion_retriever_is_one_step() -> None:
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import QueryFusionRetriever

    inner = llama_index().as_retriever(similarity_top_k=2)
    fusion = QueryFusionRetriever([inner], num_queries=1, use_async=False, similarity_top_k=2)
    engine = RetrieverQueryEngine.from_args(fusion)
    out = asyncio.run(llamaindex_target(engine)(QUESTIONS[4]))
    direct = node_contexts(fusion.retrieve(QUESTIONS[4]))
    assert out["contexts"] == direct and "steps" not in out


def test_the_docs_worked_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/frameworks.md's config, next to configs/demo.yaml as the page says (the demo data
    and the examples linked into a copy of the layout), gives the numbers the page quotes,
    which are the toy RAG target's."""
    page = (REPO / "docs" / "frameworks.md").read_text(encoding="utf-8")
    block = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "data").symlink_to(REPO / "configs" / "data")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (tmp_path / "configs" / "frameworks.yaml").write_text(block, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    summaries = {}
    for target in ("", "../examples/toy_rag.py:answer"):
        override = {"target": target} if target else None
        config = load_config(tmp_path / "configs" / "frameworks.yaml", override)
        summary = Pipeline(config).run().report.summary
        summaries[target] = {m: summary[m].mean for m in ("hit_rate@3", "mrr", "ndcg@3")}
        assert all(summary[m].n == 34 for m in summaries[target])
    assert summaries[""] == summaries["../examples/toy_rag.py:answer"]
    quoted = "hit_rate@3 {hit_rate@3:.3f}, mrr {mrr:.3f},\nndcg@3 {ndcg@3:.3f}"
    assert quoted.format_map(summaries[""]) in page
