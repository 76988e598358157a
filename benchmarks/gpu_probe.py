"""Where rag-judge's BERTScore time goes on a GPU: a diagnostic beside ``gpu_check.py``.

On the lent GPU machine (``docs/gpu-check.md``), after ``gpu_check.sh`` has installed the
carried wheels: ``PYTHONPATH=/tmp/site python benchmarks/gpu_probe.py --out $OUT``. Times, each
between two ``torch.cuda.synchronize()`` calls, medians of ``--rounds``:

* the evaluator warm (every text encoded) and with every embedding in memory (the rest:
  tokenising, matching, bookkeeping), and bert-score's ``BERTScorer.score`` warm;
* the encoding loop alone, in variants of the same arithmetic: as the encoder runs it (one
  upload and one download per batch), with the ids uploaded once and the vectors downloaded
  once, one batch per length group, bert-score's padded batches with an attention mask, and a
  lean forward (``gpu.GpuBert`` built from the same weights: fused Q/K/V,
  ``scaled_dot_product_attention``, no transformers code per call), each with its largest
  difference from the encoder's vectors;
* one forward pass at 64 texts of 40 tokens, transformers' module against the lean one.

``encoder.encode`` runs the encoder as shipped (on a GPU, ``gpu.GpuBert`` for a BERT folder);
the variants run transformers' BertModel (the lean ones its weights), and each prints its
largest difference from the encoder's vectors.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bertscore_processes import prose_pairs  # noqa: E402
from gpu_check import LAYER, check_vocabulary, model_folder  # noqa: E402


def lean_forward(model: Any, layer: int) -> Callable[[Any], Any]:
    """The shipped ``gpu.GpuBert`` built from a transformers BertModel's own tensors (fused
    Q/K/V, ``scaled_dot_product_attention`` without a mask, exact GELU), as the variants call
    a forward pass: token ids in, L2-normalised vectors out."""
    import torch

    from rag_judge.metrics.bertscore import gpu

    device = next(model.parameters()).device
    bert = gpu.build(model.config.to_dict(), model.state_dict(), layer, device, torch.float32)

    def forward(ids: Any) -> Any:
        return torch.nn.functional.normalize(bert(input_ids=ids)[0].float(), dim=-1)

    return forward


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--model-dir", default=None)
    ap.add_argument("--out", default="gpu_check_out")
    args = ap.parse_args()

    import bert_score
    import torch

    from rag_judge.data.sample import Sample
    from rag_judge.evaluators.bertscore import BERTScoreEvaluator
    from rag_judge.metrics.bertscore.encoder import (
        Encoder,
        EncoderRuntime,
        _equal_length_batches,
    )

    device, batch = args.device, args.batch_size
    cuda = device.startswith("cuda")
    sync: Callable[[], None] = torch.cuda.synchronize if cuda else (lambda: None)
    out: dict[str, Any] = {}

    def timed(name: str, fn: Callable[[], Any], rounds: int = args.rounds) -> Any:
        res, secs = None, []
        fn()  # untimed: first-call costs
        for _ in range(rounds):
            sync()
            t = time.perf_counter()
            res = fn()
            sync()
            secs.append(time.perf_counter() - t)
        out[name] = round(float(np.median(secs)), 5)
        print(f"{name:>34}: {out[name] * 1e3:9.2f} ms", flush=True)
        return res

    scratch = Path(tempfile.mkdtemp())
    folder, kept = model_folder(args.model_dir, scratch)
    cands, refs = prose_pairs(args.pairs, seed=0)
    check_vocabulary(folder, cands + refs, kept)
    samples = [
        Sample(id=str(i), answer=c, references=[r]) for i, (c, r) in enumerate(zip(cands, refs))
    ]
    runtime = EncoderRuntime()
    run = BERTScoreEvaluator(
        model_type=str(folder), num_layers=LAYER, device=device, batch_size=batch,
        disk_cache=False,
    ).prepare(runtime=runtime)  # fmt: skip

    def warm() -> Any:
        runtime.clear(models=False)
        return run.evaluate(samples)

    timed("evaluator, every text encoded", warm)
    timed("evaluator, embeddings in memory", lambda: run.evaluate(samples))
    scorer = bert_score.BERTScorer(
        model_type=str(folder), num_layers=LAYER, device=device, batch_size=batch
    )
    timed("bert-score BERTScorer.score", lambda: scorer.score(cands, refs))

    enc = Encoder.open(str(folder), LAYER, device, "fp32", batch, None, runtime)
    texts = sorted({t.strip() for t in cands + refs})
    timed("tokenize (one call)", lambda: enc.tokenize(texts))
    base = timed("encoder.encode", lambda: enc.encode(texts))
    fast_model = runtime.models.model(enc.files, LAYER, enc.resolved_device(), "fp32")
    out["encoder_model"] = type(fast_model).__name__
    slow = EncoderRuntime()
    slow.models.fast = False  # transformers' BertModel, the variants' baseline
    model = slow.models.model(enc.files, LAYER, enc.resolved_device(), "fp32")
    dev = next(model.parameters()).device
    token_ids = enc.tokenize(texts)
    lengths = np.array([len(t) for t in token_ids])
    order = sorted(range(len(texts)), key=lambda i: (lengths[i], texts[i]))
    flat = np.concatenate([np.asarray(t) for t in token_ids])
    starts = np.cumsum(lengths) - lengths
    # transformers' own layers (on the CPU they are swapped for the fused ones of cpu.py)
    plain = hasattr(model, "embeddings") and hasattr(model.encoder.layer[0], "attention")
    lean = lean_forward(model, LAYER) if plain else None

    def loop(size: int, forward: Callable[[Any], Any]) -> dict[str, Any]:
        gpu_flat = torch.from_numpy(flat).to(dev)
        gpu_starts = torch.from_numpy(starts).to(dev)
        kept_out = []
        with torch.inference_mode():
            for b in _equal_length_batches(order, lengths, size):
                n = int(lengths[b[0]])
                rows = gpu_starts[torch.from_numpy(b).to(dev)][:, None]
                ids = gpu_flat[rows + torch.arange(n, device=dev)]
                kept_out.append((b, forward(ids)))
            return {texts[i]: v for b, vs in kept_out for i, v in zip(b.tolist(), vs.cpu().numpy())}

    def hf(ids: Any) -> Any:
        return torch.nn.functional.normalize(model(input_ids=ids)[0].float(), dim=-1)

    def diff(name: str, got: dict[str, Any]) -> None:
        d = max(float(np.max(np.abs(got[t] - base[t].vectors))) for t in texts)
        out[name + " max diff"] = d
        print(f"{name + ' max diff':>34}: {d:.2e}", flush=True)

    diff("upload once", timed("upload once, download once", lambda: loop(batch, hf)))
    diff("per length", timed("one batch per length group", lambda: loop(10**9, hf)))

    def padded() -> dict[str, Any]:
        got = {}
        with torch.inference_mode():
            for s in range(0, len(order), batch):
                b = order[s : s + batch]
                n = int(max(lengths[i] for i in b))
                ids = np.zeros((len(b), n), np.int64)
                mask = np.zeros((len(b), n), np.int64)
                for r, i in enumerate(b):
                    ids[r, : lengths[i]] = token_ids[i]
                    mask[r, : lengths[i]] = 1
                x = torch.from_numpy(ids).to(dev)
                m = torch.from_numpy(mask).to(dev)
                v = hf_masked(x, m).cpu().numpy()
                for r, i in enumerate(b):
                    got[texts[i]] = v[r, : lengths[i]]
        return got

    def hf_masked(x: Any, m: Any) -> Any:
        return torch.nn.functional.normalize(
            model(input_ids=x, attention_mask=m)[0].float(), dim=-1
        )

    if lean is not None:  # transformers' module (the CPU's fast path takes no mask)
        diff("padded", timed("padded batches + mask (bert-score)", padded))
        diff("lean", timed("lean forward, upload once", lambda: loop(batch, lean)))
        diff("lean per length", timed("lean forward, per length group", lambda: loop(10**9, lean)))
    x = torch.randint(1000, 2000, (64, 40), device=dev)
    with torch.inference_mode():
        timed("one HF forward (64 x 40)", lambda: hf(x), rounds=50)
        if lean is not None:
            timed("one lean forward (64 x 40)", lambda: lean(x), rounds=50)
    out["device"] = torch.cuda.get_device_name(0) if cuda else "cpu"
    out["texts"], out["batches_at_size"] = (
        len(texts),
        sum(1 for _ in _equal_length_batches(order, lengths, batch)),
    )
    out["length_groups"] = len(set(lengths.tolist()))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "gpu_probe.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
