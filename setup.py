"""The one compiled part: jieba's accurate-mode cut in C (retrieval_bench.segment._dagcut).

Everything else is declared in pyproject.toml. The extension is optional: where it cannot be
built (no compiler or Python headers) the install still succeeds and `text.impl=fast` falls
back to jieba with a logged note (`text.impl=fast_strict` refuses instead). It is compiled
without floating-point contraction or fast-math, so its route probabilities are the same
doubles jieba's Python computes.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "retrieval_bench.segment._dagcut",
            sources=["src/retrieval_bench/segment/_dagcut.c"],
            extra_compile_args=["-O2", "-ffp-contract=off", "-fno-fast-math", "-std=c11"],
            optional=True,
        )
    ]
)
