"""The cross-encoder judge (`--judge cross_encoder --model DIR`): a FlagEmbedding reranker's
relevance score, cut into grades by thresholds.

A cross-encoder is a cheap judge (no endpoint, no tokens to pay for, a CPU will do), but its
score is a logit with no fixed meaning, so grades come from thresholds t_1 <= ... <= t_M, one
per grade above 0 of the evaluation set's scale (`--grades`, M its top grade): the grade is
the number of thresholds the score reaches. `--calibrate` chooses them on half of the pairs
people labelled and reports the agreement on the other half (`judge.calibrate`); a judging run
takes them as `--thresholds` or from that calibration's file (`--calibration`).

The model is found and loaded as the rerank stage's (`stages.rerank`: a local directory, or a
hub id from the local cache; offline). Scores are cached per pair (the key holds the model's
file fingerprint, not the thresholds), so new thresholds re-grade without scoring again; pairs
are scored in chunks of `CHUNK`, each chunk cached as it is done, so a killed run resumes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval_bench.config.stages import RerankConfig
from retrieval_bench.errors import ConfigError, EncoderUnavailable
from retrieval_bench.judge.base import Done, Pair, ScoreJudge, Verdict
from retrieval_bench.stages.rerank import CrossEncoderReranker
from retrieval_bench.tiebreak import TieBreak

CHUNK = 256


class CrossEncoderJudge(ScoreJudge):
    """A `judge.base.Judge` from a cross-encoder's scores (module docstring). Without
    thresholds every verdict carries the score and no grade (what calibration fits on)."""

    kind = "cross_encoder"

    def __init__(
        self,
        model_dir: str,
        thresholds: Sequence[float] | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
        devices: Sequence[str] = ("cpu",),
        model_key: str = "--model",
        length_key: str = "--max-length",
    ) -> None:
        """`max_length`: the tokens a pair is cut to; None: 512, or the model's own limit where
        that is lower (a value above it is taken down to it, saying so)."""
        cfg = RerankConfig(
            model=model_dir,
            batch_size=batch_size,
            max_length=RerankConfig().max_length if max_length is None else max_length,
            devices=list(devices),
        )
        try:
            self.reranker = CrossEncoderReranker(
                cfg, (), TieBreak([]), length_key, asked=max_length is not None
            )
        except EncoderUnavailable as exc:
            raise ConfigError(
                model_key,
                f"no cross-encoder at {model_dir!r} ({exc}); give a local copy of a FlagEmbedding "
                "reranker such as BAAI/bge-reranker-v2-m3, or judge with --judge openai",
            ) from None
        self.model = self.reranker.resolved.name
        self.thresholds = list(thresholds) if thresholds is not None else None

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model,
            "weights": self.reranker.resolved.fingerprint,
            "max_length": self.reranker.max_length,
            "thresholds": self.thresholds,
        }

    def cache_key(self, pair: Pair) -> list[str]:
        """The pair, the model's files and the tokens a pair is cut to: a pair longer than the
        cut scores differently at another `max_length`, so its score is another answer."""
        cut = f"max_length={self.reranker.max_length}"
        return [
            pair.query,
            pair.passage,
            "cross-encoder score",
            self.reranker.resolved.fingerprint,
            cut,
        ]

    def judge(self, pairs: Sequence[Pair], done: Done) -> None:
        for start in range(0, len(pairs), CHUNK):
            chunk = pairs[start : start + CHUNK]
            scores = self.reranker.score([(p.query, p.passage) for p in chunk])
            for offset, score in enumerate(scores.tolist()):
                done(start + offset, Verdict(self.grade_of(score), float(score)))
