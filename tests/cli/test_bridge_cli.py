"""``rag-judge bridge`` end to end, and ``compare``/``gate`` across a judge change: refused by
default (exit 2, naming the fields), compared through a bridge. The judges are fake-server
models that score each request from its prompt: ``judge-new`` gives the old score + 1 (at most
5), a known monotone map."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rag_judge.analysis.bridge import Bridge
from rag_judge.cli import main
from tests import REPO
from tests.fake_openai_server import FakeOpenAIServer

DEMO = REPO / "configs" / "data" / "demo.jsonl"


def old_score(body: dict[str, Any]) -> int:
    """A score from the prompt's length: deterministic, and spread over 1-5."""
    text = "\n".join(str(m.get("content")) for m in body["messages"])
    return 1 + (len(text) // 7) % 5


def judge(body: dict[str, Any]) -> str:
    score = old_score(body)
    if body["model"] == "judge-new":
        score = min(5, score + 1)
    return json.dumps({"reason": "scripted", "score": score})


def config(folder: Path, url: str, model: str, cache: str = "null", file: str = "") -> Path:
    path = folder / f"{file or model}.yaml"
    path.write_text(
        f"name: {model}\ndataset: {DEMO}\nevaluators:\n"
        "  - type: judge\n    rubrics: [faithfulness]\n"
        f"    cache: {cache}\n"
        f"    client: {{provider: openai, model: {model}, base_url: '{url}'}}\n"
    )
    return path


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")


@pytest.mark.usefixtures("api_key")
def test_run_run_bridge_compare_and_gate(tmp_path: Path, capsys) -> None:
    with FakeOpenAIServer(judge) as srv:
        old_cfg = config(tmp_path, srv.base_url, "judge-old")
        new_run = config(tmp_path, srv.base_url, "judge-new")
        # the same judge with a cache (not part of the judge's signature), for the rerun below
        new_cfg = config(tmp_path, srv.base_url, "judge-new", str(tmp_path / "c.db"), "bridge")
        old, new = tmp_path / "old", tmp_path / "new"
        assert main(["run", "--quiet", str(old_cfg), "--out", str(old)]) == 0
        assert main(["run", "--quiet", str(new_run), "--out", str(new)]) == 0
        capsys.readouterr()

        # refused by default: exit 2, the metric and each differing field with both values
        assert main(["compare", str(old), str(new)]) == 2
        err = capsys.readouterr().err
        assert "faithfulness: judge openai/judge-old -> openai/judge-new" in err
        assert "faithfulness_norm: judge openai/judge-old -> openai/judge-new" in err
        assert "--allow-judge-change" in err
        assert main(["gate", str(new), "--baseline", str(old)]) == 2
        assert "faithfulness: judge openai/judge-old -> openai/judge-new" in capsys.readouterr().err
        assert main(["compare", str(old), str(new), "--allow-judge-change"]) == 0
        assert "faithfulness*: the two reports computed it with different options" in (
            capsys.readouterr().out
        )

        # the bridge costs exactly its subset's calls: 10 samples x 1 rubric x 1 call
        before = srv.received
        assert main(["bridge", str(old), "--judge", str(new_cfg), "--n", "10"]) == 0
        assert srv.received - before == 10
        out = capsys.readouterr().out
        assert "wrote " + str(old / "bridge.json") in out
        bridge = Bridge.load(old / "bridge.json")
        assert bridge.usage.requests == 10 and len(bridge.ids) == 10
        assert set(bridge.rubrics) == {"faithfulness", "faithfulness_norm"}
        r = bridge.rubrics["faithfulness"]
        assert r.mapping == "isotonic"
        assert all(n == min(5, o + 1) for o, n in zip(r.old, r.new))  # the known map
        # a rerun is served by the new judge's cache: no call
        before = srv.received
        argv = ["bridge", str(old), "--judge", str(new_cfg), "--n", "10", "--out"]
        assert main([*argv, str(tmp_path / "again.json"), "--format", "json"]) == 0
        assert srv.received == before
        again = json.loads(capsys.readouterr().out)
        assert again["usage"]["requests"] == 0 and again["ids"] == bridge.ids

    # through the bridge: base translated to the new judge, the same data, so the truth is 0
    bridge_path = str(old / "bridge.json")
    argv = ["compare", str(old), str(new), "--bridge", bridge_path, "--format", "json"]
    assert main(argv) == 0
    metrics = json.loads(capsys.readouterr().out)["comparisons"][0]["metrics"]
    mc = metrics["faithfulness"]
    assert mc["bridged"].startswith("isotonic map, n=10 pairs")
    assert mc["ci_low"] <= 0.0 <= mc["ci_high"]
    assert main(["compare", str(old), str(new), "--bridge", bridge_path]) == 0
    assert "faithfulness*: base bridged to the new judge's scale (isotonic map" in (
        capsys.readouterr().out
    )
    gate = ["gate", str(new), "--baseline", str(old), "--bridge", bridge_path, "-v"]
    assert main([*gate, "--max-drop", "0.5"]) == 0
    assert "baseline bridged: isotonic map" in capsys.readouterr().out
    # a bridge whose old judge is not BASE's is an error, not a silent translation
    assert main(["compare", str(new), str(old), "--bridge", bridge_path]) == 2
    assert "the bridge's old judge is not" in capsys.readouterr().err


def picky(body: dict[str, Any]) -> str:
    """``judge``, except that the new judge cannot score the ``tone`` rubric (no JSON)."""
    text = "\n".join(str(m.get("content")) for m in body["messages"])
    if body["model"] == "judge-new" and "ZZTONEZZ" in text:
        return "no verdict here"
    return judge(body)


def two_rubrics(folder: Path, url: str, model: str) -> Path:
    path = folder / f"{model}-2.yaml"
    path.write_text(
        f"name: {model}\ndataset: {DEMO}\nevaluators:\n"
        "  - type: judge\n    rubrics:\n      - faithfulness\n"
        "      - {name: tone, criteria: ZZTONEZZ, levels: {1: a, 2: b, 3: c, 4: d, 5: e}}\n"
        "    cache: null\n    reask: 0\n"
        f"    client: {{provider: openai, model: {model}, base_url: '{url}'}}\n"
    )
    return path


@pytest.mark.usefixtures("api_key")
def test_no_shared_judge_metric_fails_before_any_call(tmp_path: Path, capsys) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text(f"name: plain\ndataset: {DEMO}\nevaluators:\n  - type: rouge\n")
    with FakeOpenAIServer(judge) as srv:
        new_cfg = config(tmp_path, srv.base_url, "judge-new")
        old_cfg = config(tmp_path, srv.base_url, "judge-old")
        nojudge, old = tmp_path / "nojudge", tmp_path / "old"
        assert main(["run", "--quiet", str(plain), "--out", str(nojudge)]) == 0
        assert main(["run", "--quiet", str(old_cfg), "--out", str(old)]) == 0
        other = tmp_path / "other.yaml"  # a judge, but of another rubric
        other.write_text(config(tmp_path, srv.base_url, "judge-new").read_text().replace(
            "[faithfulness]", "[correctness]"))  # fmt: skip
        capsys.readouterr()
        before = srv.received
        assert main(["bridge", str(nojudge), "--judge", str(new_cfg)]) == 2
        assert "no judge metric of" in capsys.readouterr().err
        assert main(["bridge", str(old), "--judge", str(other)]) == 2
        assert "old: faithfulness, faithfulness_norm" in capsys.readouterr().err
        assert srv.received == before  # nothing paid for a bridge that cannot be made


@pytest.mark.usefixtures("api_key")
def test_a_metric_without_pairs_is_skipped_and_the_others_bridged(tmp_path: Path, capsys) -> None:
    with FakeOpenAIServer(picky) as srv:
        old_cfg = two_rubrics(tmp_path, srv.base_url, "judge-old")
        new_cfg = two_rubrics(tmp_path, srv.base_url, "judge-new")
        old, new = tmp_path / "old", tmp_path / "new"
        assert main(["run", "--quiet", str(old_cfg), "--out", str(old)]) == 0
        assert main(["run", "--quiet", str(new_cfg), "--out", str(new)]) == 0
        capsys.readouterr()
        assert main(["bridge", str(old), "--judge", str(new_cfg), "--n", "10"]) == 0
    err = capsys.readouterr().err
    assert "warning: tone not bridged (0 pairs scored by both judges; a bridge needs 3)" in err
    bridge = Bridge.load(old / "bridge.json")
    assert set(bridge.rubrics) == {"faithfulness", "faithfulness_norm"}
    assert set(bridge.skipped) == {"tone", "tone_norm"}
    # compare refuses the unbridged metric by name, and compares the bridged one
    argv = ["compare", str(old), str(new), "--bridge", str(old / "bridge.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "(not in the bridge)" in err and "tone: judge" in err
    assert "faithfulness:" not in err
    assert main([*argv, "--metric", "faithfulness"]) == 0
    out = capsys.readouterr().out
    assert "CI: bridged t interval, p: t test (not the footer's bootstrap" in out
    # gate's refusal names both files
    assert main(["gate", str(new), "--baseline", str(old)]) == 2
    err = capsys.readouterr().err
    assert f"{new} was judged differently from {old}" in err
