"""Judge calibration: ρ, quadratic κ and interval α against independent computations."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# The references: the dev extra installs both, so these comparisons never skip.
from scipy.stats import rankdata, spearmanr
from sklearn.metrics import cohen_kappa_score

from rag_judge.analysis.calibration import (
    agreement_rubrics,
    average_ranks,
    calibrate,
    krippendorff_alpha_interval,
    load_labels,
    quadratic_kappa,
    spearman,
)
from rag_judge.cli.calibrate import add_parser, render_markdown
from rag_judge.errors import DataError
from rag_judge.report.model import MetricKind, MetricSummary, Report, SampleResult

HUMAN = [1, 2, 3, 4, 5, 3, 2, 4, 5, 1]
JUDGE = [1, 3, 3, 4, 4, 3.5, 2, 5, 5, 2.49]  # 3.5 → 4 and 2.49 → 2 for κ and agreement


def alpha_by_coincidence(a: list[float], b: list[float]) -> float:
    """Krippendorff's interval α written out from the coincidence matrix (two coders)."""
    values = sorted(set(a) | set(b))
    index = {v: i for i, v in enumerate(values)}
    o = np.zeros((len(values), len(values)))
    for x, y in zip(a, b):  # each unit: m_u = 2 values, pairs (x, y) and (y, x), / (m_u - 1)
        o[index[x], index[y]] += 1
        o[index[y], index[x]] += 1
    n_c = o.sum(axis=1)
    n = n_c.sum()
    delta2 = np.subtract.outer(np.array(values), np.array(values)) ** 2
    d_o = (o * delta2).sum() / n
    d_e = (np.outer(n_c, n_c) * delta2).sum() / (n * (n - 1))
    return float(1 - d_o / d_e)


def judge_report(scores: dict[str, list[float | None]], ids: list[str] | None = None) -> Report:
    n = len(next(iter(scores.values())))
    ids = ids or [f"q{i}" for i in range(n)]
    samples = [
        SampleResult(id=ids[i], scores={m: v[i] for m, v in scores.items()}) for i in range(n)
    ]
    summary = {}
    for m in scores:
        summary[m] = MetricSummary(mean=3.0, n=n, kind=MetricKind.JUDGE, scale=(1, 5))
        summary[f"{m}_norm"] = MetricSummary(mean=0.5, n=n, kind=MetricKind.JUDGE, normalises=m)
    return Report(summary=summary, samples=samples, signatures={})


def labels_of(rubric: str, values: list[int]) -> dict[str, dict[str, int]]:
    return {f"q{i}": {rubric: v} for i, v in enumerate(values)}


def test_ten_items_against_references() -> None:
    (result,) = calibrate(judge_report({"faith": JUDGE}), labels_of("faith", HUMAN)).values()
    assert result.n == 10 and result.unpaired == 0
    assert result.spearman == pytest.approx(0.9068497908749147, abs=1e-12)
    assert result.kappa == pytest.approx(32 / 37, abs=1e-12)
    assert result.alpha == pytest.approx(alpha_by_coincidence(HUMAN, JUDGE), abs=1e-12)
    assert result.exact == 0.5  # rounded judge [1,3,3,4,4,4,2,5,5,2]: 5 of 10 equal
    assert result.within_one == 1.0
    assert result.spearman == pytest.approx(spearmanr(HUMAN, JUDGE).statistic, abs=1e-12)
    rounded = [int(np.floor(x + 0.5)) for x in JUDGE]
    reference = cohen_kappa_score(HUMAN, rounded, weights="quadratic", labels=[1, 2, 3, 4, 5])
    assert result.kappa == pytest.approx(reference, abs=1e-12)


def test_alpha_hand_computed() -> None:
    # pairs (1,1), (2,3), (3,3): pooled 1,1,2,3,3,3; Σo·δ² = 2, Σ n_c n_k δ² = 58, n = 6:
    # α = 1 − (6 − 1)·2/58 = 24/29.
    a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 3.0])
    assert krippendorff_alpha_interval(a, b) == pytest.approx(24 / 29, abs=1e-15)
    assert alpha_by_coincidence([1, 2, 3], [1, 3, 3]) == pytest.approx(24 / 29, abs=1e-15)


def test_perfect_agreement_is_one() -> None:
    (result,) = calibrate(judge_report({"r": HUMAN}), labels_of("r", HUMAN)).values()
    assert (result.spearman, result.kappa, result.alpha) == (
        pytest.approx(1.0),
        pytest.approx(1.0),
        pytest.approx(1.0),
    )
    assert result.exact == result.within_one == 1.0


def test_undefined_statistics_are_none() -> None:
    (result,) = calibrate(judge_report({"r": [3.0] * 4}), labels_of("r", [3] * 4)).values()
    assert (result.spearman, result.kappa, result.alpha, result.exact) == (None, None, None, 1.0)
    assert spearman(np.array([1.0]), np.array([2.0])) is None
    empty = quadratic_kappa(np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert empty is None


def test_pairing_skips_unscored_and_unknown_ids() -> None:
    report = judge_report({"r": [4.0, None, 2.0]})
    labels = {"q0": {"r": 4}, "q1": {"r": 3}, "q2": {"r": 2}, "zz": {"r": 5}, "q3": {"other": 1}}
    with pytest.raises(DataError, match=r"rubric 'other' of the labels is not in the report; its"):
        calibrate(report, labels)
    (result,) = calibrate(report, labels, rubrics=["r"]).values()
    assert (result.n, result.unpaired, result.exact) == (2, 2, 1.0)


def test_normalised_twins_and_other_kinds_are_refused() -> None:
    report = judge_report({"r": [4.0]})
    report.samples[0].scores["r_norm"] = 0.75
    with pytest.raises(DataError, match=r"'r_norm' restates the judge rubric 'r' on \[0, 1\]"):
        calibrate(report, {"q0": {"r_norm": 4}})
    report.summary["ndcg@3"] = MetricSummary(mean=0.5, n=1, kind=MetricKind.RETRIEVAL)
    with pytest.raises(DataError, match=r"'ndcg@3' is a retrieval metric, not a judge rubric; the "
                       r"report's judge rubrics: r$"):  # fmt: skip
        calibrate(report, {"q0": {"ndcg@3": 4}})
    # a metric of no declared kind (an older report.json) is checked by its values
    report.summary["x"] = MetricSummary(mean=0.75, n=1)
    report.samples[0].scores["x"] = 0.75
    with pytest.raises(DataError, match=r"score 0.75 is outside 1-5"):
        calibrate(report, {"q0": {"x": 4}})


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 5), st.sampled_from([1, 1.5, 2, 2.25, 3, 3.5, 4, 4.75, 5])),
        min_size=3,
        max_size=30,
    )
)
def test_random_data_against_references(pairs: list[tuple[int, float]]) -> None:
    human = np.array([p[0] for p in pairs], dtype=np.float64)
    judge = np.array([p[1] for p in pairs], dtype=np.float64)
    assert np.allclose(average_ranks(judge), rankdata(judge))
    if np.ptp(human) > 0 and np.ptp(judge) > 0:
        assert spearman(human, judge) == pytest.approx(spearmanr(human, judge).statistic)
    if np.ptp(np.concatenate([human, judge])) > 0:
        reference = alpha_by_coincidence(human.tolist(), judge.tolist())
        assert krippendorff_alpha_interval(human, judge) == pytest.approx(reference, abs=1e-9)
    rounded = np.floor(judge + 0.5).astype(np.int64)
    kappa = quadratic_kappa(human.astype(np.int64), rounded)
    if kappa is not None:
        reference = cohen_kappa_score(human, rounded, weights="quadratic", labels=[1, 2, 3, 4, 5])
        assert kappa == pytest.approx(reference, abs=1e-9)


# ---- label files -----------------------------------------------------------------------------


def test_load_jsonl_and_csv(tmp_path: Path) -> None:
    jsonl = tmp_path / "labels.jsonl"
    jsonl.write_text('{"id": "q1", "faith": 4, "correct": 2}\n\n{"id": 7, "faith": 5.0}\n')
    assert load_labels(jsonl) == {"q1": {"faith": 4, "correct": 2}, "7": {"faith": 5}}
    csv_file = tmp_path / "labels.csv"
    csv_file.write_text("id,faith,correct\nq1,4,2\nq2,,3\n")
    assert load_labels(csv_file) == {"q1": {"faith": 4, "correct": 2}, "q2": {"correct": 3}}


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("l.jsonl", '{"id": "a", "f": 4}\n{"id": "b", "f": 6}\n',
         "l.jsonl:2: field 'f': 6 is not a label 1-5"),
        ("l.jsonl", '{"id": "a", "f": 4}\n{"id": "a", "f": 3}\n',
         "l.jsonl:2: field 'id': 'a' already labelled on line 1"),
        ("l.jsonl", '{"id": "a", "f": 4}\n{oops\n', "l.jsonl:2: invalid JSON"),
        ("l.jsonl", '{"f": 4}\n', "l.jsonl:1: field 'id': expected a non-empty string, got None"),
        ("l.jsonl", '{"id": "a", "f": 3.5}\n', "l.jsonl:1: field 'f': 3.5 is not a label 1-5"),
        # JSON has numbers: a string is not read as one (CSV cells are text, so "4" is 4 there).
        ("l.jsonl", '{"id": "a", "f": "3"}\n',
         "l.jsonl:1: field 'f': expected a number (a label 1-5; 0 or 1 for a pass/fail metric), "
         "got the string '3'"),
        ("l.jsonl", '{"id": "a", "f": ""}\n', "l.jsonl:1: field 'f': expected a number"),
        ("l.csv", "id,f\na,4\nb,x\n", "l.csv:3: field 'f': 'x' is not a label 1-5"),
        ("l.csv", "sample,f\na,4\n", "l.csv:1: the header needs an 'id' column"),
        ("l.csv", "id,f\na,4,5\n", "l.csv:2: more cells than header columns"),
        ("l.txt", "id,f\n", "unknown label file type '.txt'; use .jsonl or .csv"),
        ("l.csv", "id,f\n", "l.csv: contains no labels"),
    ],
)  # fmt: skip
def test_bad_label_files_name_file_line_and_field(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataError) as info:
        load_labels(path)
    assert message in str(info.value)


# ---- output ----------------------------------------------------------------------------------


def calibrate_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="rag-judge")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["calibrate", *argv])
    return int(args.handler(args))


def test_markdown_and_cli(tmp_path: Path, capsys) -> None:
    results = calibrate(judge_report({"faith": JUDGE}), labels_of("faith", HUMAN))
    assert render_markdown(results).splitlines() == [
        "| rubric | n | Spearman ρ | QWK κ | Krippendorff α | exact | within ±1 | unpaired |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        f"| faith | 10 | 0.907 | 0.865 | {results['faith'].alpha:.3f} | 0.500 | 1.000 | 0 |",
    ]
    report = tmp_path / "report.json"
    report.write_text(judge_report({"faith": JUDGE}).to_json())
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(json.dumps({"id": f"q{i}", "faith": h}) + "\n" for i, h in enumerate(HUMAN))
    )
    assert calibrate_cli(str(report), str(labels), "--format", "json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["faith"]["kappa"] == pytest.approx(32 / 37)
    assert calibrate_cli(str(report), str(labels), "--format", "md") == 0
    # the agreement table, then the bias-corrected estimates' (tests/analysis/test_ppi.py)
    assert capsys.readouterr().out.startswith(render_markdown(results) + "\n\n| metric |")
    assert calibrate_cli(str(report), str(labels)) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["rubric", "n", "Spearman", "ρ", "QWK", "κ", "Krippendorff", "α",
                                "exact", "within", "±1", "unpaired"]  # fmt: skip
    assert table[1].split()[:4] == ["faith", "10", "0.907", "0.865"]


def test_cli_without_a_shared_id_warns_and_exits_1(tmp_path: Path, capsys) -> None:
    report = tmp_path / "report.json"
    report.write_text(judge_report({"faith": JUDGE}).to_json())  # ids q0..q9
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": f"x{i}", "faith": 3}) + "\n" for i in range(3)))
    assert calibrate_cli(str(report), str(labels)) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no sample id is in both" in captured.err
    assert f"{report} (10 sample ids)" in captured.err
    assert f"{labels} (3 labelled ids)" in captured.err
    # one shared id is enough to calibrate (its other labels count as unpaired)
    labels.write_text(labels.read_text() + json.dumps({"id": "q0", "faith": 3}) + "\n")
    assert calibrate_cli(str(report), str(labels), "--format", "json") == 0
    assert json.loads(capsys.readouterr().out)["faith"]["unpaired"] == 3


def test_labels_as_a_dataset_column(tmp_path: Path) -> None:
    from rag_judge.analysis.calibration import labels_from_dataset

    path = tmp_path / "data.jsonl"
    path.write_text(
        '{"id": "a", "metadata": {"human": {"faithfulness": 4}}}\n'
        '{"id": "b"}\n'
        '{"id": "c", "metadata": {"human": {"faithfulness": 2, "correctness": 5}}}\n'
    )
    assert labels_from_dataset(path, "human") == {
        "a": {"faithfulness": 4},
        "c": {"faithfulness": 2, "correctness": 5},
    }
    # A string is not a label in JSON (it was read as one: "5" became 5).
    path.write_text('{"id": "c", "metadata": {"human": {"correctness": "5"}}}\n')
    with pytest.raises(DataError, match=r"sample 'c': metadata.human: field 'correctness': expe"):
        labels_from_dataset(path, "human")
    path.write_text('{"id": "a", "metadata": {"human": {"faithfulness": 7}}}\n')
    with pytest.raises(DataError, match=r"sample 'a': metadata.human: field 'faithfulness'"):
        labels_from_dataset(path, "human")
    with pytest.raises(DataError, match=r"no sample carries labels in metadata\.other"):
        labels_from_dataset(path, "other")


# ---- 0/1 labels of pass/fail metrics ---------------------------------------------------------


def test_label_files_take_0_and_1_for_pass_fail_metrics(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text("id,faith,answer_rate\nq1,4,0\nq2,,1\n")
    assert load_labels(path) == {"q1": {"faith": 4, "answer_rate": 0}, "q2": {"answer_rate": 1}}
    path.write_text("id,answer_rate\nq1,-1\n")
    with pytest.raises(DataError) as info:
        load_labels(path)
    assert str(info.value) == (
        f"{path}:2: field 'answer_rate': '-1' is not a label 1-5 (an integer; 0 or 1 for a "
        "pass/fail metric)"
    )


def test_agreement_refuses_a_0_on_a_rubric_and_skips_0_1_metrics() -> None:
    report = judge_report({"faith": [4.0, 3.0], "answer_rate": [1.0, 0.0]})
    del report.summary["answer_rate_norm"]  # a grounding rate: on [0, 1], no twin
    report.summary["answer_rate"] = MetricSummary(mean=0.5, n=2, kind=MetricKind.JUDGE)
    with pytest.raises(DataError) as info:
        calibrate(report, {"q0": {"faith": 4}, "q1": {"faith": 0}})
    assert str(info.value) == (
        "sample 'q1': faith label 0 is outside 1-5; agreement needs a 1-5 label of a 1-5 judge "
        "rubric (0/1 labels are for pass/fail metrics such as answer_rate)"
    )
    labels = {"q0": {"faith": 4, "answer_rate": 1}, "q1": {"faith": 3, "answer_rate": 1}}
    assert agreement_rubrics(report, labels) == ["faith"]  # answer_rate: estimates only
    assert list(calibrate(report, labels)) == ["faith"]
    with pytest.raises(DataError, match=r"sample 'q1': answer_rate score 0.0 is outside 1-5"):
        calibrate(report, labels, rubrics=["answer_rate"])  # named, it is refused as before
