"""The machine a job ran on, and how much memory the job's process held: what a cost figure
means depends on both. Read from /proc (Linux) without extra dependencies; where a fact is not
readable it is None, never guessed."""

from __future__ import annotations

import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_PROC_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _field(text: str, name: str) -> str | None:
    """The value of the first `name: value` line of a /proc file."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value.strip()
    return None


def cpu_model() -> str | None:
    text = _read(Path("/proc/cpuinfo"))
    return _field(text, "model name") or _field(text, "Model") or platform.processor() or None


def memory_total_bytes() -> int | None:
    value = _field(_read(Path("/proc/meminfo")), "MemTotal")
    return int(value.split()[0]) * 1024 if value else None


def gpus() -> list[str]:
    """The NVIDIA GPUs this machine has, by model name: from the driver's /proc entries, else
    `nvidia-smi -L`; empty when there is none (or no NVIDIA driver)."""
    names = []
    if _NVIDIA_PROC.is_dir():
        for info in sorted(_NVIDIA_PROC.glob("*/information")):
            model = _field(_read(info), "Model")
            if model:
                names.append(model)
    if names or shutil.which("nvidia-smi") is None:
        return names
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def machine() -> dict[str, Any]:
    """CPU model, logical cores, the cores this process may use, memory and GPUs."""
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    return {
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "cpu_cores_usable": usable,
        "memory_bytes": memory_total_bytes(),
        "gpus": gpus(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "hostname": platform.node(),
    }


def rss_bytes() -> int | None:
    """Resident memory of this process now (VmRSS)."""
    value = _field(_read(_PROC_STATUS), "VmRSS")
    return int(value.split()[0]) * 1024 if value else None


def peak_rss_bytes() -> int:
    """The most resident memory this process held since the last `reset_peak` (VmHWM), or
    since it started where /proc cannot say (ru_maxrss)."""
    value = _field(_read(_PROC_STATUS), "VmHWM")
    if value:
        return int(value.split()[0]) * 1024
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def reset_peak() -> bool:
    """Start a new peak (Linux: writing 5 to /proc/self/clear_refs resets VmHWM to the current
    RSS), so a job's peak is its own, not an earlier job's of the same process (a sweep's basic
    launcher runs every job in one process). False where that is not possible: the peak is then
    the process's since it started."""
    try:
        _CLEAR_REFS.write_text("5", encoding="ascii")
    except OSError:
        return False
    return True


class MemoryMeter:
    """Peak and growth of resident memory over named phases of a job (a phase's peak is the
    process's, everything loaded before it included), and the job's peak over all of it: the
    peak is folded in before each reset, so no phase hides an earlier one's."""

    def __init__(self) -> None:
        self.resettable = reset_peak()
        self.peak = peak_rss_bytes()
        self.phases: dict[str, dict[str, Any]] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.peak = max(self.peak, peak_rss_bytes())
        before = rss_bytes()
        reset_peak()
        start = time.perf_counter()
        try:
            yield
        finally:
            after = rss_bytes()
            peak = peak_rss_bytes()
            self.peak = max(self.peak, peak)
            self.phases[name] = {
                "seconds": round(time.perf_counter() - start, 4),
                "peak_rss_bytes": peak if self.resettable else None,
                "rss_growth_bytes": after - before if after is not None and before else None,
            }

    def job_peak(self) -> dict[str, Any]:
        """The job's peak resident memory; `since` says what it counts from."""
        self.peak = max(self.peak, peak_rss_bytes())
        return {
            "peak_rss_bytes": self.peak,
            "since": "job start" if self.resettable else "process start",
        }
