"""The mixed-language embedder: each text is embedded by the encoder that reads its script, MiniLM
for English (Latin) text and the multilingual encoder (USE) for text with Chinese or another script
MiniLM cannot read, into one vector of both sizes side by side, the other half zero.

So the two encoders' vectors never meet: a cosine between two texts (or a query and a record) is
MiniLM's own when both are English, USE's own when both are not, and 0 across. A query is routed like
a record, so an English question ranks English records by MiniLM exactly as an English store does
(same cosines, same floor), and a Chinese question ranks Chinese records by USE as a Chinese store
does: the two sets are searched with their own encoders in one LanceDB search, with no score to
calibrate between them. Full-text search still finds words across the two."""

from __future__ import annotations

from collections import Counter
from typing import Callable, Protocol

import numpy as np

from ..textutil import count_scripts


class Half(Protocol):
    """Each of the mixed embedder's encoders: `embedder.Embedder`, restated here because that module
    imports this one."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def encode(self, texts: list[str]) -> np.ndarray: ...


# a text goes to the multilingual encoder when this share of its words (a CJK character is a word)
# is in scripts MiniLM cannot read: a Chinese sentence with English tool names or commands in it
ROUTE_SHARE = 0.2
# the part of a long text the route is decided from (the encoders read about this much anyway)
ROUTE_CHARS = 2048
SEPARATOR = "|"
# the halves' sizes (MiniLM, USE), known without loading either model: a Chinese query loads USE only
DIMS = (384, 512)


def reads_multilingual(text: str) -> bool:
    """Whether `text` goes to the multilingual encoder (see ROUTE_SHARE)."""
    counts: Counter[str] = count_scripts([text[:ROUTE_CHARS]])
    total = sum(counts.values())
    return bool(total) and (total - counts["latin"]) / total >= ROUTE_SHARE


def mixed_name(english: str, multilingual: str) -> str:
    """The name a mixed store's vectors are kept under: both encoders' names."""
    return f"{english}{SEPARATOR}{multilingual}"


def encoder_of(vectors: str, text: str) -> str:
    """The name of the encoder that embeds `text` in a store whose vectors are named `vectors`: in a
    mixed store the half its script routes it to (so a per-encoder similarity floor judges a query by
    the cosines it was ranked by), in any other store `vectors` itself."""
    english, sep, multilingual = vectors.partition(SEPARATOR)
    if not sep:
        return vectors
    return multilingual if reads_multilingual(text) else english


def side_by_side(
    texts: list[str], english: Callable[[list[str]], np.ndarray], multilingual: Callable[[list[str]], np.ndarray]
) -> np.ndarray:
    """Each text's vector from the encoder of its script, in that encoder's half; the other half 0."""
    routed = np.array([reads_multilingual(t) for t in texts], dtype=bool)
    vectors = np.zeros((len(texts), sum(DIMS)), dtype=np.float32)
    if (~routed).any():
        vectors[~routed, : DIMS[0]] = english([t for t, r in zip(texts, routed) if not r])
    if routed.any():
        vectors[routed, DIMS[0] :] = multilingual([t for t, r in zip(texts, routed) if r])
    return vectors


class MixedEmbedder:
    """Two embedders behind one `Embedder`: English text to `english`, the rest to `multilingual`
    (see the module's docstring). Each is asked only for its own texts, so a store without Chinese
    never loads the multilingual model, and one without English never loads MiniLM."""

    dim = sum(DIMS)

    def __init__(self, english: Half, multilingual: Half):
        self.english, self.multilingual = english, multilingual
        self.name = mixed_name(english.name, multilingual.name)

    def encode(self, texts: list[str]) -> np.ndarray:
        return side_by_side(texts, self.english.encode, self.multilingual.encode)
