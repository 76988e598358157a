"""BERTScore's CUDA path against its CPU path, on a small randomly initialised BERT built here
(no hub, no model download), so it runs on a bare GPU machine with torch and transformers.

    python scripts/gpu_bertscore_check.py   # max |F1(setting) - F1(cpu, fp32)| per setting

Each setting runs with a fresh encoder runtime (no model loaded, empty in-memory cache) and no
disk cache, so every one encodes everything itself.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

from rag_judge import Sample
from rag_judge.evaluators.bertscore import BERTScoreEvaluator
from rag_judge.metrics.bertscore.encoder import EncoderRuntime

FOLDER = "/tmp/rag-judge-tiny-bert"
WORDS = [f"w{i}" for i in range(400)] + ["the", "ocean", "pacific", "largest", "is", "a"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_model() -> None:
    vocab = {t: i for i, t in enumerate(SPECIAL + WORDS)}
    tk = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        pad_token="[PAD]", mask_token="[MASK]",
    ).save_pretrained(FOLDER)  # fmt: skip
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
        intermediate_size=1024,
    )  # fmt: skip
    BertModel(config).save_pretrained(FOLDER)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--samples", type=int, default=400, help="samples to score (default 400)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this script compares BERTScore's CUDA path with its CPU path")
    tiny_model()
    rng = random.Random(0)

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    samples = [
        Sample(
            id=str(i),
            answer=text(rng.randint(3, 30)),
            references=tuple(text(rng.randint(3, 30)) for _ in range(rng.randint(1, 2))),
        )
        for i in range(args.samples)
    ]
    settings = [("cpu", "fp32", 64), ("cuda", "fp32", 64), ("cuda", "fp32", 1),
                ("cuda", "fp32", 256), ("cuda", "bf16", 64), ("cuda", "fp16", 64)]  # fmt: skip
    out: dict[str, object] = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    base: list[float | None] = []
    for device, dtype, batch in settings:
        evaluator = BERTScoreEvaluator(
            model_type=FOLDER, num_layers=4, device=device, dtype=dtype, batch_size=batch,
            disk_cache=False, idf=True,
        )  # fmt: skip
        start = time.perf_counter()
        run = evaluator.prepare(runtime=EncoderRuntime())  # a fresh process's state; timed
        f1 = run.evaluate_all(samples).scores["bertscore_f1"]
        name = f"{device}/{dtype}/batch{batch}"
        base = base or f1
        diff = max(abs(a - b) for a, b in zip(base, f1) if a is not None and b is not None)
        out[name] = {"seconds": round(time.perf_counter() - start, 3), "max_diff_vs_cpu": diff}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
