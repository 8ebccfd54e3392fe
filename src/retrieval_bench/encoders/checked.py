"""The encoder boundary: every encoder, shipped or a team's own, is called through here.

`build_encoder` wraps what it builds in a `CheckedEncoder`, and the embedding cache checks a
cached entry with the same rules before it hands the vectors on, so what reaches the dense index
is checked whether it was encoded now or read from a cache that an earlier (buggy) encoder
wrote. The rules are the ones precomputed vectors are already held to (`encoders.precomputed`):

* one row per text, a 2-d float matrix, of the encoder's `dimension()` (or, when it says None,
  the dimension its first vectors had: passages and queries share one index);
* every value finite (a NaN passage vector never ranks, a NaN query vector ranks nothing);
* unit norm within `UNIT_NORM_TOLERANCE` while `encoder.normalize` is true (the default): the
  `Encoder` protocol returns L2-normalised vectors and the dense arm scores cosine as an inner
  product, so a norm of 3 would put "cosine" scores near 9 and move the refusal threshold, and
  an all-zero vector has no direction. Such vectors are refused, not rescaled: they are the
  encoder's bug, to fix there (`encoder.normalize=false` declares vectors that are not
  unit-norm, for a model meant for inner product).

A refusal is `EncoderOutputError` (exit 2) naming the encoder's class, the passage or query
(its id where the dense arm told the encoder which text is which, `name_texts`) and the
value. An exception raised inside an outside encoder's `__init__`, `identity`, `dimension` or
`encode_*` is that encoder's failure (`plugins.guarded_call`: exit 2 naming it and the method);
inside a shipped one it is this project's bug (exit 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from retrieval_bench.errors import BenchError
from retrieval_bench.io.strict_json import strict_dumps
from retrieval_bench.plugins import guarded_call, plugin_name
from retrieval_bench.protocols import Encoder

UNIT_NORM_TOLERANCE = 1e-3
"""How far from 1 a norm may be before a vector counts as not unit-norm (float16 exports
round to about 1e-3)."""
_NORM_ROWS = 4096
_SHOWN_CHARS = 40
ROLE_NOUNS = {"passages": "passage", "queries": "query"}


class EncoderOutputError(BenchError):
    """An encoder's vectors break the rules of the module doc (exit 2)."""


def row_norms(vectors: np.ndarray) -> np.ndarray:
    """Each row's L2 norm, in float64 by blocks of rows: the same norms as one call, without a
    float64 copy of the whole matrix (4 GB at 1M x 512)."""
    return np.concatenate(
        [np.zeros(0)]
        + [
            np.linalg.norm(vectors[start : start + _NORM_ROWS].astype(np.float64), axis=1)
            for start in range(0, len(vectors), _NORM_ROWS)
        ]
    )


class CheckedEncoder:
    """An `Encoder` whose every call crosses the plug-in boundary and whose every output is
    checked (module doc). `unit`: whether its vectors must be unit-norm (`encoder.normalize`).
    Anything else an encoder class offers (a model's `model`, its `cfg`) is read through."""

    def __init__(self, encoder: Encoder, unit: bool = True) -> None:
        self.wrapped = encoder
        self.unit = unit
        self.label = f"encoder {plugin_name(encoder)}"
        self._dimension: int | None = None
        self._dimension_known = False
        self._names: dict[str, dict[str, str]] = {}

    def __getattr__(self, name: str) -> Any:
        if name == "wrapped":  # not set yet (copy, pickle): never recurse
            raise AttributeError(name)
        return getattr(self.wrapped, name)

    def name_texts(self, role: str, texts: Sequence[str], ids: Sequence[str]) -> None:
        """Say which id each text of `role` is, so a refusal names the passage or query by id
        (the first id, where two share a text)."""
        names = self._names.setdefault(role, {})
        for text, text_id in zip(texts, ids, strict=True):
            names.setdefault(text, text_id)

    # -- the Encoder protocol, guarded ---------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        identity = guarded_call("encoder", self.wrapped, self.wrapped.identity)
        try:
            if not isinstance(identity, Mapping):
                raise TypeError(f"a {type(identity).__name__}, not a mapping")
            strict_dumps(identity)
        except (TypeError, ValueError) as exc:
            raise EncoderOutputError(
                f"{self.label}: identity() is not JSON, which the embedding cache keys on ({exc})"
            ) from exc
        return dict(identity)

    def dimension(self) -> int | None:
        if not self._dimension_known:
            method = getattr(self.wrapped, "dimension", None)
            found = None if method is None else guarded_call("encoder", self.wrapped, method)
            if found is not None and (isinstance(found, bool) or not isinstance(found, int)):
                raise EncoderOutputError(
                    f"{self.label}: dimension() returned {found!r}, not a number of dimensions"
                )
            self._dimension = found
            self._dimension_known = found is not None
        return self._dimension

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        vectors = guarded_call("encoder", self.wrapped, self.wrapped.encode_passages, texts)
        return self.check(vectors, texts, "passages")

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        vectors = guarded_call("encoder", self.wrapped, self.wrapped.encode_queries, texts)
        return self.check(vectors, texts, "queries")

    # -- the check -----------------------------------------------------------------------------
    def check(self, vectors: Any, texts: Sequence[str], role: str) -> np.ndarray:
        """`vectors` (what this encoder gave for `texts` of `role`, now or in a cache entry) as a
        float32 matrix, or EncoderOutputError naming the first text at fault and the value."""
        method = f"encode_{role}()"
        try:
            array = np.asarray(vectors)
        except (TypeError, ValueError) as exc:
            raise EncoderOutputError(f"{self.label}: {method} returned no matrix ({exc})") from exc
        if array.ndim != 2 or array.shape[0] != len(texts):
            raise EncoderOutputError(
                f"{self.label}: {method} returned shape {array.shape} for {len(texts)} "
                f"{role}; expected one row per text"
            )
        if not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
            raise EncoderOutputError(f"{self.label}: {method} returned {array.dtype} values")
        array = np.ascontiguousarray(array, dtype=np.float32)
        dimension = self.dimension()
        if dimension is None:
            self._dimension, self._dimension_known = array.shape[1], True
        elif array.shape[1] != dimension:
            raise EncoderOutputError(
                f"{self.label}: {method} returned {array.shape[1]}-dimensional vectors, but its "
                f"vectors are {dimension}-dimensional (dimension(), or its first vectors)"
            )
        if not len(array):
            return array
        unfinite = ~np.isfinite(array)
        if unfinite.any():
            row, column = (int(i) for i in np.argwhere(unfinite)[0])
            raise EncoderOutputError(
                f"{self.label}: the vector of {self._which(role, texts, row)} holds "
                f"{float(array[row, column])!r} at dimension {column} "
                f"({int(unfinite.any(axis=1).sum())} of {len(array)} {role} not finite)"
            )
        if self.unit:
            norms = row_norms(array)
            off = np.flatnonzero(np.abs(norms - 1) > UNIT_NORM_TOLERANCE)
            if len(off):
                row = int(off[0])
                norm = "is all zeros" if norms[row] == 0 else f"has norm {float(norms[row]):.6g}"
                raise EncoderOutputError(
                    f"{self.label}: the vector of {self._which(role, texts, row)} {norm}, "
                    f"not unit-norm ({len(off)} of {len(array)} {role}): the "
                    "Encoder protocol returns L2-normalised vectors, since the dense arm scores "
                    "cosine as an inner product; normalise them in the encoder (or set "
                    "encoder.normalize=false for vectors meant for inner product)"
                )
        return array

    def _which(self, role: str, texts: Sequence[str], row: int) -> str:
        """The text at `row` as the user knows it: its id, else its position and its start."""
        text = texts[row]
        known = self._names.get(role, {}).get(text)
        noun = ROLE_NOUNS.get(role, role)
        if known is not None:
            return f"{noun} {known!r}"
        shown = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
        return f"{noun} #{row + 1} of the batch ({shown!r})"


def checked(encoder: Encoder, unit: bool = True) -> CheckedEncoder:
    """`encoder` through the boundary (itself when it already is)."""
    return encoder if isinstance(encoder, CheckedEncoder) else CheckedEncoder(encoder, unit)
