#!/usr/bin/env bash
# The suite's second build, everything the first one is not: Debian's MPICH (4.0, ch4:ucx) in place of Open MPI,
# and the x86-64 baseline (SSE2) without the hot loops' run-time dispatch (GRIDSHARD_DISPATCH=OFF, -march=x86-64)
# in place of their AVX-512 and AVX2 versions. Its library, tool and tests (no Python module: Debian's mpi4py is
# built for Open MPI), and spectrum_bench, into SECOND_BUILD_DIR. One build serves two stages: tests/mpich_stage.sh
# runs MPICH's tests on it, and tests/portable_bits.sh compares its bits with the release build's. Idempotent:
# the second stage finds it built.
#
# Usage: tests/second_build.sh SECOND_BUILD_DIR [JOBS]
set -euo pipefail
build=$1
jobs=${2:-2}
for tool in mpicxx.mpich mpiexec.mpich; do
    command -v "$tool" >/dev/null || { echo "second_build: $tool is missing (scripts/install-deps.sh installs mpich)" >&2; exit 1; }
done
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMPI_C_COMPILER=/usr/bin/mpicc.mpich \
    -DMPI_CXX_COMPILER=/usr/bin/mpicxx.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich -DGRIDSHARD_PYTHON=OFF \
    -DGRIDSHARD_DISPATCH=OFF -DGRIDSHARD_ARCH=x86-64 -DGRIDSHARD_BUILD_BENCHMARKS=ON >"$build/configure.log"
if ! grep -q "MPI_CXX_LIB_NAMES:STRING=.*mpich" "$build/CMakeCache.txt"; then
    echo "second_build: $build did not find MPICH" >&2
    exit 1
fi
cmake --build "$build" -j "$jobs" -- --no-print-directory >/dev/null
cmake --build "$build" -j "$jobs" --target spectrum_bench -- --no-print-directory >/dev/null
