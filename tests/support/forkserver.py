"""A `python` for app-level tests that does not import the app again: each command runs in a
process forked from one interpreter that has imported it already.

Why: the app-level tests start `python -m run ...` again and again (82 README commands, and
every `run_app`), and each fresh interpreter imports Hydra, numpy, FAISS, pandas,
matplotlib and the package and reads jieba's dictionary before the job starts: about half of a
small job's wall time (`benchmarks/bench_forkserver.py`: 2.40 s fresh, 1.17 s forked, side by
side, the same metrics.json). Forked from a process that did it once, the same command with the
same argv, environment, working directory and standard streams runs the same code.

What the forked process is given, as `python` would set it up:

* the client's stdin, stdout and stderr (passed over the socket), so a shell's pipes and
  redirections (`>> cron.log 2>&1`) hold, and the client's working directory and environment
  (`os.environ` is replaced, so `PYTHONPATH=... python -m run` sees its path);
* `sys.argv` and `sys.path[0]` as for `-m MODULE`, `-c CODE` or `SCRIPT`, then the client's
  `PYTHONPATH` entries (made absolute from its working directory), then the interpreter's own;
* at the end Python's shutdown order: non-daemon threads joined, `atexit` handlers, streams
  flushed; the exit status as Python gives it (`SystemExit` codes, 1 and a traceback for an
  uncaught exception). The client exits with it, or dies by the same signal.

What it cannot give: a module already imported stays the one imported at the server's start, so
a command whose `PYTHONPATH` would import another copy of it, or an environment variable a
preloaded library reads at import, is not what a fresh process would see. The client therefore
runs the real interpreter instead (`os.execv`) for anything but `-m`, `-c` or a script path, and
the server refuses (the client then runs the real interpreter) when the request's environment
differs from its own in a variable that is not in `RUNTIME_VARIABLES`, or its `PYTHONPATH` does
not end with the server's, or puts first a folder holding a top-level module or package the
server has imported (it would shadow it in a fresh process). The server's own environment is the
one it started with: variables its imports set (torch sets three) are set in every command's, so
a command that never imports torch still has them.

Run as `python tests/support/forkserver.py SOCKET [MODULE ...]` (MODULEs: imported after
`PRELOAD`); it prints `ready` once the socket listens. Clients: `tests/support/forkclient.py`
(see `forked_python`).
"""

from __future__ import annotations

import array
import atexit
import contextlib
import gc
import importlib
import io
import json
import os
import runpy
import selectors
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

try:  # imported as support.forkserver (the tests), or run as a script from this folder
    from support.forkclient import EXITED, HEADER, PID, REFUSED, SIGNALLED, STATUS
except ModuleNotFoundError:
    from forkclient import EXITED, HEADER, PID, REFUSED, SIGNALLED, STATUS  # type: ignore[no-redef]

FRESH = "RETRIEVAL_BENCH_FRESH_PYTHON"
"""Set (to anything) in the tests' environment: every `python` is a fresh interpreter again."""

# What every server imports before it forks: what `python -m run` and the README's other
# commands import on every start. FlagEmbedding (torch, transformers: ~8 s) only where asked
# (`forked_python(preload=...)`): a server's start pays it, and only the README's model-loading
# commands use it.
PRELOAD = (
    "run.__main__",
    "run.compare",
    "run.score",
    "run.rescore",
    "run.pool",
    "run.perturb",
    "run.tune",
    "retrieval_bench.job.runner",
    "retrieval_bench.jobdir.write",
    "retrieval_bench.reports.plots",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "faiss",
    "pandas",
    "pyarrow",
    "scipy.stats",
    "jieba",
)

# Environment variables read at run time only (by the app, Hydra, the shell, the test): a
# request may differ from the server in these. Anything else differing means a fresh process.
RUNTIME_VARIABLES = frozenset(
    {"PATH", "PYTHONPATH", "HYDRA_FULL_ERROR", "OLDPWD", "PWD", "SHLVL", "_", "PYTEST_CURRENT_TEST"}
)
RUNTIME_PREFIXES = ("RETRIEVAL_BENCH_", "MAKE", "MFLAGS")  # make's own: `make demo`

MAX_FDS = 3


def _pythonpath(value: str | None, cwd: str) -> list[str]:
    return [os.path.join(cwd, p) for p in (value or "").split(os.pathsep) if p]


class Server:
    def __init__(self, path: str, env: dict[str, str]) -> None:
        """`env`: the environment the server started with, before its imports; requests are
        compared with it. What the imports set in it (torch: `KMP_DUPLICATE_LIB_OK`,
        `KMP_INIT_AT_FORK`, `TORCHINDUCTOR_CACHE_DIR`) every command is given too, as a fresh
        interpreter gets it once it imports them."""
        self.env = env
        self.set_by_imports = {k: v for k, v in os.environ.items() if env.get(k) != v}
        own = set(_pythonpath(self.env.get("PYTHONPATH"), os.getcwd()))
        # The interpreter's own path: sys.path without PYTHONPATH (main() took this folder off).
        self.base_path = [p for p in sys.path if p not in own]
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.children: dict[int, socket.socket] = {}
        self.top_level = {name.partition(".")[0] for name in sys.modules}

    def refusal(self, env: dict[str, str], cwd: str) -> str | None:
        """Why this request's environment needs a fresh interpreter, or None."""
        for key in set(env) | set(self.env):
            if key in RUNTIME_VARIABLES or key.startswith(RUNTIME_PREFIXES):
                continue
            if env.get(key) != self.env.get(key):
                return f"environment variable {key} differs from the server's"
        own = [p for p in (self.env.get("PYTHONPATH") or "").split(os.pathsep) if p]
        theirs = [p for p in (env.get("PYTHONPATH") or "").split(os.pathsep) if p]
        if own and theirs[-len(own) :] != own:
            return "PYTHONPATH does not end with the server's"
        for entry in theirs[: len(theirs) - len(own)]:  # the folders put before the server's
            folder = os.path.join(cwd, entry)
            with contextlib.suppress(OSError):
                names = {name.removesuffix(".py") for name in os.listdir(folder)}
                shadowed = sorted(names & self.top_level)
                if shadowed:
                    return f"PYTHONPATH's {folder} holds {shadowed[0]}, which the server imported"
        return None

    def serve_forever(self) -> None:
        """Until SIGTERM, or until the process that started it is gone (a pytest killed
        without its teardown leaves no server behind)."""
        parent = os.getppid()
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ)
        while os.getppid() == parent:
            if selector.select(timeout=0.02):
                conn, _ = self.listener.accept()
                self.accept(conn)
            self.reap()

    def accept(self, conn: socket.socket) -> None:
        try:
            request, fds = _receive(conn)
        except (OSError, ValueError):
            conn.close()
            return
        if self.refusal(request["env"], request["cwd"]) is not None:
            with contextlib.suppress(OSError):
                conn.sendall(STATUS.pack(REFUSED, 0))
            conn.close()
            for fd in fds:
                os.close(fd)
            return
        pid = os.fork()
        if pid == 0:  # the command's process: never returns
            self.listener.close()
            for other in self.children.values():
                other.close()
            conn.close()
            _run_command(request, fds, self.base_path, self.set_by_imports)
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        with contextlib.suppress(OSError):
            conn.sendall(STATUS.pack(PID, pid))

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            if os.WIFSIGNALED(status):
                message = STATUS.pack(SIGNALLED, os.WTERMSIG(status))
            else:
                message = STATUS.pack(EXITED, os.waitstatus_to_exitcode(status))
            with contextlib.suppress(OSError):
                conn.sendall(message)
            conn.close()


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    data, ancdata, _, _ = conn.recvmsg(HEADER.size, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if len(data) != HEADER.size or len(fds) != MAX_FDS:
        raise ValueError("a request is a length and three descriptors")
    (size,) = HEADER.unpack(data)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ValueError("request cut short")
        body += chunk
    return json.loads(body), list(fds)


def _streams(env: dict[str, str]) -> None:
    """sys.stdin/stdout/stderr over descriptors 0-2 as Python's start-up makes them: stdout
    line-buffered on a terminal, stderr always (3.9+), both written through under
    PYTHONUNBUFFERED; the server's encoding (the same locale)."""
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    encoding = sys.stdout.encoding
    reader = io.BufferedReader(io.FileIO(0, "r", closefd=False))
    stdin = io.TextIOWrapper(reader, encoding, "strict")
    sys.stdin = stdin
    setattr(sys, "__stdin__", stdin)  # noqa: B010 (a Final name to the type checker)
    for fd, name, errors in ((1, "stdout", "strict"), (2, "stderr", "backslashreplace")):
        writer = io.BufferedWriter(io.FileIO(fd, "w", closefd=False))
        stream = io.TextIOWrapper(
            writer,
            encoding,
            errors,
            line_buffering=name == "stderr" or os.isatty(fd),
            write_through=unbuffered,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run_command(
    request: dict, fds: list[int], base_path: list[str], set_by_imports: dict[str, str]
) -> None:
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({**set_by_imports, **request["env"]})
        _streams(request["env"])
        argv: list[str] = request["argv"]
        extra = _pythonpath(os.environ.get("PYTHONPATH"), request["cwd"])
        if argv[0] == "-m":
            first = request["cwd"]
        elif argv[0] == "-c":
            first = ""
        else:
            first = os.path.dirname(os.path.realpath(argv[0]))
        sys.path[:] = [first, *extra, *base_path]
        sys.path_importer_cache.clear()
        importlib.invalidate_caches()
        code = _main(argv)
    except BaseException:  # the harness itself failed: say so, as the interpreter would
        traceback.print_exc()
        code = 1
    os._exit(_shutdown(code))


def _main(argv: list[str]) -> int:
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            _unload_main(argv[1])
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            main = type(sys)("__main__")
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        else:
            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as stop:
        return _exit_code(stop.code)
    except BaseException as error:
        error = error.with_traceback(_without_harness(error.__traceback__))
        sys.excepthook(type(error), error, error.__traceback__)
        return 1
    return 0


def _unload_main(name: str) -> None:
    """Forget the preloaded copy of the module `-m` runs (`run.__main__` for `-m run`): a fresh
    interpreter has not imported it when runpy starts, and runpy warns when it finds one."""
    package = getattr(sys.modules.get(name), "__path__", None) is not None
    main = f"{name}.__main__" if package else name
    sys.modules.pop(main, None)
    parent, _, child = main.rpartition(".")
    if parent in sys.modules and getattr(sys.modules[parent], child, None) is not None:
        delattr(sys.modules[parent], child)


def _without_harness(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the command's own first frame: this module's and runpy's are not
    the command's (a fresh `python -c` shows none; `-m` shows runpy's, which differ)."""
    while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>")):
        tb = tb.tb_next
    return tb


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _shutdown(code: int) -> int:
    """Python's own order at exit: join threads, run atexit handlers, flush the streams."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


@contextlib.contextmanager
def forked_python(
    env: dict[str, str], cwd: Path, fresh: bool | None = None, preload: Sequence[str] = ()
) -> Iterator[list[str]]:
    """The command that stands for `python` (argv before the interpreter's own arguments): it
    sends what it runs to a forkserver started with `env` in `cwd` (the real interpreter for
    anything the server cannot serve); the server stops on exit. `preload`: modules the server
    imports beyond `PRELOAD`. `fresh` (by default: whether `RETRIEVAL_BENCH_FRESH_PYTHON` is
    set): the real interpreter itself, no server."""
    if os.environ.get(FRESH) if fresh is None else fresh:
        yield [sys.executable]
        return
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory(prefix="rb-fork-") as sockets:
        path = os.path.join(sockets, "s")
        server = subprocess.Popen(
            [sys.executable, str(here / "forkserver.py"), path, *preload],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            if not line:  # it exited; what it wrote to stderr (the caller's) says why
                raise RuntimeError(f"the forkserver exited {server.wait(timeout=30)} unready")
            if line.strip() != "ready":
                raise RuntimeError(f"the forkserver did not start (it said {line!r})")
            yield [sys.executable, "-I", "-S", str(here / "forkclient.py"), path, sys.executable]
        finally:
            server.terminate()
            server.wait(timeout=30)


def shim_script(python: list[str]) -> str:
    """A `python` shell script that runs `python` (from `forked_python`) with its arguments."""
    return f'#!/bin/sh\nexec {shlex.join(python)} "$@"\n'


def _preload(extra: Sequence[str]) -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    for name in extra:
        try:
            importlib.import_module(name)
        except ImportError as error:
            print(f"forkserver: cannot preload {name}: {error}", file=sys.stderr)
            sys.exit(2)
    from retrieval_bench.text.tokenizer import base_dictionary

    base_dictionary()
    # What is imported now is shared with every child until written to; a child's full garbage
    # collection would visit (and so copy) all of it. Frozen, collections skip it.
    gc.freeze()
    assert threading.active_count() == 1, "threads started at preload; fork would copy them"


def main() -> None:
    # This script's folder (tests/support) first on the path would shadow libraries of the same
    # name (its datasets.py is not Hugging Face's `datasets`); nothing here imports from it.
    sys.path.pop(0)
    if len(sys.argv) < 2:
        print("usage: python tests/support/forkserver.py SOCKET [MODULE ...]", file=sys.stderr)
        sys.exit(2)
    env = dict(os.environ)
    _preload(sys.argv[2:])
    try:
        server = Server(sys.argv[1], env)
    except OSError as error:
        print(f"forkserver: cannot listen on {sys.argv[1]}: {error.strerror}", file=sys.stderr)
        sys.exit(2)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
