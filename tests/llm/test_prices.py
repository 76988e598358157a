"""The price table (llm/prices.py): loading, errors that name file:line: field, lookup, cached
prompt tokens from a server's reply, the cost arithmetic by hand, and the dry run and the report
priced from a table (docs/prices.md's worked example included)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rag_judge import ExperimentConfig, JudgeEvaluator, Pipeline, Sample
from rag_judge.errors import ConfigError
from rag_judge.llm import ClientConfig, make_engine
from rag_judge.llm.base import ChatMessage, CompletionRequest
from rag_judge.llm.prices import (
    PRICES_ENV,
    SHIPPED_TABLE,
    Price,
    cost,
    load_table,
    price_for,
)
from rag_judge.llm.providers.openai import OpenAIClient, _completion, cached_tokens
from rag_judge.report.markdown import render_markdown
from rag_judge.report.model import Usage
from tests import REPO
from tests.fake_openai_server import FakeOpenAIServer, Reply

KEY_ENV = "RAG_JUDGE_TEST_OPENAI_KEY"
STUB_TABLE = """\
version: 1
date: "2025-01-01"
source: a test
providers:
  stub:
    stub-fixed-3: {input: 2.0, cached_input: 0.5, output: 8.0, batch: 0.5}
"""


@pytest.fixture(autouse=True)
def _no_env_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PRICES_ENV, raising=False)


def stub_table(tmp_path: Path) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(STUB_TABLE)
    return path


def req(text: str = "Grade this.", max_tokens: int = 100) -> CompletionRequest:
    messages = (ChatMessage("system", "You are a judge."), ChatMessage("user", text))
    return CompletionRequest(messages=messages, max_tokens=max_tokens)


# ---- the table -------------------------------------------------------------------------


def test_the_shipped_table_has_its_date_source_and_current_openai_models() -> None:
    table = load_table(SHIPPED_TABLE)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", table.date)
    assert "openai.com" in table.source
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o4-mini"):
        price = table.price_for("openai", model)
        assert price is not None and price.batch == 0.5, model
        assert price.cached_input is not None and price.cached_input < price.input
    assert table.price_for("openai", "gpt-4o-mini") == Price(
        input=0.15, cached_input=0.075, output=0.60, batch=0.5
    )


def test_lookup_takes_a_dated_snapshot_at_its_familys_price_and_knows_no_other() -> None:
    assert price_for("openai", "gpt-4.1-mini-2025-04-14") == price_for("openai", "gpt-4.1-mini")
    assert price_for("openai", "gpt-4.1-mini") is not None
    assert price_for("openai", "no-such-model") is None
    assert price_for("stub", "gpt-4o") is None  # another provider's model of that name


def test_a_table_error_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(STUB_TABLE.replace("output: 8.0", "output: -8.0") + "    other: {input: 1}\n")
    with pytest.raises(ConfigError) as caught:
        load_table(path)
    message = str(caught.value)
    assert f"{path}:6: providers.stub.stub-fixed-3.output: " in message
    assert f"{path}:7: providers.stub.other.output: Field required" in message
    path.write_text("version: 1\nsource: x\nproviders: {}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:1: date: Field required"):
        load_table(path)
    with pytest.raises(ConfigError, match="no such price table file"):
        load_table(tmp_path / "missing.yaml")


# ---- cached tokens from a reply --------------------------------------------------------


def test_cached_prompt_tokens_are_read_from_prompt_tokens_details() -> None:
    assert cached_tokens({"prompt_tokens_details": {"cached_tokens": 1024}}) == 1024
    for usage in ({}, {"prompt_tokens_details": None}, {"prompt_tokens_details": {}}, None):
        assert cached_tokens(usage) == 0
    body = {
        "model": "gpt-4o-mini",
        "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 2000,
            "completion_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": 1536},
        },
    }
    done = _completion(body, None, OpenAIClient("gpt-4o-mini", api_key_env=KEY_ENV))
    assert not isinstance(done, Exception)
    assert (done.prompt_tokens, done.cached_prompt_tokens, done.completion_tokens) == (
        2000,
        1536,
        10,
    )


def test_a_server_reply_with_cached_tokens_is_priced_at_the_cached_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    body = {
        "id": "c1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": 3000,
            "completion_tokens": 100,
            "total_tokens": 3100,
            "prompt_tokens_details": {"cached_tokens": 2048},
        },
    }
    table = tmp_path / "openai.yaml"  # a user's table prices a server at any base_url
    table.write_text(STUB_TABLE.replace("stub:", "openai:").replace("stub-fixed-3", "gpt-4o-mini"))
    with FakeOpenAIServer([Reply(raw=json.dumps(body).encode())]) as srv:
        config = ClientConfig(
            provider="openai",
            model="gpt-4o-mini",
            base_url=srv.base_url,
            api_key_env=KEY_ENV,
            price_table=str(table),
        )
        with make_engine(config) as engine:
            [done] = engine.run_sync([req()])
            usage = engine.usage
    assert not isinstance(done, Exception) and done.cached_prompt_tokens == 2048
    assert (usage.prompt_tokens, usage.cached_prompt_tokens) == (3000, 2048)
    # (952 x $2 + 2048 x $0.5 + 100 x $8) / 1M, by hand
    assert usage.cost == pytest.approx((1904 + 1024 + 800) / 1e6)
    assert usage.model_dump()["cached_prompt_tokens"] == 2048


# ---- the arithmetic --------------------------------------------------------------------


def test_cost_by_hand() -> None:
    price = Price(input=2.0, cached_input=0.5, output=8.0, batch=0.5)
    tokens = {"prompt_tokens": 1000, "cached_prompt_tokens": 400, "completion_tokens": 200}
    assert cost(tokens, price) == pytest.approx(0.003)  # 600x2 + 400x0.5 + 200x8 = 3000 / 1M
    assert cost(tokens, price, batch=True) == pytest.approx(0.0015)
    usage = Usage(prompt_tokens=1000, cached_prompt_tokens=400, completion_tokens=200)
    assert cost(usage, price) == cost(tokens, price)
    no_cache = Price(input=2.0, output=8.0)  # a cached token at the input price
    assert cost(tokens, no_cache) == pytest.approx(0.0036)
    assert cost({"prompt_tokens": 10, "cached_prompt_tokens": 99}, no_cache) == 20 / 1e6


def test_per_1k_client_prices_give_the_numbers_they_always_gave() -> None:
    price = Price.per_1k(0.5, 2.0)
    assert cost({"prompt_tokens": 7, "completion_tokens": 3}, price) == (7 * 0.5 + 3 * 2.0) / 1000
    assert Price.per_1k(None, 2.0).input == 0.0


def test_a_zero_cached_count_stays_out_of_the_usage_dump() -> None:
    assert "cached_prompt_tokens" not in Usage(prompt_tokens=3).model_dump()
    total = Usage(cached_prompt_tokens=2) + Usage(cached_prompt_tokens=3)
    assert total.cached_prompt_tokens == 5


# ---- the engine, the dry run and the report -------------------------------------------


def _stub(tmp_path: Path, **kw: object) -> ClientConfig:
    return ClientConfig(provider="stub", stub="fixed", price_table=str(stub_table(tmp_path)), **kw)  # type: ignore[arg-type]


def test_the_engine_and_its_dry_run_price_from_the_table(tmp_path: Path) -> None:
    with make_engine(_stub(tmp_path)) as engine:
        assert engine.price == Price(input=2.0, cached_input=0.5, output=8.0, batch=0.5)
        dry = engine.dry_run([req(max_tokens=100)])
        bound = (dry["prompt_tokens_estimate"] * 2.0 + 100 * 8.0) / 1e6
        assert dry["cost_estimate"] == pytest.approx(bound)
        engine.batch_priced = True  # the batch path's price: half
        assert engine.dry_run([req(max_tokens=100)])["cost_estimate"] == pytest.approx(bound / 2)
        engine.batch_priced = False
        engine.run_sync([req()])
        u = engine.usage
        assert u.cost == pytest.approx((u.prompt_tokens * 2.0 + u.completion_tokens * 8.0) / 1e6)


def test_explicit_client_prices_win_over_the_table(tmp_path: Path) -> None:
    with make_engine(_stub(tmp_path, prompt_price_per_1k=1.0)) as engine:
        assert engine.price == Price.per_1k(1.0, None)


def test_the_env_var_names_the_table_and_the_shipped_one_skips_other_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with make_engine(ClientConfig(provider="stub", stub="fixed")) as engine:
        assert engine.price is None and engine.usage.cost is None
    monkeypatch.setenv(PRICES_ENV, str(stub_table(tmp_path)))
    with make_engine(ClientConfig(provider="stub", stub="fixed")) as engine:
        assert engine.price is not None and engine.price.input == 2.0
    monkeypatch.delenv(PRICES_ENV)
    monkeypatch.setenv(KEY_ENV, "sk-test")
    local = ClientConfig(
        provider="openai", model="gpt-4o", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV
    )
    official = local.model_copy(update={"base_url": None})
    with make_engine(local) as engine:
        assert engine.price is None  # a local server named gpt-4o is not billed as OpenAI's
    with make_engine(official) as engine:
        assert engine.price == price_for("openai", "gpt-4o")


def test_a_bad_table_fails_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such price table") as caught:
        make_engine(ClientConfig(provider="stub", price_table=str(tmp_path / "none.yaml")))
    assert caught.value.loc == ("price_table",)


SAMPLES = [
    Sample(
        id=f"s{i}",
        question=f"What is item {i}?",
        answer=f"Item {i} is a thing.",
        contexts=[{"id": "d1", "text": f"Item {i} is a thing."}],
    )
    for i in range(4)
]


def test_the_report_shows_cost_per_evaluator_and_per_1000_samples(tmp_path: Path) -> None:
    client = {"provider": "stub", "stub": "fixed", "price_table": str(stub_table(tmp_path))}
    config = ExperimentConfig(
        evaluators=[JudgeEvaluator(rubrics=["faithfulness"], cache=None, client=client)]
    )
    report = Pipeline(config).run(SAMPLES).report
    step = report.usage_by_evaluator["evaluators[0] (judge)"]
    assert step == report.usage and step.requests == 4
    expected = (step.prompt_tokens * 2.0 + step.completion_tokens * 8.0) / 1e6
    assert step.cost == pytest.approx(expected)
    text = render_markdown(report)
    row = (
        f"| evaluators[0] (judge) | 4 | {step.prompt_tokens} | 0 | {step.completion_tokens} "
        f"| ${expected:,.4f} | ${expected * 1000 / 4:,.4f} |"
    )
    assert "## Cost" in text and row in text
    assert "usage_by_evaluator" in json.loads(report.to_json())


def test_an_unpriced_report_shows_no_cost_and_dumps_as_before() -> None:
    config = ExperimentConfig(evaluators=[JudgeEvaluator(rubrics=["faithfulness"], cache=None)])
    report = Pipeline(config).run(SAMPLES).report
    assert report.usage.cost is None and report.usage_by_evaluator == {}
    assert "## Cost" not in render_markdown(report)
    data = json.loads(report.to_json())
    assert "usage_by_evaluator" not in data and "cached_prompt_tokens" not in data["usage"]


# ---- docs/prices.md ---------------------------------------------------------------------


def test_the_worked_example_in_docs_prices_md_holds() -> None:
    """Every row of the doc's cost table is recomputed from the shipped table."""
    text = (REPO / "docs" / "prices.md").read_text()
    rows = re.findall(
        r"^\| (\S+) \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \| (yes|no) \| \$([\d.]+) \|$",
        text,
        flags=re.M,
    )
    assert len(rows) >= 4
    for model, prompt, cached, completion, batch, dollars in rows:
        price = price_for("openai", model)
        assert price is not None, model
        tokens = {
            "prompt_tokens": int(prompt.replace(",", "")),
            "cached_prompt_tokens": int(cached.replace(",", "")),
            "completion_tokens": int(completion.replace(",", "")),
        }
        assert f"{cost(tokens, price, batch=batch == 'yes'):.4f}" == dollars, model
    assert load_table(SHIPPED_TABLE).date in text
