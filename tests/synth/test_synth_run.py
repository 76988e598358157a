"""``rag-judge synth`` end to end with the stub judge on the shipped corpus: the exact shipped
test set, byte-stable across runs with one seed, each item's provenance and graded pool, the
manifest, the dry run, config errors, and a run killed mid-way that resumes without asking
any call twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rag_judge.cli import main
from rag_judge.data.readers import load_dataset
from rag_judge.errors import ConfigError
from rag_judge.llm.base import ChatMessage, CompletionRequest
from rag_judge.llm.providers.stub_synth import synth_stub
from rag_judge.synth.plan import kind_counts
from rag_judge.synth.settings import SynthConfig, load_synth_config
from tests import REPO
from tests.cli.test_interrupt import cached_rows, wait_for
from tests.fake_openai_server import FakeOpenAIServer, Reply, chat, hang

CORPUS = REPO / "configs" / "data" / "corpus"
CONFIG = REPO / "configs" / "synth.yaml"
SHIPPED = REPO / "configs" / "data" / "synth.jsonl"


def _synth(out: Path, *extra: str) -> int:
    return main(["synth", str(CORPUS), "--config", str(CONFIG), "--out", str(out), "--quiet",
                 *extra])  # fmt: skip


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "dataset.jsonl"
    assert _synth(out) == 0
    return out


def test_the_shipped_test_set_is_what_synth_writes_byte_for_byte(
    written: Path, tmp_path: Path
) -> None:
    assert written.read_bytes() == SHIPPED.read_bytes()
    again = tmp_path / "again.jsonl"
    assert _synth(again) == 0
    assert again.read_bytes() == written.read_bytes()
    first = json.loads(written.with_name("synth.json").read_text())
    second = json.loads(again.with_name("synth.json").read_text())
    # Everything but what the cache saved is the same.
    first.pop("usage")
    second.pop("usage")
    assert first == second


def test_each_item_carries_its_kind_its_graded_pool_and_its_provenance(written: Path) -> None:
    samples = load_dataset(written).samples
    assert [s.id for s in samples] == [f"synth-{i:04d}" for i in range(1, 17)]
    kinds = Counter(s.metadata["synth"]["kind"] for s in samples)
    # Each kind's share of 16, as the config's mix gives it.
    assert kinds == kind_counts(16, load_synth_config(CONFIG).kinds)
    assert kinds == {"factual": 7, "multi_hop": 3, "comparison": 2, "conversational": 2,
                     "unanswerable": 2}  # fmt: skip
    for s in samples:
        prov = s.metadata["synth"]
        assert set(prov) == {"kind", "seeds", "request_seed", "pool_depth", "dense_depth",
                             "judge", "prompts", "filters", "plan_index"}  # fmt: skip
        assert prov["judge"] == "stub/stub-lexical-support" and prov["pool_depth"] == 10
        assert all(f["passed"] for f in prov["filters"])  # what was written passed them all
        turns = s.conversation_turns()
        assert len(turns) == (2 if prov["kind"] == "conversational" else 1)
        for turn in turns:
            assert turn.qrels, s.id
            # A pool is its seeds and up to 10 BM25 neighbours, each a span of a document.
            assert len(turn.qrels) <= len(prov["seeds"]) + 10
            assert all(q.relevance in (0, 1, 2, 3) and q.end > q.start for q in turn.qrels)
        seeds = {(q.doc_id, q.start, q.end): q.relevance for q in turns[0].qrels}
        if prov["kind"] == "unanswerable":
            assert s.answerable is False and not turns[0].references
            assert max(q.relevance for q in turns[0].qrels) <= 1  # the pool does not answer it
        else:
            assert s.answerable is True and turns[0].references
            for seed in prov["seeds"]:  # every seed chunk graded at least 2
                doc, span = seed.rsplit("#", 1)
                start, end = map(int, span.split("-"))
                assert seeds[(doc, start, end)] >= 2


def test_the_first_item_exactly(written: Path) -> None:
    first = json.loads(written.read_text().splitlines()[0])
    shipped = json.loads(SHIPPED.read_text().splitlines()[0])
    assert first == shipped
    assert first["metadata"]["synth"]["kind"] in ("factual", "multi_hop", "comparison",
                                                  "conversational", "unanswerable")  # fmt: skip


def test_the_manifest_counts_kinds_filters_grades_and_cost(written: Path) -> None:
    m = json.loads(written.with_name("synth.json").read_text())
    assert m["questions"] == {"asked": 16, "planned": 48, "written": 16}
    assert m["corpus"]["documents"] == 8 and m["corpus"]["chunks"] > 8
    assert sum(k["planned"] for k in m["kinds"].values()) == 48
    assert sum(k["written"] for k in m["kinds"].values()) == 16
    for name in ("duplicate", "leak", "closed_book", "seed_needed", "unanswerable"):
        f = m["filters"][name]
        assert 0 < f["rejected"] < f["checked"]  # each filter kept and rejected something
        assert f["rate"] == round(f["rejected"] / f["checked"], 4)
    graded = sum(v for k, v in m["grades"].items() if k != "ungraded")
    assert graded == pytest.approx(m["pool"]["mean_size"] * m["pool"]["questions"])
    assert m["usage"]["requests"] + m["usage"]["cache_hits"] >= 48
    assert m["judge"] == "stub/stub-lexical-support"


def test_a_dry_run_prices_each_stage_and_calls_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "never.sqlite"
    config = tmp_path / "s.yaml"
    config.write_text(f"questions: 4\ncache: {cache}\n")
    out = tmp_path / "d.jsonl"
    assert main(["synth", str(CORPUS), "--config", str(config), "--out", str(out),
                 "--dry-run"]) == 0  # fmt: skip
    table = capsys.readouterr().out
    assert "questions" in table and "grades (estimate)" in table and "closed book" in table
    rows = {line.split("  ")[0].strip(): line.split() for line in table.splitlines()}
    assert rows["questions"][1] == "8"  # 4 questions x oversample 2
    assert not out.exists() and not cache.exists()


def test_config_errors_name_the_file_line_and_key(tmp_path: Path) -> None:
    config = tmp_path / "s.yaml"
    config.write_text("questions: 4\nkinds: {factual: 1, trivia: 1}\n")
    with pytest.raises(ConfigError, match=r"s.yaml:2: kinds.trivia"):
        load_synth_config(config)
    config.write_text("questions: 4\nchunking: {size: 100, overlap: 100}\n")
    with pytest.raises(ConfigError, match=r"s.yaml:2: chunking.overlap"):
        load_synth_config(config)
    config.write_text("questions: 4\npool_dept: 3\n")
    with pytest.raises(ConfigError, match=r"s.yaml:2: pool_dept"):
        load_synth_config(config)
    with pytest.raises(ValueError, match="add up to 0"):
        SynthConfig(kinds={"factual": 0})


def _stub_reply(body: dict[str, Any]) -> str:
    """What the stub judge answers to a request that came over HTTP."""
    messages = tuple(ChatMessage(role=m["role"], content=m["content"]) for m in body["messages"])
    return synth_stub(CompletionRequest(messages=messages))


@pytest.mark.slow
def test_a_killed_run_resumes_without_asking_a_finished_call_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_JUDGE_TEST_KEY", "sk-test")
    answered: list[str] = []
    lock, halfway, released = threading.Lock(), threading.Event(), threading.Event()
    stop_after = 60

    def script(body: dict[str, Any]) -> Reply:
        with lock:
            if not released.is_set() and len(answered) >= stop_after:
                halfway.set()
                return hang(120)
            answered.append(json.dumps(body["messages"], sort_keys=True))
        return chat(_stub_reply(body))

    cache = tmp_path / "judge.sqlite"
    with FakeOpenAIServer(script) as srv:
        config = tmp_path / "s.yaml"
        config.write_text(
            f"questions: 6\nseed: 3\ncache: {cache}\n"
            f"client: {{provider: openai, model: m, base_url: '{srv.base_url}', "
            "api_key_env: RAG_JUDGE_TEST_KEY, concurrency: 1, max_attempts: 1, timeout: 300}\n"
        )
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        out = tmp_path / "d.jsonl"
        cmd = [sys.executable, "-m", "rag_judge.cli", "synth", str(CORPUS), "--config",
               str(config), "--out", str(out), "--quiet"]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            assert halfway.wait(120), "the run never reached its 60th call"
            # Replies reach the cache through a background writer: kill once the 60 answered
            # calls are in it, as a finished call is (what a kill can lose is a reply in flight).
            wait_for(lambda: cached_rows(cache) >= stop_after, "the answered calls in the cache")
            proc.send_signal(signal.SIGKILL)  # no clean-up: a killed process
            proc.wait(30)
        finally:
            proc.kill()
        assert not out.exists()
        first = list(answered)
        released.set()
        assert main(["synth", str(CORPUS), "--config", str(config), "--out", str(out),
                     "--quiet"]) == 0  # fmt: skip
        second = answered[len(first) :]
        # Nothing answered before the kill was asked again, and the rerun finished the set.
        assert len(first) == stop_after
        assert not set(first) & set(second)
        assert len(set(second)) == len(second)
        assert out.exists()
    # The same run uninterrupted asks exactly the calls the two runs asked together.
    fresh = tmp_path / "fresh.sqlite"
    whole: list[str] = []

    def count(body: dict[str, Any]) -> Reply:
        whole.append(json.dumps(body["messages"], sort_keys=True))
        return chat(_stub_reply(body))

    with FakeOpenAIServer(count) as srv:
        config.write_text(
            f"questions: 6\nseed: 3\ncache: {fresh}\n"
            f"client: {{provider: openai, model: m, base_url: '{srv.base_url}', "
            "api_key_env: RAG_JUDGE_TEST_KEY, concurrency: 1, max_attempts: 1, timeout: 300}\n"
        )
        again = tmp_path / "again.jsonl"
        assert main(["synth", str(CORPUS), "--config", str(config), "--out", str(again),
                     "--quiet"]) == 0  # fmt: skip
    assert sorted(whole) == sorted(first + second)
    assert again.read_bytes() == out.read_bytes()


def test_the_demo_evaluates_a_system_on_the_graded_pool() -> None:
    from rag_judge import Pipeline

    report = Pipeline.from_yaml(REPO / "configs" / "synth_eval.yaml").run().report
    s = report.summary
    # 14 single-turn items (2 of them unanswerable) and 2 conversations of two turns.
    assert (s["ndcg@5"].n, s["turn.ndcg@5"].n) == (14, 18)
    assert s["ndcg@5"].mean == pytest.approx(0.6647, abs=1e-4)
    assert s["judged@5"].mean == pytest.approx(0.9143, abs=1e-4)  # the pool covers the top 5
    # The paragraphs the system retrieves are not the chunks synth graded: span labels.
    assert "overlap>=1c" in report.signatures["ndcg@5"].render()


def test_a_bad_override_without_a_config_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "d.jsonl"
    assert main(["synth", str(CORPUS), "--out", str(out), "--questions", "0"]) == 2
    assert "--questions: Input should be greater than or equal to 1" in capsys.readouterr().err


def test_a_one_chunk_corpus_asks_only_one_chunk_questions(tmp_path: Path) -> None:
    from rag_judge.synth.generate import synthesise

    corpus = tmp_path / "one.md"
    corpus.write_text("The Team plan costs 12 dollars per user per month in 2026.")
    config = SynthConfig(questions=4, cache=None, kinds={"multi_hop": 1, "comparison": 1})
    run = synthesise(corpus, config)
    assert {item.planned.kind for item in run.items} == {"factual"}
    assert all(len(item.planned.seeds) == 1 for item in run.items)
