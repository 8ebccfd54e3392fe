"""Dense vectors with the shape of real text embeddings, at any corpus size.

Shared by the scale benchmark (FAISS index families at 10k-1M) and the end-to-end benchmark
(a whole dense job from precomputed vectors). Vectors are sampled around anchors: real USE
embeddings of cmrc2018's passages and questions when the encoder and ../shared are available
(cached in outputs/cache/embeddings after the first run), Gaussian anchors otherwise. The noise
is drawn from the anchors' own covariance (their principal directions scaled by their spread), so
neighbourhoods have the shape of text embeddings rather than of isotropic noise.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from chinese_corpus import CMRC

ROOT = Path(__file__).resolve().parents[1]
_CHUNK = 100_000


def anchors(dim: int, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """(passage anchors, query anchors, source): real USE vectors of cmrc2018 when possible."""
    rng = np.random.default_rng(seed)
    if dim == 512 and (CMRC / "corpus.jsonl").exists():
        try:
            from retrieval_bench.encoders import EncoderConfig, build_encoder
            from retrieval_bench.encoders.cache import EmbeddingCache

            cache = EmbeddingCache(ROOT / "outputs" / "cache" / "embeddings")
            encoder = build_encoder(EncoderConfig())
            lines = (CMRC / "corpus.jsonl").open(encoding="utf-8")
            docs = [json.loads(line) for line in lines]
            texts = [f"{d.get('title', '')}\n{d['text']}" for d in docs]
            lines = (CMRC / "queries.jsonl").open(encoding="utf-8")
            questions = [json.loads(line)["text"] for line in lines]
            p, _ = cache.encode(encoder, texts, "passages")
            q, _ = cache.encode(encoder, questions, "queries")
            return p, q, "USE vectors of cmrc2018 (embedding cache)"
        except Exception as exc:  # the encoder is optional here; say why it was skipped
            print(f"note: USE anchors unavailable ({exc}); using Gaussian anchors")
    p = rng.standard_normal((1104, dim)).astype(np.float32)
    q = rng.standard_normal((1000, dim)).astype(np.float32)
    return p, q, "Gaussian anchors"


@dataclass(frozen=True)
class VectorSpace:
    """Anchors and the noise basis that sample_around draws from."""

    passages: np.ndarray
    queries: np.ndarray
    basis: np.ndarray
    source: str

    @classmethod
    def build(cls, dim: int, seed: int = 0) -> VectorSpace:
        base_p, base_q, source = anchors(dim, seed)
        both = np.concatenate([base_p, base_q])
        centred = both - both.mean(0)
        # Noise basis: the anchors' principal directions scaled by their spread.
        _, sv, vt = np.linalg.svd(centred, full_matrices=False)
        basis = (vt * (sv[:, None] / math.sqrt(len(centred)))).astype(np.float32)
        return cls(base_p, base_q, basis, source)


def sample_around(
    base: np.ndarray,
    n: int,
    noise: float,
    rng: np.random.Generator,
    basis: np.ndarray,
    rows_of: np.ndarray | None = None,
) -> np.ndarray:
    """n unit vectors: an anchor (random, or `base[rows_of[i]]`) plus noise shaped by `basis`."""
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    for start in range(0, n, _CHUNK):
        rows = min(_CHUNK, n - start)
        z = rng.standard_normal((rows, basis.shape[0])).astype(np.float32)
        stop = start + rows
        pick = rng.integers(0, len(base), rows) if rows_of is None else rows_of[start:stop]
        chunk = base[pick] + noise * (z @ basis)
        chunk /= np.linalg.norm(chunk, axis=1, keepdims=True)
        out[start : start + rows] = chunk
    return out
