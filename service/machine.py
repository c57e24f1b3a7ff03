"""What machine a measurement ran on, recorded beside every benchmark and report figure.

The standard library and /proc are enough: the CPU model name is only in /proc/cpuinfo (psutil
does not report it), so the project does not depend on psutil.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe() -> dict[str, object]:
    mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def summary() -> str:
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu_model()}), "
        f"Python {platform.python_version()}"
    )
