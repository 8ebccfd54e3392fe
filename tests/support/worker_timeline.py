"""How the suite's time falls on its xdist workers, printed at the end of a run
(`tests/conftest.py` registers this module under `--worker-timeline`):

    .venv/bin/python -m pytest -n 2 --dist loadscope --worker-timeline

Why: the suite is bounded by its total work over two cores, so what is left to win in the
schedule is the time one worker waits for the other at the end, and the module order in
`conftest.pytest_collection_modifyitems` weighs a slow test by how much longer it takes than
another. Both figures come from here: each worker's busy time and when its last test ended
(seconds from the first test's start), and the mean time of a slow test and of another one
(setup, call and teardown together).
"""

from __future__ import annotations

from collections import defaultdict

import pytest

_busy: defaultdict[str, float] = defaultdict(float)
_first: dict[str, float] = {}
_last: dict[str, float] = {}
_per_test: defaultdict[str, float] = defaultdict(float)
_slow: set[str] = set()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    node = getattr(report, "node", None)  # the controller's handle on the worker, under xdist
    worker = node.gateway.id if node is not None else "main"
    _busy[worker] += report.duration
    _first[worker] = min(_first.get(worker, report.start), report.start)
    _last[worker] = max(_last.get(worker, report.stop), report.stop)
    _per_test[report.nodeid] += report.duration
    if "slow" in report.keywords:
        _slow.add(report.nodeid)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _busy:
        return
    start = min(_first.values())
    write = terminalreporter.write_line
    write("worker timeline (seconds from the first test's start):")
    for worker in sorted(_busy):
        ended = _last[worker] - start
        write(f"  {worker}: busy {_busy[worker]:.1f}, last test ended at {ended:.1f}")
    if len(_busy) > 1:
        ends = [_last[w] - start for w in _busy]
        write(f"  the workers ended {max(ends) - min(ends):.1f} s apart")
    slow = [t for test, t in _per_test.items() if test in _slow]
    other = [t for test, t in _per_test.items() if test not in _slow]
    for name, times in (("slow", slow), ("other", other)):
        if times:
            write(f"  {name} tests: {len(times)}, mean {sum(times) / len(times):.3f} s")
    if slow and other:
        ratio = (sum(slow) / len(slow)) / (sum(other) / len(other))
        write(f"  a slow test takes {ratio:.0f} times another, on average")
