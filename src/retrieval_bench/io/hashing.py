"""Content keys: feeding texts and bytes to a hashlib digest so that different inputs never feed
the same bytes (each part length-prefixed). The on-disk caches' keys are built with these."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def update_len_prefixed(digest: Any, data: bytes) -> None:
    """Feed `data` to a hashlib digest after its 8-byte length, so concatenations cannot collide."""
    digest.update(len(data).to_bytes(8, "little"))
    digest.update(data)


def update_texts(digest: Any, texts: Sequence[str]) -> None:
    """Feed a list of texts to a digest: their count, then each one's UTF-8 length-prefixed
    (`["ab", "c"]` and `["a", "bc"]` differ). The content key of the on-disk caches."""
    digest.update(len(texts).to_bytes(8, "little"))
    for text in texts:
        update_len_prefixed(digest, text.encode("utf-8", errors="surrogatepass"))
