"""What machine a measurement ran on, recorded beside every benchmark and report figure.

The standard library and /proc are enough: the CPU model name is only in /proc/cpuinfo (psutil
does not report it), so the project does not depend on psutil.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name, with its family and model numbers and its widest vector extension
    where /proc/cpuinfo gives them: cloud CPUs often report a bare "AMD EPYC", and two machines
    of that name here differed twofold in L1's timings (AVX2 against AVX-512)."""
    try:
        fields: dict[str, str] = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if not key.strip():
                break  # the first processor's block is enough
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        fields = {}
    name = fields.get("model name")
    if not name:
        return platform.processor() or platform.machine()
    flags = set(fields.get("flags", "").split())
    vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else None
    details = (
        [f"family {fields['cpu family']}, model {fields['model']}"]
        if "cpu family" in fields and "model" in fields
        else []
    )
    details += [vector] if vector else []
    return f"{name} ({'; '.join(details)})" if details else name


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
