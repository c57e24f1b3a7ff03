"""scripts/llama-cmake-args: llama.cpp is built for the instruction sets the CPU lists, no more."""

from __future__ import annotations

import subprocess

import pytest

from service.settings import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "llama-cmake-args"
AVX2 = "fpu sse4_2 avx avx2 fma f16c"
AVX512 = f"{AVX2} avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16"


def cmake_args(tmp_path, flags: str | None) -> list[str]:
    cpuinfo = tmp_path / "cpuinfo"
    if flags is not None:
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    out = subprocess.run(
        ["sh", str(SCRIPT)],
        env={"CPUINFO": str(cpuinfo), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


@pytest.mark.parametrize("flags", [AVX2, AVX512, AVX512 + " avx_vnni amx_tile amx_int8", "", None])
def test_never_the_native_build(tmp_path, flags):
    # GGML_NATIVE=ON also enables AMX, whose build crashed in its first decode on this Xeon.
    args = cmake_args(tmp_path, flags)
    assert args[0] == "-DGGML_NATIVE=OFF"
    assert not [a for a in args if "AMX" in a]


def test_avx512_only_where_the_cpu_lists_it(tmp_path):
    assert not [a for a in cmake_args(tmp_path, AVX2) if "AVX512" in a]
    assert "-DGGML_AVX2=ON" in cmake_args(tmp_path, AVX2)
    full = cmake_args(tmp_path, AVX512)
    assert {"-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX512_BF16=ON"} <= set(full)
    # avx512bw missing: no AVX-512 at all, since ggml's AVX512 build needs the whole family.
    partial = cmake_args(tmp_path, AVX512.replace(" avx512bw", ""))
    assert not [a for a in partial if "AVX512" in a]


def test_unknown_cpu_gets_the_portable_build(tmp_path):
    assert cmake_args(tmp_path, None) == ["-DGGML_NATIVE=OFF"]
