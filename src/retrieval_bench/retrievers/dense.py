"""The dense arm: cosine similarity over L2-normalised vectors in a FAISS index.

The index is exact `Flat` (IndexFlatIP) unless `arms.<name>.index` names another FAISS factory
string (see dense_index.py); an approximate index also keeps an exact Flat index when
`arms.<name>.recall_vs_exact` is on, and `index_info()` reports recall@k of the approximate pools
against the exact ones. Filters go into FAISS as an id selector, so the pool is ranked among
allowed passages only (never over-fetched and dropped).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import faiss
import numpy as np

from retrieval_bench.config.dense import DenseArmConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.plugins import with_overrides
from retrieval_bench.progress import progress
from retrieval_bench.protocols import Arm, BuildContext
from retrieval_bench.records import Ranked
from retrieval_bench.retrievers.base import TextArm
from retrieval_bench.retrievers.dense_index import (
    DEFAULT_PREFIX,
    DenseIndexConfig,
    FaissIndex,
    build_index,
    check_index_fits,
)
from retrieval_bench.tiebreak import shared_tie_break


class DenseRetriever:
    name = "dense"

    def __init__(
        self,
        passage_ids: Sequence[str],
        passage_vectors: np.ndarray,
        encode_queries: Callable[[list[str]], np.ndarray],
        config: DenseIndexConfig | None = None,
        vectors_key: str | None = None,
        encode_fresh: Callable[[list[str]], np.ndarray] | None = None,
        build: Mapping[str, Any] | None = None,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        """`encode_fresh`: the encoder itself, past any cache (`time_query` times it; default
        `encode_queries`); `build`: what getting the passage vectors cost (job.cost); `prefix`:
        the arm's node (`arms.dense.`), which errors about its index name."""
        config = config or DenseIndexConfig()
        vectors = np.ascontiguousarray(passage_vectors, dtype=np.float32)
        self.index = build_index(vectors, config, vectors_key, prefix)
        self.exact_index: FaissIndex | None = None
        if not self.index.exact and config.recall_vs_exact:
            self.exact_index = build_index(vectors, DenseIndexConfig(), vectors_key)
        # recall_vs_exact@k: k -> [sum over queries of |approx & exact| / |exact|, queries]
        self._recall: dict[int, list[float]] = {}
        self.encode_queries = encode_queries
        self.encode_fresh = encode_fresh or encode_queries
        self.build = dict(build or {})
        self.tie_break = shared_tie_break(passage_ids)
        self.n_passages = len(passage_ids)
        # The batch run's split: seconds encoding queries, seconds searching, queries.
        self.batch = {"encode_s": 0.0, "search_s": 0.0, "queries": 0}

    def search(
        self, queries: Sequence[str], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        start = time.perf_counter()
        vectors = np.ascontiguousarray(self.encode_queries(list(queries)), dtype=np.float32)
        encoded = time.perf_counter()
        results = self.search_vectors(vectors, k, allowed)
        self.batch["encode_s"] += encoded - start
        self.batch["search_s"] += time.perf_counter() - encoded
        self.batch["queries"] += len(queries)
        return results

    def time_query(self, query: str, k: int, mask: np.ndarray | None) -> dict[str, float]:
        """One query timed as it is served: encoded by the encoder itself, past the embedding
        cache (`encode_ms`), then searched (`search_ms`); recall against exact is not counted."""
        start = time.perf_counter()
        vector = np.ascontiguousarray(self.encode_fresh([query]), dtype=np.float32)
        encoded = time.perf_counter()
        self.search_vectors(vector, k, [mask], check_exact=False)
        done = time.perf_counter()
        return {"encode_ms": 1000 * (encoded - start), "search_ms": 1000 * (done - encoded)}

    def search_vectors(
        self,
        vectors: np.ndarray,
        k: int,
        allowed: Sequence[np.ndarray | None],
        check_exact: bool = True,
    ) -> list[Ranked]:
        """Rank for query vectors (one row per query); with an approximate index and
        `check_exact`, also search exactly and count recall against it."""
        results: list[Ranked | None] = [None] * len(vectors)
        # One FAISS call per distinct filter: most queries share "no filter" or a city.
        groups: dict[bytes | None, list[int]] = {}
        masks: dict[bytes | None, np.ndarray | None] = {}
        for qi, mask in enumerate(allowed):
            key = None if mask is None else np.packbits(mask).tobytes()
            groups.setdefault(key, []).append(qi)
            masks[key] = mask
        with progress("ranking queries (dense)", len(vectors), "query") as bar:
            for key, members in groups.items():
                group = self._search_group(self.index, vectors[members], k, masks[key])
                for qi, ranked in zip(members, group, strict=True):
                    results[qi] = ranked
                if self.exact_index is not None and check_exact:
                    exact = self._search_group(self.exact_index, vectors[members], k, masks[key])
                    self._add_recall(k, group, exact)
                bar.update(len(members))
        return [r for r in results if r is not None]

    def _add_recall(self, k: int, approx: list[Ranked], exact: list[Ranked]) -> None:
        total = self._recall.setdefault(k, [0.0, 0])
        for a, e in zip(approx, exact, strict=True):
            if len(e.indices):
                total[0] += len(np.intersect1d(a.indices, e.indices)) / len(e.indices)
                total[1] += 1

    def index_info(self) -> dict[str, Any]:
        """For the manifest: the index, and recall@k of its pools against exact Flat ones."""
        info = self.index.describe()
        for k, (found, n) in sorted(self._recall.items()):
            info[f"recall_vs_exact@{k}"] = found / n if n else None
            info["recall_queries"] = n
        info["cost"] = self.cost()
        return info

    def cost(self) -> dict[str, Any]:
        """What the index cost (job.cost's per-arm record): encoding the passages is the
        "prepare" step (`build`, from the spec), the FAISS index its index; the index's bytes
        are what faiss.write_index would write (the exact check index included)."""
        indexes = [self.index, *([self.exact_index] if self.exact_index is not None else [])]
        return {
            "prepare": "encode passages",
            **self.build,
            "passages": self.n_passages,
            "index_s": round(self.index.build_s, 4),
            "index_reused": self.index.reused,
            "index_bytes": sum(index.nbytes() for index in indexes),
            "batch_encode_s": round(self.batch["encode_s"], 6),
            "batch_search_s": round(self.batch["search_s"], 6),
            "batch_queries": self.batch["queries"],
        }

    def _search_group(
        self, index: FaissIndex, vectors: np.ndarray, k: int, mask: np.ndarray | None
    ) -> list[Ranked]:
        n_allowed = self.n_passages if mask is None else int(mask.sum())
        selector = index.selector(mask)
        out = []
        # Fetch one extra: a tie at the cut must be broken by id, as everywhere else, so the
        # fetch grows until the last fetched score falls below the k-th (or nothing is left).
        fetch = min(k + 1, n_allowed)
        scores, indices = self._raw_search(index, vectors, fetch, selector)
        for row, vector in enumerate(vectors):
            sc, idx = scores[row], indices[row]
            row_fetch = fetch
            while (
                len(idx) == row_fetch
                and row_fetch < n_allowed
                and len(idx) > k
                and sc[-1] == sc[k - 1]
            ):
                row_fetch = min(2 * row_fetch, n_allowed)
                sc, idx = (
                    a[0] for a in self._raw_search(index, vector[None, :], row_fetch, selector)
                )
            top_idx, top_sc = self.tie_break.top(idx, sc, k)
            out.append(Ranked(indices=top_idx, scores=top_sc, requested=k))
        return out

    def _raw_search(
        self,
        index: FaissIndex,
        vectors: np.ndarray,
        fetch: int,
        selector: faiss.IDSelector | None,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        if fetch == 0:
            return [np.empty(0, np.float64)] * len(vectors), [np.empty(0, np.int64)] * len(vectors)
        scores, indices = index.search(vectors, fetch, selector)
        valid = indices >= 0
        return (
            [s[v].astype(np.float64) for s, v in zip(scores, valid, strict=True)],
            [i[v].astype(np.int64) for i, v in zip(indices, valid, strict=True)],
        )


@dataclasses.dataclass
class DenseArmSpec(DenseArmConfig):
    """`arms.<name>` of a dense arm: its keyword arguments are `config.dense.DenseArmConfig`'s
    fields (the FAISS index settings; `encoder`, overrides of the job's `encoder:` node for this
    arm). Passage vectors come from the embedding cache (or `encoder=precomputed` files); each
    query is encoded once per job."""

    def __post_init__(self) -> None:
        self.validate()  # a bad value fails when the config is read
        # Set by `check` (build calls it when build_arms did not): the encoder or the
        # precomputed vectors, and the job's encoder node with this arm's overrides.
        self._source: Any = None
        self._encoder_cfg: Any = None
        self._name = "dense"

    def check(self, name: str, ctx: BuildContext) -> None:
        """Load precomputed vectors, or make the encoder, and refuse an index that cannot take
        this job's filters: before any arm tokenises or encodes."""
        self._name = name
        try:
            self._check(ctx)
        except ConfigError as error:
            raise self._own_error(name, error) from error

    def _own_error(self, name: str, error: ConfigError) -> ConfigError:
        """A refused encoder value this arm set itself is named under `arms.<name>.encoder`,
        not under the job's `encoder` node it overrides."""
        node, _, rest = error.key.partition(".")
        if node == "encoder" and rest.partition(".")[0] in self.encoder:
            return ConfigError(f"arms.{name}.encoder.{rest}", error.message)
        return error

    def index_config(self) -> DenseIndexConfig:
        """This arm's index settings, as the FAISS code reads them."""
        return DenseIndexConfig(
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(DenseIndexConfig)}
        )

    def _check(self, ctx: BuildContext) -> None:
        from retrieval_bench.encoders import build_encoder, check_encoder_config, is_precomputed
        from retrieval_bench.encoders.precomputed import load_precomputed

        encoder_cfg = self._encoder_cfg = with_overrides(ctx.cfg.encoder, self.encoder)
        index_cfg = self.index_config()
        if is_precomputed(encoder_cfg):
            check_encoder_config(encoder_cfg)
            self._source = load_precomputed(
                encoder_cfg, ctx.ids, [(q.query_id, q.query) for q in ctx.queries]
            )
            dimension: int | None = self._source.passages.shape[1]
        else:
            encoder = self._source = build_encoder(encoder_cfg)
            # A refused vector is then named by its passage or query id.
            encoder.name_texts("passages", ctx.texts, ctx.ids)
            encoder.name_texts(
                "queries", [q.query for q in ctx.queries], [q.query_id for q in ctx.queries]
            )
            dimension = encoder.dimension()
        check_index_fits(
            index_cfg, len(ctx.ids), dimension, ctx.possible_filters, f"arms.{self._name}."
        )

    def build(self, name: str, ctx: BuildContext) -> Arm:
        from retrieval_bench.encoders.cache import EmbeddingCache
        from retrieval_bench.encoders.precomputed import PrecomputedVectors
        from retrieval_bench.encoders.shards import encode_sharded

        if self._source is None:
            self.check(name, ctx)
        encoder_cfg, index_cfg = self._encoder_cfg, self.index_config()
        prefix = f"arms.{name}."
        # Encode counts of every dense arm of the job, added up (manifest `embeddings`).
        embeddings: dict[str, dict[str, int]] = ctx.stats.setdefault("embeddings", {})
        if isinstance(self._source, PrecomputedVectors):
            source = self._source
            _add(embeddings, "passages", {"encoded": 0, "cached": 0, "precomputed": len(ctx.ids)})
            build = {"prepare_source": "precomputed", "prepare_s": 0.0, "prepare_cold_s": None}
            return TextArm(
                DenseRetriever(
                    ctx.ids,
                    source.passages,
                    source.encode_queries,
                    index_cfg,
                    source.key,
                    build=build,
                    prefix=prefix,
                )
            )
        encoder = self._source
        cache = EmbeddingCache(ctx.cache_dir / "embeddings")
        start = time.perf_counter()
        if encoder_cfg.shards > 1 or encoder_cfg.require_shards:
            vectors, stats = encode_sharded(
                cache, encoder, ctx.texts, encoder_cfg.shards, encoder_cfg.require_shards
            )
        else:
            vectors, stats = cache.encode(encoder, ctx.texts, "passages")
        build = {
            "prepare_s": round(time.perf_counter() - start, 4),
            "prepare_source": "cache" if stats.encoded == 0 else "computed",
            "prepare_cold_s": None if stats.cold_seconds is None else round(stats.cold_seconds, 4),
            "disk_bytes": stats.disk_bytes,
        }
        _add(embeddings, "passages", {"encoded": stats.encoded, "cached": stats.cached})

        def encode_queries(queries: list[str]) -> Any:
            # A batch may hold a text twice (a query ranked under two filters): encode it once.
            unique = list(dict.fromkeys(queries))
            query_vectors, query_stats = cache.encode(encoder, unique, "queries")
            _add(
                embeddings,
                "queries",
                {"encoded": query_stats.encoded, "cached": query_stats.cached},
            )
            if len(unique) == len(queries):
                return query_vectors
            row = {text: i for i, text in enumerate(unique)}
            return query_vectors[[row[text] for text in queries]]

        return TextArm(
            DenseRetriever(
                ctx.ids,
                vectors,
                encode_queries,
                index_cfg,
                stats.key,
                encode_fresh=lambda texts: encoder.encode_queries(list(texts)),
                build=build,
                prefix=prefix,
            )
        )


def _add(record: dict[str, dict[str, int]], key: str, counts: dict[str, int]) -> None:
    totals = record.setdefault(key, {})
    for name, count in counts.items():
        totals[name] = totals.get(name, 0) + count
