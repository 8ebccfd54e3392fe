"""The arms: BM25, dense (FAISS), BGE-M3's outputs, a service, a run file.

faiss logs at INFO which CPU build it tries on every import ("Could not load library with
AVX512 support due to: ModuleNotFoundError ..."): lines that look like errors and are none.
They are kept below the default log level here, before any arm imports faiss, unless a level
was asked for (`hydra.verbose=faiss` shows them).
"""

import logging

_faiss_log = logging.getLogger("faiss")
if _faiss_log.level == logging.NOTSET:
    _faiss_log.setLevel(logging.WARNING)
