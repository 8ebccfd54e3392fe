"""The compiled parts: jieba's accurate-mode cut (retrieval_bench.text.segment._dagcut), BM25's
per-query sum (retrieval_bench.retrievers._bm25kernel) and the integer scorer's pass over the
rankings (retrieval_bench.scoring._coded).

Everything else is declared in pyproject.toml. Each extension is optional: where it cannot be
built (no compiler or Python headers) the install still succeeds; `text.impl=fast` then falls
back to jieba with a logged note (`text.impl=fast_strict` refuses instead) and BM25 and the
scorer take their numpy paths (same values). The two that compute floats are compiled without
floating-point contraction or fast-math, so they produce the same doubles as the Python they
replace.
"""

from setuptools import Extension, setup


def extension(name: str, exact_floats: bool = False) -> Extension:
    """`retrieval_bench.<name>` from `src/retrieval_bench/<name>.c`, optional; with
    `exact_floats`, no fp contraction or fast-math (its doubles must be Python's)."""
    flags = ["-O2", "-std=c11"]
    if exact_floats:
        flags += ["-ffp-contract=off", "-fno-fast-math"]
    return Extension(
        f"retrieval_bench.{name.replace('/', '.')}",
        sources=[f"src/retrieval_bench/{name}.c"],
        depends=["src/retrieval_bench/_buffers.h"],
        extra_compile_args=flags,
        optional=True,
    )


setup(
    ext_modules=[
        extension("text/segment/_dagcut", exact_floats=True),
        # BM25's per-query sum over CSR rows (retrievers/bm25_kernel.py has a numpy fallback).
        extension("retrievers/_bm25kernel", exact_floats=True),
        # The integer scorer's pass over the rankings (scoring/coded_kernel.py: numpy else).
        extension("scoring/_coded"),
    ]
)
