#!/usr/bin/env bash
# The hot loops choose their instruction set when the program starts (src/core/kernel_dispatch.hpp), and
# every version must give the same bits. The suite's second build (tests/second_build.sh) has no versions: it is
# built for the x86-64 baseline (SSE2 only), against MPICH. This checks that its `gridshard eval` (one process)
# writes the same JSON as the build under test, which runs the best version for this CPU (AVX-512 where it has it),
# and that its spectrum_bench writes the same spherical power spectra (docs/spectrum.md), one field and a batch of 16.
#
# Usage: tests/portable_bits.sh BUILD_DIR SECOND_BUILD_DIR [JOBS]
set -euo pipefail
build=$1
portable=$2
jobs=${3:-2}
bash tests/second_build.sh "$portable" "$jobs"
cmake --build "$build" -j "$jobs" --target spectrum_bench -- --no-print-directory >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
forecast="--initial-conditions 2 --ensemble-size 5 --region tropics"  # the ensemble statistics too
# --spectrum: the power spectra's fill, transform and Legendre sums too.
for options in "" "--summation fast" "--policy skip_nan" "--policy propagate" "$forecast" "$forecast --summation fast" \
    "--spectrum" "$forecast --spectrum --spectrum-convention full"; do
    for side in dispatch portable; do
        dir=$build
        [ "$side" = portable ] && dir=$portable
        # shellcheck disable=SC2086  # the options are words
        "$dir/bin/gridshard" eval --nlat 181 --nlon 360 --ntime 3 $options --quiet --json "$out/$side.json" >/dev/null
    done
    if ! cmp -s "$out/dispatch.json" "$out/portable.json"; then
        echo "portable_bits: gridshard eval $options differs between the dispatching and the baseline build" >&2
        diff "$out/dispatch.json" "$out/portable.json" | head -20 >&2
        exit 1
    fi
done
for side in dispatch portable; do
    dir=$build
    [ "$side" = portable ] && dir=$portable
    "$dir/bin/spectrum_bench" --nlat 181 --nlon 360 --repetitions 1 --dump "$out/$side" >/dev/null
done
for batch in c1 c16; do
    if ! cmp -s "$out/dispatch.$batch.bin" "$out/portable.$batch.bin"; then
        echo "portable_bits: spectrum_bench's spectra ($batch) differ between the dispatching and baseline builds" >&2
        exit 1
    fi
done
echo "portable_bits: the dispatching build and the x86-64 baseline build give the same bits"
