"""What the dense retriever needs from an encoder, whichever model family is behind it."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class Encoder(Protocol):
    """Turns text into float32 L2-normalised row vectors.

    `identity()` holds everything that changes the vectors (model, path, pooling, max length,
    instruction, precision); the embedding cache keys on it, so two encoders with equal identity
    must produce the same vectors.
    """

    def identity(self) -> dict[str, Any]: ...

    def dimension(self) -> int | None:
        """The vector size, known without encoding (None: only encoding tells)."""
        ...

    def encode_passages(self, texts: list[str]) -> np.ndarray: ...

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...
