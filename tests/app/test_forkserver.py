"""The tests' forked `python` (support/forkserver.py) behaves as a fresh interpreter: each
command, run through bash both ways, gives the same exit status, stdout and stderr."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT
from support.forkserver import forked_python, shim_script

pytestmark = pytest.mark.slow

SERVED = "import sys; print('served' if 'run.__main__' in sys.modules else 'fresh')"

# (command, how it is run: served by the forkserver, or given to a fresh interpreter)
COMMANDS = [
    ("python -c 'import sys; print(sys.argv, sys.path); sys.exit(5)' a 'b c'", "served"),
    ("python -c 'raise ValueError(\"bad\")'", "served"),
    ("python -c 'import sys; sys.exit(\"a message\")'", "served"),
    ("python -c 'import os, signal; os.kill(os.getpid(), signal.SIGTERM)'; echo $?", "served"),
    ("echo 你好 | python -c 'import sys; print(sys.stdin.read().upper())'", "served"),
    ("python -c 'import sys; print(sys.stdout.encoding, sys.stderr.errors, sys.stdout.isatty())'",
     "served"),
    ("python -c 'import atexit; atexit.register(print, \"at exit\")'", "served"),
    ("python -c 'import threading, time; threading.Thread(target=lambda: (time.sleep(0.3), "
     "print(\"joined\"))).start()'", "served"),
    ("python -c 'print(\"to a file\")' >> out.log 2>&1; cat out.log", "served"),
    ("PYTHONPATH=extra:$PYTHONPATH python -c 'import sys; print(sys.path[:3])'", "served"),
    ("cd sub && python ../script.py x; echo $?", "served"),
    ("python -m run.score --help", "served"),
    ("python -m run retriever=nope", "served"),
    ("python -m run 'retriever.arms=[bm25]' top_k=nope", "served"),
    ("SOME_SETTING=1 python -c \"import os; print(os.environ['SOME_SETTING'])\"", "fresh"),
    ("PYTHONPATH=elsewhere python -c 'import sys; print(sys.path[1])'", "fresh"),
    ("PYTHONPATH=shadow:$PYTHONPATH python -c 'import faiss; print(faiss.__file__)'", "fresh"),
    ("python -X utf8 -c 'print(1)'", "fresh"),
]  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def bins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A scratch folder with a script, and the PATH entry for each way of running `python`."""
    tmp = tmp_path_factory.mktemp("forkserver")
    (tmp / "sub").mkdir()
    (tmp / "shadow").mkdir()  # a folder whose faiss.py a fresh interpreter imports first
    (tmp / "shadow" / "faiss.py").write_text("")
    (tmp / "script.py").write_text(
        "import os, sys\nprint(sys.argv, sys.path[0], os.getcwd())\nsys.exit(len(sys.argv))\n"
    )
    env = _env()
    fresh_text = shim_script([sys.executable])
    with forked_python(env, ROOT, fresh=False) as python:
        forked_text = shim_script(python)
        assert "forkclient.py" in forked_text
        folders = {}
        for how, text in (("fresh", fresh_text), ("forked", forked_text)):
            folders[how] = tmp / f"{how}-bin"
            folders[how].mkdir()
            (folders[how] / "python").write_text(text)
            (folders[how] / "python").chmod(0o755)
        yield tmp, {how: f"{folder}{os.pathsep}{env['PATH']}" for how, folder in folders.items()}


def _run(command: str, cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    (cwd / "out.log").unlink(missing_ok=True)
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(("command", "how"), COMMANDS, ids=[c for c, _ in COMMANDS])
def test_forked_python_is_a_fresh_one(
    command: str, how: str, bins: tuple[Path, dict[str, str]]
) -> None:
    tmp, paths = bins
    env = _env()
    fresh = _run(command, tmp, {**env, "PATH": paths["fresh"]})
    forked = _run(command, tmp, {**env, "PATH": paths["forked"]})
    assert forked == fresh
    assert fresh[0] == 0 or fresh[2].strip() or fresh[1].strip()  # each says something
    # Whether the forkserver ran it: its processes have the app imported before they start.
    probe = re.sub(r"\bpython( -X \S+)?.*$", rf'python\1 -c "{SERVED}"', command, count=1)
    assert _run(probe, tmp, {**env, "PATH": paths["forked"]})[1].strip() == how


def test_a_client_without_its_server_runs_the_real_interpreter(tmp_path: Path) -> None:
    client = Path(ROOT / "tests" / "support" / "forkclient.py")
    gone = str(tmp_path / "no-server")  # a socket nobody listens on
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(client), gone, sys.executable, "-c", SERVED],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "fresh", "")


def test_what_a_preloaded_import_sets_in_the_environment_every_command_gets(
    tmp_path: Path,
) -> None:
    """torch sets variables at import (KMP_INIT_AT_FORK, ...): a server that preloads such a
    module still serves the environment it started with, and each command sees what the import
    set, as a fresh interpreter that imports it does."""
    (tmp_path / "sets_env.py").write_text("import os\nos.environ['SET_AT_IMPORT'] = 'yes'\n")
    env = {**_env(), "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}"}
    code = (
        "import os, sys, sets_env; "
        "print('run.__main__' in sys.modules, os.environ['SET_AT_IMPORT'])"
    )
    outputs = {}
    with forked_python(env, ROOT, fresh=False, preload=["sets_env"]) as python:
        for how, argv in (("forked", python), ("fresh", [sys.executable])):
            done = subprocess.run(
                [*argv, "-c", code], env=env, capture_output=True, text=True, timeout=120
            )
            outputs[how] = (done.returncode, done.stdout, done.stderr)
    assert outputs == {"forked": (0, "True yes\n", ""), "fresh": (0, "False yes\n", "")}


def test_a_module_the_server_cannot_preload_is_named(capfd: pytest.CaptureFixture[str]) -> None:
    server = forked_python(_env(), ROOT, fresh=False, preload=["FlagEmbeding"])
    with pytest.raises(RuntimeError, match="the forkserver exited 2 unready"), server:
        pass
    assert "forkserver: cannot preload FlagEmbeding: No module named 'FlagEmbeding'" in (
        capfd.readouterr().err
    )
