"""Pluggable models behind small interfaces; heavy libraries load lazily, once per process."""

from .embedder import Embedder, SentenceTransformerEmbedder, get_embedder

__all__ = ["Embedder", "SentenceTransformerEmbedder", "get_embedder"]
