"""service.machine: what a benchmark says about the machine it ran on."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.machine import cpu_model

CPUINFO = Path("/proc/cpuinfo")


def _first_block() -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in CPUINFO.read_text().splitlines():
        key, _, value = line.partition(":")
        if not key.strip():
            break
        fields.setdefault(key.strip(), value.strip())
    return fields


@pytest.mark.skipif(not CPUINFO.exists(), reason="no /proc/cpuinfo on this system")
def test_the_cpu_is_named_with_its_family_model_and_vector_width():
    fields = _first_block()
    described = cpu_model()
    assert described.startswith(fields["model name"])
    if "cpu family" in fields:
        assert f"family {fields['cpu family']}, model {fields['model']}" in described
    flags = fields.get("flags", "").split()
    if "avx512f" in flags:
        assert described.endswith("AVX-512)")
    elif "avx2" in flags:
        assert described.endswith("AVX2)")
