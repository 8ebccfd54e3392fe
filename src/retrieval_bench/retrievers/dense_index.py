"""The FAISS index behind the dense arm, chosen by a factory string (`arms.dense.index`).

`Flat` (the default) is exact: cosine similarity as inner product over L2-normalised vectors.
For large corpora any FAISS factory string works, e.g. `HNSW32`, `IVF1024,Flat`,
`IVF1024,PQ64` or `OPQ64,IVF1024,PQ64`; the metric is always inner product, and indexes that
need training (IVF, PQ) are trained on the corpus vectors (FAISS subsamples large sets).

Filters are FAISS id selectors passed in the search parameters of the index's family (plain,
`SearchParametersIVF` with `nprobe`, `SearchParametersHNSW` with `efSearch`), so a filtered
query is ranked among allowed passages only. An index that cannot take a selector (e.g. plain
`PQ`) is refused when a filter is asked for, never answered by over-fetching and dropping.

A built index is kept per process, keyed by the vectors' content key and the index settings,
so the jobs of a multirun build it once.

FAISS's factory turns on polysemous training for every `PQ` and `IVF...,PQ` index: after
k-means it anneals a renumbering of each sub-quantizer's centroids, which only a polysemous
search (Hamming filtering, `search_type = ST_polysemous` or `polysemous_ht`) uses. The arm
searches by plain ADC, where the renumbering changes no distance (only, at float32 rounding,
where BLAS sums a centroid's row), so it is turned off (`_new_index`): `PQ8` on 300 x 512
vectors trains, fills and searches in 0.023 s instead of 16.9 s, with the same ids
(`benchmarks/bench_pq.py`: 746x, BENCHMARKS.md; tests/unit/retrievers/test_dense_index.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import faiss
import numpy as np

from retrieval_bench.config.dense import DenseIndexConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.progress import progress

log = logging.getLogger(__name__)
# The config node errors about an index name by default: the shipped dense arm's.
DEFAULT_PREFIX = "arms.dense."

_MEMO_SIZE = 2
_ADD_CHUNK = 20_000  # vectors per index.add call: an HNSW graph grows slowly enough to report
_IVF_RE = re.compile(r"IVF(\d+)")
_PQ_RE = re.compile(r"PQ(\d+)(?:x(\d+))?")
_MEMO: OrderedDict[tuple[Any, ...], FaissIndex] = OrderedDict()


def _core(index: faiss.Index) -> faiss.Index:
    """The index under any pre-transforms (PCA, OPQ...) and refinement (`...,RFlat`)."""
    index = faiss.downcast_index(index)
    while True:
        if isinstance(index, faiss.IndexPreTransform):
            index = faiss.downcast_index(index.index)
        elif isinstance(index, faiss.IndexRefine):
            index = faiss.downcast_index(index.base_index)
        else:
            return index


class FaissIndex:
    """A trained and filled inner-product FAISS index and the search parameters it takes."""

    def __init__(
        self, vectors: np.ndarray, config: DenseIndexConfig, prefix: str = DEFAULT_PREFIX
    ) -> None:
        self.config = config
        # The arm's node (`arms.dense.`), which errors about its index name.
        self.prefix = prefix
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n, dim = vectors.shape
        start = time.perf_counter()
        index = _new_index(dim, config, prefix)
        if not index.is_trained:
            train = vectors
            if 0 < config.train_size < n:
                pick = np.random.default_rng(0).choice(n, config.train_size, replace=False)
                train = vectors[np.sort(pick)]
            log.info("training FAISS index %r on %d vectors", config.index, len(train))
            printed: list[str] = []
            try:
                with _faiss_output(printed):
                    index.train(train)
                log.info("trained %r in %.1f s", config.index, time.perf_counter() - start)
            except RuntimeError as exc:
                raise ConfigError(
                    f"{prefix}index",
                    f"training {config.index!r} on {len(train)} passages failed: "
                    f"{_faiss_message(exc)} "
                    "(an IVF index needs at least as many passages as lists, PQ at least 256)",
                ) from exc
            finally:
                _log_once(printed)
        with progress(f"adding passages to {config.index!r}", n, "passage") as bar:
            for first in range(0, n, _ADD_CHUNK):
                index.add(vectors[first : first + _ADD_CHUNK])
                bar.update(min(_ADD_CHUNK, n - first))
        self.build_s = time.perf_counter() - start
        self._adopt(index, vectors[:1])
        self.ntotal = n
        self.reused = False

    def _adopt(self, index: faiss.Index, probe: np.ndarray) -> None:
        """Take a trained, filled index: note its family and whether it accepts selectors."""
        self.index = index
        core = _core(index)
        self.exact = isinstance(index, faiss.IndexFlat)
        self.ivf = faiss.try_extract_index_ivf(index) is not None
        self.hnsw = isinstance(core, faiss.IndexHNSW)
        outer = faiss.downcast_index(index)
        # A refinement re-scores its base index's candidates exactly; the base's parameters
        # (nprobe, efSearch, the selector) travel inside the refinement's own.
        self.refine_k_factor = outer.k_factor if isinstance(outer, faiss.IndexRefine) else None
        self.supports_selector = self._try_selector(probe)

    def _try_selector(self, probe: np.ndarray) -> bool:
        if len(probe) == 0:
            return True
        selector = faiss.IDSelectorBatch(np.zeros(1, dtype=np.int64))
        try:
            self.search(probe, 1, selector)
        except RuntimeError:
            return False
        return True

    def params(self, fetch: int, selector: faiss.IDSelector | None) -> Any:
        """Search parameters for this index family, carrying the filter's selector if any."""
        base = self._base_params(fetch, selector)
        if self.refine_k_factor is None or base is None:
            return base
        return faiss.IndexRefineSearchParameters(
            k_factor=self.refine_k_factor, base_index_params=base
        )

    def _base_params(self, fetch: int, selector: faiss.IDSelector | None) -> Any:
        if self.ivf:
            return faiss.SearchParametersIVF(sel=selector, nprobe=self.config.nprobe)
        if self.hnsw:
            return faiss.SearchParametersHNSW(
                sel=selector, efSearch=max(self.config.ef_search, fetch)
            )
        return None if selector is None else faiss.SearchParameters(sel=selector)

    def selector(self, mask: np.ndarray | None) -> faiss.IDSelector | None:
        """The id selector for a filter mask (None: no filter); refused when the index cannot
        take one, so a filter is never applied after ranking."""
        if mask is None:
            return None
        if not self.supports_selector:
            raise ConfigError(
                f"{self.prefix}index",
                f"{self.config.index!r} does not accept FAISS id selectors, so a filter cannot "
                "be applied before ranking; use Flat, HNSW<M> or IVF<n>,... (or filters off)",
            )
        return faiss.IDSelectorBatch(np.flatnonzero(mask).astype(np.int64))

    def search(
        self, vectors: np.ndarray, fetch: int, selector: faiss.IDSelector | None
    ) -> tuple[np.ndarray, ...]:
        """(scores, indices) of the best `fetch` per row, among the selector's ids if any."""
        return self.index.search(vectors, fetch, params=self.params(fetch, selector))

    def nbytes(self) -> int:
        """The index's size as faiss.write_index writes it (its vectors or codes, lists and
        graph: what it holds in memory, give or take a header)."""
        return int(faiss.serialize_index(self.index).nbytes)

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "factory": self.config.index,
            "exact": self.exact,
            "metric": "inner_product",
            "ntotal": self.ntotal,
            "build_s": round(self.build_s, 4),
            "reused_in_process": self.reused,
        }
        if self.ivf:
            info["nprobe"] = self.config.nprobe
        if self.config.train_size:
            info["train_size"] = self.config.train_size
        if self.hnsw:
            info["ef_search"] = self.config.ef_search
        return info


def _new_index(dim: int, config: DenseIndexConfig, prefix: str = DEFAULT_PREFIX) -> faiss.Index:
    """An empty index for `config.index`, without polysemous training (module docstring)."""
    try:
        index = faiss.index_factory(dim, config.index, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise ConfigError(
            f"{prefix}index",
            f"FAISS cannot build {config.index!r} for {dim}-d vectors: "
            f"{_faiss_message(exc)} (try Flat, HNSW32 or IVF<n>,Flat)",
        ) from exc
    without_polysemous_training(index)
    return index


def without_polysemous_training(index: faiss.Index) -> None:
    """Turn off polysemous training in `index` and every index it wraps (a pre-transform's,
    an id map's, a refinement's base)."""
    index = faiss.downcast_index(index)
    if hasattr(index, "do_polysemous_training"):
        index.do_polysemous_training = False
    for inner in ("index", "base_index"):
        if hasattr(index, inner):
            without_polysemous_training(getattr(index, inner))


def training_needs(factory: str) -> tuple[int, str]:
    """The fewest training vectors a factory string can be trained on, and why: FAISS's
    k-means refuses fewer points than centroids (IVF lists; 2^nbits per PQ sub-quantizer)."""
    needs = [(0, "")]
    for match in _IVF_RE.finditer(factory):
        needs.append((int(match[1]), f"{match[1]} IVF lists"))
    for match in _PQ_RE.finditer(factory):
        centroids = 2 ** int(match[2] or 8)
        needs.append((centroids, f"{centroids} centroids per PQ sub-quantizer"))
    return max(needs)


def check_index_fits(
    config: DenseIndexConfig,
    n_passages: int,
    dim: int | None,
    filters: Sequence[str],
    prefix: str = DEFAULT_PREFIX,
) -> None:
    """Refuse an index (`<prefix>index`) this job cannot use, before anything is encoded or
    trained.

    Two refusals are known from the config and the corpus alone: an index that needs more
    training vectors than the corpus (or `train_size`) gives, and, when this job filters
    (`filters` names which filters may apply), an index that cannot take a FAISS id selector.
    The second is probed on a throwaway index of the encoder's dimension `dim` (None: not
    known, the check waits for the real index), trained on a few random vectors.
    """
    needed, why = training_needs(config.index)
    available = config.train_size if 0 < config.train_size < n_passages else n_passages
    if available < needed:
        source = (
            f"{prefix}train_size={config.train_size}"
            if available < n_passages
            else f"the corpus has {n_passages} passages"
        )
        raise ConfigError(
            f"{prefix}index",
            f"{config.index!r} needs at least {needed} training vectors ({why}), but {source}; "
            f"use Flat, HNSW32 or IVF<n>,Flat with n <= {max(1, available // 39)} "
            "(FAISS wants 39 vectors per list)",
        )
    if dim is None or not filters:
        return
    index = _new_index(dim, config, prefix)
    sample = np.random.default_rng(0).standard_normal((max(needed, 1), dim)).astype(np.float32)
    if not index.is_trained:
        try:
            with _faiss_output([]):  # a throwaway index: its training warnings do not matter
                index.train(sample)
        except RuntimeError:
            return  # cannot tell here; the real index is checked when it is built
    index.add(sample[:1])
    probe = FaissIndex.__new__(FaissIndex)
    probe.config = config
    probe.prefix = prefix
    probe._adopt(index, sample[:1])
    if not probe.supports_selector:
        raise ConfigError(
            f"{prefix}index",
            f"{config.index!r} does not accept FAISS id selectors, and this job filters "
            f"({', '.join(filters)}) before ranking; use Flat, HNSW<M> or IVF<n>,... "
            f"(or turn those filters off: {', '.join(f'filters.{f}=false' for f in filters)})",
        )


@contextlib.contextmanager
def _faiss_output(printed: list[str]) -> Iterator[None]:
    """Collect what FAISS's C++ code prints to file descriptor 2 meanwhile into `printed`.

    FAISS writes its warnings (e.g. one "WARNING clustering 304 points to 256 centroids" per
    PQ sub-quantizer) with fprintf, past Python's sys.stderr, so they are taken off the
    descriptor here and logged once each by `_log_once`."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                sink.seek(0)
                printed.extend(sink.read().decode("utf-8", "replace").splitlines())
    finally:
        os.close(saved)


def _log_once(printed: Sequence[str]) -> None:
    """Each distinct line FAISS printed, once, with how many times it was printed."""
    for line, count in Counter(line.strip() for line in printed if line.strip()).items():
        log.warning("FAISS: %s%s", line, f" (printed {count} times)" if count > 1 else "")


def _faiss_message(exc: Exception) -> str:
    """The useful last line of a FAISS C++ error."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    # Drop the C++ location ("Error in void faiss::...(...) at File.cpp:66: Error: ").
    return re.sub(r"^Error in .* at \S+:\d+: (Error: )?", "", lines[-1])


def build_index(
    vectors: np.ndarray, config: DenseIndexConfig, key: str | None, prefix: str = DEFAULT_PREFIX
) -> FaissIndex:
    """A FaissIndex for `vectors`, reused within the process when `key` (their content hash)
    and the settings that shape the index match; errors name `<prefix>index` (the arm's)."""
    if key is None:
        return FaissIndex(vectors, config, prefix)
    memo_key = (key, vectors.shape, config.index, config.train_size)
    found = _MEMO.get(memo_key)
    if found is not None:
        _MEMO.move_to_end(memo_key)
        log.info("reusing the %s index built earlier in this process", config.index)
        # Same trained index; search-time settings (nprobe, ef_search) come from this job.
        clone = FaissIndex.__new__(FaissIndex)
        clone.__dict__.update(found.__dict__)
        clone.config = config
        clone.prefix = prefix
        clone.reused = True
        return clone
    index = FaissIndex(vectors, config, prefix)
    _MEMO[memo_key] = index
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return index
