"""BERTScore's transformers-free path (rag_judge/metrics/bertscore/fastbert.py): the packaged
MiniLM scores as through transformers, a new process never imports transformers, and a folder
it cannot read exactly loads through transformers as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_judge.data.sample import Sample
from rag_judge.evaluators.bertscore import METRICS, BERTScoreEvaluator
from rag_judge.metrics.bertscore import encoder as E
from rag_judge.metrics.bertscore import fastbert
from rag_judge.metrics.bertscore import models as M

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
cpu = pytest.importorskip("rag_judge.metrics.bertscore.cpu")
needs_onednn = pytest.mark.skipif(not cpu.can_pack(), reason="oneDNN packed linear unavailable")

ROOT = Path(__file__).resolve().parents[2]
PAIRS = [
    ("Invoices are issued on the first day of each period and are due within 14 days.",
     "Invoices are issued on the first day of every period, due in 14 days."),
    ("An upgrade from Team to Enterprise is charged pro rata for the days left.",
     "Upgrading to Enterprise costs the remaining days of the period, pro rata."),
    ("SEPA direct debit is available to customers in the EU only.",
     "Only EU customers can pay by SEPA direct debit."),
    ("Naïve café résumé — 北京 🙂 ünïcödé", "cafe resume Beijing"),
    ("", "An empty answer scores zero."),
    ("word " * 600, "A text longer than the model's 512 tokens is truncated."),
    ("Removed users stop being billed at the next renewal date.",
     "Removed users stop being billed at the next renewal date."),
]  # fmt: skip


def _runtime(fast: bool) -> E.EncoderRuntime:
    runtime = E.EncoderRuntime()
    runtime.models.fast = fast
    return runtime


def _scores(runtime: E.EncoderRuntime, tmp: Path, idf: bool) -> np.ndarray:
    samples = [Sample(id=str(i), answer=a, references=[r]) for i, (a, r) in enumerate(PAIRS)]
    ev = BERTScoreEvaluator(device="cpu", cache_dir=str(tmp), idf=idf, batch_size=3)
    run = ev.prepare(runtime=runtime)
    return np.array([run.evaluate(samples).scores[m] for m in METRICS], dtype=np.float64)


@needs_onednn
@pytest.mark.parametrize("idf", [False, True])
def test_fast_path_scores_as_the_transformers_path(tmp_path: Path, idf: bool) -> None:
    fast, slow = _runtime(True), _runtime(False)
    got = _scores(fast, tmp_path / "fast", idf)
    want = _scores(slow, tmp_path / "slow", idf)
    assert np.abs(got - want).max() <= 1e-6
    files = fast.models.locate(M.DEFAULT_MODEL)
    assert isinstance(fast.models.model(files, 6, "cpu", "fp32"), cpu.FastBert)
    assert not isinstance(slow.models.model(files, 6, "cpu", "fp32"), cpu.FastBert)
    assert fast.stats.model_loads == 1


@needs_onednn
def test_every_layer_embeds_as_through_transformers() -> None:
    texts = [a for a, _ in PAIRS[:4]]
    for layer in (0, 3, 6):
        fast = E.Encoder.open(M.DEFAULT_MODEL, layer, "cpu", runtime=_runtime(True))
        slow = E.Encoder.open(M.DEFAULT_MODEL, layer, "cpu", runtime=_runtime(False))
        got, want = fast.encode(texts), slow.encode(texts)
        assert fast.zero_ids() == slow.zero_ids() == [101, 102]
        for text in texts:
            assert got[text].ids.tolist() == want[text].ids.tolist()
            np.testing.assert_allclose(got[text].vectors, want[text].vectors, rtol=0, atol=1e-6)


@needs_onednn
def test_a_new_process_scores_without_importing_transformers(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from rag_judge.data.sample import Sample\n"
        "from rag_judge.evaluators.bertscore import BERTScoreEvaluator\n"
        f"ev = BERTScoreEvaluator(device='cpu', cache_dir={str(tmp_path)!r})\n"
        "res = ev.evaluate([Sample(id='1', answer='a cat sat', references=['the cat sat'])])\n"
        "print(res.scores['bertscore_f1'][0], 'transformers' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    ).stdout.split()  # fmt: skip
    assert 0.5 < float(out[0]) < 1 and out[1] == "False"


def _copy(folder: Path, into: Path) -> Path:
    """The model folder's files, the weights linked (not copied), into ``into``."""
    into.mkdir()
    for f in folder.iterdir():
        if f.is_file():
            target = into / f.name
            if f.suffix == ".safetensors":
                target.symlink_to(f)
            else:
                target.write_bytes(f.read_bytes())
    return into


def _edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**data, **changes}), encoding="utf-8")


@pytest.mark.parametrize(
    "change",
    [
        "gelu_new",
        "cased",
        "no tokenizer.json",
        "relative positions",
        "post-processor",
        "pre-tokenizer",
        "wordpiece",
        "special token",
    ],
)
def test_a_folder_it_cannot_read_exactly_loads_through_transformers(
    tmp_path: Path, change: str
) -> None:
    folder = _copy(M.resolve_model_dir(M.DEFAULT_MODEL), tmp_path / "model")
    assert fastbert.eligible(folder)
    if change == "gelu_new":  # another activation: the fused GELU would be wrong
        _edit(folder / "config.json", hidden_act="gelu_new")
    elif change == "cased":  # tokenizer_config.json and tokenizer.json disagree
        _edit(folder / "tokenizer_config.json", do_lower_case=False)
    elif change == "relative positions":
        _edit(folder / "config.json", position_embedding_type="relative_key")
    # transformers rebuilds BERT's tokenizer from vocab.txt and tokenizer_config.json: a
    # tokenizer.json whose other parts differ from BERT's would give other ids than it does.
    elif change == "post-processor":
        _edit(folder / "tokenizer.json", post_processor={"type": "BertProcessing",
              "sep": ["[SEP]", 102], "cls": ["[SEP]", 102]})  # fmt: skip
    elif change == "pre-tokenizer":
        _edit(folder / "tokenizer.json", pre_tokenizer={"type": "Whitespace"})
    elif change == "wordpiece":
        model = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]
        _edit(folder / "tokenizer.json", model={**model, "max_input_chars_per_word": 5})
    elif change == "special token":  # the two files would name different [CLS] tokens
        _edit(folder / "tokenizer_config.json", cls_token="[MASK]")
    else:
        (folder / "tokenizer.json").unlink()
    assert not fastbert.eligible(folder)
    runtime = E.EncoderRuntime()
    enc = E.Encoder.open(str(folder), 6, "cpu", runtime=runtime)
    assert not isinstance(enc.tokenizer, fastbert.BertTokenizerFiles)
    if change == "cased":  # the rest is still BERT: the model loads and encodes
        model = runtime.models.model(enc.files, 6, "cpu", "fp32")
        assert not isinstance(model, cpu.FastBert)
        assert enc.encode(["A text."])["A text."].vectors.shape == (5, 384)


@needs_onednn
def test_the_docs_cold_start_example_runs() -> None:
    page = (ROOT / "docs" / "bertscore.md").read_text(encoding="utf-8")
    section = page.split("## Cold start in a new process", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/bertscore.md", "exec"), {})
