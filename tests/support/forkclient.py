"""The client side of `forkserver.py`: `forkclient.py SOCKET PYTHON ARGS...` runs `PYTHON ARGS...`
in a process the server forks, with this process's stdin, stdout, stderr, working directory and
environment, and exits as that process did (or dies by the same signal). Signals this process
gets (SIGINT, SIGTERM, SIGHUP) are passed on to it.

Anything the server does not serve (interpreter options; a server that is gone or refuses the
environment) is run by `PYTHON` itself, by `os.execv`, as if this script were not there. Run with
`-I -S` (stdlib only, nothing from the environment), so it starts in ~15 ms.
"""

import array
import json
import os
import signal
import socket
import struct
import sys

# The protocol, shared with forkserver.py (which imports it from here). A request: HEADER (the
# body's length) with descriptors 0-2 attached, then the JSON body {argv, env, cwd}. Replies:
# STATUS (kind, value), first PID (or REFUSED), then EXITED or SIGNALLED when the command ends.
HEADER = struct.Struct("!I")
STATUS = struct.Struct("!ii")
PID, EXITED, SIGNALLED, REFUSED = range(4)


def servable(argv: list[str]) -> bool:
    if not argv:
        return False  # an interactive interpreter
    if argv[0] in ("-m", "-c"):
        return len(argv) >= 2
    return not argv[0].startswith("-") and argv[0].endswith(".py") and os.path.isfile(argv[0])


def read_status(conn: socket.socket) -> tuple[int, int]:
    data = b""
    while len(data) < STATUS.size:
        chunk = conn.recv(STATUS.size - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return STATUS.unpack(data)


def main() -> None:
    path, python, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    fresh = [python, *argv]
    if not servable(argv):
        os.execv(python, fresh)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        body = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
        conn.sendmsg(
            [HEADER.pack(len(body))],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))],
        )
        conn.sendall(body)
        kind, value = read_status(conn)
    except OSError:
        os.execv(python, fresh)  # no server: the real interpreter
    if kind == REFUSED:  # this environment needs a fresh interpreter
        os.execv(python, fresh)
    child = value
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: os.kill(child, signum))
    try:
        kind, value = read_status(conn)  # recv resumes after a forwarded signal (PEP 475)
    except ConnectionError:
        sys.stderr.write("forkclient: the forkserver went away\n")
        os._exit(3)
    if kind == SIGNALLED:  # die by the same signal, as the process would have
        signal.signal(value, signal.SIG_DFL)
        os.kill(os.getpid(), value)
    os._exit(value)


if __name__ == "__main__":
    main()
