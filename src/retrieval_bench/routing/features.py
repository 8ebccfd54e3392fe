"""Per-query features a learned router reads: cheap, computed from the query, its parse, the
corpus's term statistics and what each arm returned, and recorded in rankings.jsonl
(`QueryRecord.features`) so every routing decision can be explained.

Pre-retrieval (the query alone, and the corpus's statistics of its terms):

- `query.chars` (characters that carry meaning), `query.tokens` (the job's tokenizer), the
  script mix (`query.han`, `query.latin`, `query.digit`: shares of those characters);
- from the parse: `query.entities`, `query.aliases` (mentions written as an alias, not the
  canonical name), `query.cities`, `query.negation_cues`, `query.excluded` (entities and
  cities a cue excluded), and, with rules, the rules router's guess as one indicator per
  route (`route.<name>`);
- term statistics (N passages, df_t passages holding term t, cf_t its occurrences, |C| tokens
  in the corpus), over the query's tokens that occur in the corpus:
  `terms.oov` (share of the query's tokens the corpus lacks),
  `terms.max_idf`, `terms.mean_idf` with idf_t = ln(N / df_t) (the max/avg IDF predictors of
  He & Ounis, "Inferring query performance using pre-retrieval predictors", SPIRE 2004),
  `terms.max_scq`, `terms.mean_scq`, `terms.sum_scq` with SCQ_t = (1 + ln cf_t) ln(1 + N / df_t)
  (Zhao, Scholer & Tsegay, "Effective pre-retrieval query performance prediction using
  similarity and variability evidence", ECIR 2008),
  `terms.clarity`, the simplified clarity score SCS = sum_t P(t|q) log2(P(t|q) / P(t|C)),
  P(t|q) = qtf_t / |q|, P(t|C) = cf_t / |C| (He & Ounis 2004, the pre-retrieval form of
  Cronen-Townsend, Zhou & Croft's clarity, SIGIR 2002).

Post-retrieval, per arm `a`, from its pool's scores s_1 >= s_2 >= ... >= s_n (n returned, k =
min(`depth`, n)); any arm's pool works, an outside arm's too:

- `a.top` = s_1 (a dense arm's: the top-1 similarity), `a.gap` = s_1 - s_k, `a.gap12` = s_1 -
  s_2 (0 with one result), `a.spread` = the standard deviation of s_1..s_k (population);
- `a.nqc` = spread / |s_D|: Normalized Query Commitment (Shtok, Kurland, Carmel, Raiber &
  Markovits, "Predicting query performance by query-drift estimation", TOIS 2012), where s_D,
  the score of the whole corpus as one document, is replaced by the mean score of the arm's
  whole pool (an arbitrary arm exposes no corpus score); 0 when that mean is 0;
- `a.wig` = (mean(s_1..s_k) - s_D) / sqrt(|q|): Weighted Information Gain (Zhou & Croft,
  "Query performance prediction in web search environments", SIGIR 2007), with the same s_D
  (so it measures how far the top k stand above the rest of the pool) and |q| the query's
  token count (1 when it has none);

and per pair of arms `a~b` (in the job's arm order), over their top k:

- `a~b.jaccard` = |A_k & B_k| / |A_k | B_k|;
- `a~b.rbo`: rank-biased overlap at persistence p = 0.9 (Webber, Moffat & Zobel, "A similarity
  measure for indefinite rankings", TOIS 2010), extrapolated from the two prefixes of equal
  depth d = min(k, |A|, |B|) (their eq. 32): RBO_ext = (X_d / d) p^d + ((1 - p) / p)
  sum_{i=1..d} (X_i / i) p^i, X_i = |A_{:i} & B_{:i}|; 1 for identical prefixes, 0 for
  disjoint ones;
- `a~b.top1` = 1 when both arms rank the same passage first.

A feature that cannot be computed is None: an arm returned nothing (its pool is empty), so its
score statistics and its overlaps do not exist. The router then answers that query with its
fallback strategy and counts it (routing.learned).
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from retrieval_bench.records import ParsedQuery
from retrieval_bench.text.tokenizer import normalise

# Rank-biased overlap's persistence: the top 10 carry ~86% of the weight.
RBO_P = 0.9
# How deep the score and overlap statistics look: k of the module docstring (no setting).
DEFAULT_DEPTH = 5

QUERY_FEATURES = (
    "query.chars",
    "query.tokens",
    "query.han",
    "query.latin",
    "query.digit",
    "query.entities",
    "query.aliases",
    "query.cities",
    "query.negation_cues",
    "query.excluded",
)
TERM_FEATURES = (
    "terms.oov",
    "terms.max_idf",
    "terms.mean_idf",
    "terms.max_scq",
    "terms.mean_scq",
    "terms.sum_scq",
    "terms.clarity",
)
ARM_FEATURES = ("top", "gap", "gap12", "spread", "nqc", "wig")
PAIR_FEATURES = ("jaccard", "rbo", "top1")


def feature_names(arms: Sequence[str], routes: Sequence[str] = ()) -> list[str]:
    """Every feature's name, in the order a model reads them, for these arms and rule routes."""
    names = [*QUERY_FEATURES, *(f"route.{r}" for r in routes), *TERM_FEATURES]
    names += [f"{arm}.{f}" for arm in arms for f in ARM_FEATURES]
    names += [f"{a}~{b}.{f}" for a, b in combinations(arms, 2) for f in PAIR_FEATURES]
    return names


@dataclass(frozen=True)
class TermStatistics:
    """A corpus's term statistics: passages (N), tokens (|C|), and per term its document
    frequency (df) and collection frequency (cf)."""

    passages: int
    tokens: int
    df: Mapping[str, int]
    cf: Mapping[str, int]

    @classmethod
    def from_term_ids(
        cls, vocab: Sequence[str], ids: np.ndarray, lengths: np.ndarray
    ) -> TermStatistics:
        """From a tokenised corpus (text.token_cache.TokenizedCorpus's arrays): passage j's
        tokens are `vocab[i]` for the next `lengths[j]` of `ids`."""
        ids = np.asarray(ids, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        cf = np.bincount(ids, minlength=len(vocab))
        passage_of = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        pairs = np.unique(passage_of * max(len(vocab), 1) + ids)
        df = np.bincount(pairs % max(len(vocab), 1), minlength=len(vocab))
        return cls(
            passages=len(lengths),
            tokens=int(lengths.sum()),
            df=dict(zip(vocab, df.tolist(), strict=True)),
            cf=dict(zip(vocab, cf.tolist(), strict=True)),
        )

    @classmethod
    def from_tokens(cls, passages: Sequence[Sequence[str]]) -> TermStatistics:
        """From token lists (tests, small corpora)."""
        df: Counter[str] = Counter()
        cf: Counter[str] = Counter()
        for tokens in passages:
            cf.update(tokens)
            df.update(set(tokens))
        return cls(len(passages), sum(map(len, passages)), dict(df), dict(cf))

    def term_features(self, tokens: Sequence[str]) -> dict[str, float | None]:
        """The `terms.*` features of a query's tokens (module docstring). A query none of
        whose tokens occurs in the corpus has no idf, SCQ or clarity (None)."""
        known = [t for t in tokens if self.df.get(t, 0) > 0]
        out: dict[str, float | None] = dict.fromkeys(TERM_FEATURES)
        out["terms.oov"] = 1.0 - len(known) / len(tokens) if tokens else 1.0
        if not known:
            return out
        n = self.passages
        distinct = list(dict.fromkeys(known))
        idf = [math.log(n / self.df[t]) for t in distinct]
        scq = [(1 + math.log(self.cf[t])) * math.log(1 + n / self.df[t]) for t in distinct]
        counts = Counter(known)
        clarity = 0.0
        for term, count in counts.items():
            p_query = count / len(known)
            clarity += p_query * math.log2(p_query / (self.cf[term] / self.tokens))
        out.update(
            {
                "terms.max_idf": max(idf),
                "terms.mean_idf": sum(idf) / len(idf),
                "terms.max_scq": max(scq),
                "terms.mean_scq": sum(scq) / len(scq),
                "terms.sum_scq": sum(scq),
                "terms.clarity": clarity,
            }
        )
        return out


def script_mix(text: str) -> tuple[float, float, float]:
    """Shares of Han, Latin-letter and digit characters among the characters that carry
    meaning (no whitespace, punctuation or symbols); 0s for a query of none."""
    han = latin = digit = total = 0
    for ch in normalise(text):
        if ch.isspace() or unicodedata.category(ch).startswith(("P", "S")):
            continue
        total += 1
        if "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" or ord(ch) >= 0x20000:
            han += 1
        elif ch.isdigit():
            digit += 1
        elif ch.isascii() and ch.isalpha():
            latin += 1
    if not total:
        return 0.0, 0.0, 0.0
    return han / total, latin / total, digit / total


def query_features(
    text: str,
    parsed: ParsedQuery,
    tokens: Sequence[str],
    route: str | None = None,
    routes: Sequence[str] = (),
) -> dict[str, float | None]:
    """The `query.*` and `route.*` features (module docstring)."""
    han, latin, digit = script_mix(text)
    aliases = sum(
        1 for surface, entity in parsed.mentions if normalise(surface) != normalise(entity)
    )
    out: dict[str, float | None] = {
        "query.chars": float(parsed.length),
        "query.tokens": float(len(tokens)),
        "query.han": han,
        "query.latin": latin,
        "query.digit": digit,
        "query.entities": float(len(parsed.entities)),
        "query.aliases": float(aliases),
        "query.cities": float(len(parsed.cities)),
        "query.negation_cues": float(len(parsed.negation_cues)),
        "query.excluded": float(len(parsed.excluded_entities) + len(parsed.excluded_cities)),
    }
    out.update({f"route.{r}": float(r == route) for r in routes})
    return out


def pool_features(
    scores: Sequence[float] | np.ndarray, depth: int, query_tokens: int
) -> dict[str, float | None]:
    """One arm's `top`, `gap`, `gap12`, `spread`, `nqc`, `wig` (module docstring), unprefixed;
    all None for an empty pool. Plain floats: a pool is a few dozen scores, where numpy's
    per-call cost is most of the work."""
    s = scores.tolist() if isinstance(scores, np.ndarray) else [float(v) for v in scores]
    if not s:
        return dict.fromkeys(ARM_FEATURES)
    k = min(depth, len(s))
    top_k = s[:k]
    mean_k = math.fsum(top_k) / k
    spread = math.sqrt(math.fsum((v - mean_k) ** 2 for v in top_k) / k)
    corpus = math.fsum(s) / len(s)
    return {
        "top": s[0],
        "gap": s[0] - s[k - 1],
        "gap12": s[0] - s[1] if len(s) > 1 else 0.0,
        "spread": spread,
        "nqc": spread / abs(corpus) if corpus != 0 else 0.0,
        "wig": (mean_k - corpus) / math.sqrt(max(query_tokens, 1)),
    }


def rank_biased_overlap(a: Sequence[object], b: Sequence[object], p: float = RBO_P) -> float:
    """RBO_ext of the two prefixes of equal depth d = min(|a|, |b|) (module docstring); 0
    when either is empty."""
    d = min(len(a), len(b))
    if d == 0:
        return 0.0
    seen_a: set[object] = set()
    seen_b: set[object] = set()
    overlap = 0
    total = 0.0
    for i in range(1, d + 1):
        x, y = a[i - 1], b[i - 1]
        if x == y:
            overlap += 1
        else:
            overlap += (x in seen_b) + (y in seen_a)
        seen_a.add(x)
        seen_b.add(y)
        total += overlap / i * p**i
    return overlap / d * p**d + (1 - p) / p * total


def pair_features(a: Sequence[int], b: Sequence[int], depth: int) -> dict[str, float | None]:
    """`jaccard`, `rbo`, `top1` of two arms' rankings over their top `depth` (unprefixed); all
    None when either is empty."""
    if not len(a) or not len(b):
        return dict.fromkeys(PAIR_FEATURES)
    top_a, top_b = list(a[:depth]), list(b[:depth])
    union = set(top_a) | set(top_b)
    return {
        "jaccard": len(set(top_a) & set(top_b)) / len(union),
        "rbo": rank_biased_overlap(top_a, top_b),
        "top1": float(top_a[0] == top_b[0]),
    }


@dataclass(frozen=True)
class ArmPool:
    """What the features read of one arm's pool: its passage indices and scores, best first."""

    indices: Sequence[int] | np.ndarray
    scores: Sequence[float] | np.ndarray


def retrieval_features(
    pools: Mapping[str, ArmPool], arms: Sequence[str], depth: int, query_tokens: int
) -> dict[str, float | None]:
    """Every arm's pool features and every pair's overlaps, prefixed (`bm25.top`,
    `bm25~dense.rbo`); an arm missing from `pools` counts as empty."""
    out: dict[str, float | None] = {}
    ranked: dict[str, list[int]] = {}
    for arm in arms:
        pool = pools.get(arm)
        scores = pool.scores if pool is not None else ()
        for name, value in pool_features(scores, depth, query_tokens).items():
            out[f"{arm}.{name}"] = value
        indices = pool.indices[:depth] if pool is not None else ()
        ranked[arm] = indices.tolist() if isinstance(indices, np.ndarray) else list(indices)
    for a, b in combinations(arms, 2):
        for name, value in pair_features(ranked[a], ranked[b], depth).items():
            out[f"{a}~{b}.{name}"] = value
    return out


def missing_features(features: Mapping[str, float | None]) -> list[str]:
    """The names of the features that could not be computed (None), in order."""
    return [name for name, value in features.items() if value is None]
