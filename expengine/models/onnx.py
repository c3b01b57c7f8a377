"""A sentence-transformers model on ONNX Runtime: no torch when the model runs. The ONNX file is
exported once from the local PyTorch weights (torch is imported for that export only) into the user
cache, at first use or by `expengine models prepare`; the tokenizer is the folder's `tokenizer.json`
read by `tokenizers`. Pooling and normalisation are done as sentence-transformers does (mean over
the attention mask, then L2), so fp32 vectors equal the torch encoder's (cosine 1.0000 on the
sample logs). int8 (dynamic quantisation of the MatMul weights, per channel) is faster, but its
vectors differ (mean cosine 0.991, min 0.98), so it writes vectors under its own name."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import ModelError

ONNX = "onnx"
ONNX_INT8 = "onnx-int8"
TORCH = "torch"
ENCODERS = (ONNX, ONNX_INT8, TORCH)
INT8_SUFFIX = "+int8"  # appended to the model's name: int8 vectors are not interchangeable with fp32 ones
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
SEQ_TOKENS = 256  # the packaged model's max_seq_length (sentence_bert_config.json), read when present
# The model reads the first 256 tokens, and a WordPiece token is rarely over 8 characters: so only the
# head of a long text is tokenised (a 20,000-character tool result costs what a 2,048-character one
# does); the store keeps, and full-text search sees, the whole text.
HEAD_CHARS = 8 * SEQ_TOKENS
# tokens per model run: a run's memory grows with texts x length^2, so a long text goes alone, short ones
# `batch_size` at a time. Each of `threads` runs holds its own: at 8 x 256 tokens two runs took 263 MB
# over the model, at 1 x 256 36 MB, and no more CPU per text (`bench/sources.py`, 2 cores)
RUN_TOKENS = SEQ_TOKENS


def cache_dir() -> Path:
    """Where exported models live: $EXPENGINE_CACHE_DIR, else $XDG_CACHE_HOME/expengine (~/.cache)."""
    env = os.environ.get("EXPENGINE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "expengine"


def onnx_compatible(folder: Path) -> bool:
    """A folder this module reproduces exactly: a transformer, mean pooling, then normalisation."""
    try:
        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((folder / "modules.json").read_text())]
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return False
    mean_only = pooling.get("pooling_mode_mean_tokens") and not any(
        v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens"
    )
    return (
        modules == ["Transformer", "Pooling", "Normalize"] and bool(mean_only) and (folder / "tokenizer.json").exists()
    )


def onnx_file(folder: Path, *, int8: bool = False) -> Path:
    """The cached ONNX file for a model folder: keyed by the folder's name and its weights' size and
    time, so new weights get a new export."""
    weights = next((folder / n for n in ("model.safetensors", "pytorch_model.bin") if (folder / n).exists()), None)
    if weights is None:
        raise ModelError(f"no model weights in {folder}", hint="expected model.safetensors or pytorch_model.bin")
    stat = weights.stat()
    key = hashlib.sha256(f"{folder.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return cache_dir() / "onnx" / f"{folder.name}-{key}" / ("model-int8.onnx" if int8 else "model.onnx")


def _atomic_target(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
    os.close(fd)
    return Path(tmp)


def _publish(tmp: Path, target: Path) -> None:
    """Readable by every user (a shared image's cache), then in place in one rename."""
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)


def weights_file(model_file: Path) -> Path:
    """Where the int8 model's weights lie, beside its graph (`export`)."""
    return model_file.with_name(model_file.name + ".data")


def export(folder: Path, *, int8: bool = False) -> Path:
    """The ONNX file for `folder`, exported (and quantised) now unless cached. Written under a temporary
    name and renamed, so a process that reads it never sees half a file. The int8 model keeps its weights
    in a file of their own (`weights_file`), which ONNX Runtime maps rather than copies: a process holds
    only the word embeddings its texts use, not the 47 MB table, and never the model twice while the
    session loads (a one-line ingest peaked 40 MB lower). An int8 file cached whole before is made again."""
    target = onnx_file(folder, int8=int8)
    if target.exists() and (not int8 or weights_file(target).exists()):
        return target
    tmp = _atomic_target(target)
    try:
        if int8:
            _quantise(export(folder), tmp)
            _weights_beside(tmp, target)
        else:
            _torch_export(folder, tmp)
            _publish(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _weights_beside(model: Path, target: Path) -> None:
    """Publish `model` as `target`, its weights moved out into `weights_file(target)`: the weights first,
    so a process that finds the graph finds its weights too."""
    import onnx

    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        staged, weights = Path(work) / target.name, weights_file(target)
        onnx.save_model(
            onnx.load(str(model)),
            str(staged),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=weights.name,
            size_threshold=1024,
        )
        _publish(Path(work) / weights.name, weights)
        _publish(staged, target)


def _quantise(source: Path, target: Path) -> None:
    """int8 weights of the MatMuls, per channel: the variant closest to fp32 of those tried (mean
    cosine 0.991 on the sample logs; all ops and per-tensor scales gave 0.936)."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise ModelError(
            f"cannot quantise to int8: {exc}",
            hint='pip install onnx (an expengine dependency), or set [embedder] encoder = "onnx" (fp32)',
        ) from exc
    with _quiet_library():
        quantize_dynamic(source, target, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"])


@contextlib.contextmanager
def _quiet_library() -> Iterator[None]:
    """Library advice a user cannot act on stays off stderr while an export runs: onnxruntime's quantiser
    logs "Please consider to run pre-processing before quantization" through the root logger (and adds a
    root handler on the way), torch's exporter warns about tracing. Errors still show."""
    root = logging.getLogger()
    handlers, disabled = list(root.handlers), logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(disabled)
        root.handlers[:] = handlers


def _torch_export(folder: Path, target: Path) -> None:
    """Trace the transformer (its last hidden state) with dynamic batch and sequence axes."""
    try:
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise ModelError(
            f"cannot export {folder.name} to ONNX: {exc}",
            hint='the export needs torch and transformers once; or set [embedder] encoder = "torch"',
        ) from exc

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # the weights' loading bar
    model = AutoModel.from_pretrained(str(folder), local_files_only=True).eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    ids = torch.ones((2, 8), dtype=torch.long)
    mask = torch.ones((2, 8), dtype=torch.long)
    mask[1, 5:] = 0  # a padded row, so the trace keeps the masking
    axes = {name: {0: "batch", 1: "sequence"} for name in (*INPUTS, "last_hidden_state")}
    with torch.no_grad(), _quiet_library():
        torch.onnx.export(
            LastHiddenState(),
            (ids, mask, torch.zeros_like(ids)),
            str(target),
            input_names=list(INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


class OnnxEmbedder:
    """A mean-pooled, normalised sentence-transformers folder on ONNX Runtime. One session on one
    intra-op thread; a big batch is split over `threads` concurrent runs of it (ONNX Runtime's `run`
    is thread-safe), so one query never waits on thread hand-offs and ingest still uses every core."""

    def __init__(self, folder: str, *, name: str, batch_size: int = 32, threads: int = 1, int8: bool = False):
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelError(
                f"ONNX Runtime is not installed: {exc}", hint='pip install onnxruntime, or set encoder = "torch"'
            ) from exc
        path = Path(folder)
        self.name, self.batch_size, self.threads = name, batch_size, max(1, threads)
        model_file = export(path, int8=int8)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # memory follows the run, not the largest one seen: ONNX Runtime's arena kept every padded length's
        # buffers, and glibc kept what the runtime freed (a 3 MB session's ingest peaked at 1.2 GB)
        options.enable_cpu_mem_arena = False
        _return_freed_memory()
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.dim = int(
            self._session.get_outputs()[0].shape[-1] or json.loads((path / "config.json").read_text())["hidden_size"]
        )
        try:
            seq = int(json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"])
        except (OSError, ValueError, KeyError):
            seq = SEQ_TOKENS
        self._tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self._tokenizer.enable_truncation(seq)
        pad = self._tokenizer.padding or {}
        self._tokenizer.enable_padding(pad_id=pad.get("pad_id", 0), pad_token=pad.get("pad_token", "[PAD]"))
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _run(self, texts: list[str]) -> np.ndarray:
        encoded = self._tokenizer.encode_batch([t[:HEAD_CHARS] for t in texts])
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # longest first, as sentence-transformers does: batches of like lengths pad least
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        batches = _batches([texts[i] for i in order], self.batch_size)
        if len(batches) > 1 and self.threads > 1:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="onnx")
            parts = list(self._pool.map(self._run, batches))
        else:
            parts = [self._run(b) for b in batches]
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        vectors[order] = np.vstack(parts)
        return vectors


def _batches(texts: list[str], size: int) -> list[list[str]]:
    """Texts (longest first) in runs of at most `size` and about RUN_TOKENS padded tokens (4 chars a token)."""
    out: list[list[str]] = []
    for text in texts:
        if out and len(out[-1]) < size and (len(out[-1]) + 1) * _tokens(out[-1][0]) <= RUN_TOKENS:
            out[-1].append(text)
        else:
            out.append([text])
    return out


def _tokens(text: str) -> int:
    return min(SEQ_TOKENS, len(text) // 4 + 2)


def _return_freed_memory() -> None:
    """Keep glibc's mmap threshold at 256 KiB, so the large buffers a model run frees go back to the
    system (by default the threshold rises with each such free and they stay in the heap)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 18)  # M_MMAP_THRESHOLD
        except (OSError, AttributeError):
            pass
