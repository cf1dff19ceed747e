#!/usr/bin/env bash
# gridshard against a second MPI: Debian's MPICH (4.0, ch4:ucx) instead of Open MPI, on the suite's second build
# (tests/second_build.sh: MPICH, and the x86-64 baseline that tests/portable_bits.sh compares). Runs the unit tests
# and every MPI suite at 1 and 2 ranks and on the 4-rank 1x2x2 mesh (but the aggregator's, which the 4-rank eval runs
# cover) under MPICH's mpiexec (hydra), and checks that `gridshard eval` on 4 ranks (1x2x2 and 2x2x1), two fields and
# a forecast, writes the JSON of one process. MPICH busy-polls while it waits, so 6 and 8 ranks on a 2-core machine
# take minutes a test; those run with Open MPI only. Debian's parallel netCDF and PnetCDF are built for Open MPI, so
# this build has no collective I/O: `eval --io collective` must say so.
#
# Usage: tests/mpich_stage.sh SECOND_BUILD_DIR [JOBS]
set -euo pipefail
build=$1
jobs=${2:-2}
bash tests/second_build.sh "$build" "$jobs"
(cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 180 -L "unit|np1|np2")
# Of the 4-rank meshes, the one that splits latitude and longitude at once: the 2-rank meshes cover each split
# alone, Open MPI runs every mesh, and MPICH's busy polling makes each 4-rank suite take about a minute here.
# The aggregator at 4 ranks is the 4-rank eval runs below (1x2x2 and 2x2x1, a forecast among them); its suite runs at
# 1 and 2 ranks here (76 of the 4-rank suites' 180 s under MPICH's busy polling). So do the flood fill's and the
# spectrum's (44 s more): the eval runs below take the spectrum's transposes at 4 ranks, and their message patterns
# (neighbours, all-to-all) are the 2-rank ones'.
(cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 180 -L np4 -R 'np4\.1x2x2$' \
    -E '^(aggregator_test|flood_fill_test|spectrum_test)\.')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
compare() {
    /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
strip = lambda d: {k: v for k, v in d.items() if k not in ("mesh", "forecast")}
if strip(a) != strip(b):
    sys.exit(f"mpich_stage: {sys.argv[3]} differs from one process")
PY
}
for case in "two fields:--nlat 91 --nlon 180 --ntime 3 --spectrum" \
            "forecast:--nlat 46 --nlon 90 --ntime 3 --initial-conditions 2 --ensemble-size 4 --region tropics"; do
    name=${case%%:*}
    # shellcheck disable=SC2206  # the options are words
    options=(${case#*:})
    "$build/bin/gridshard" eval "${options[@]}" --quiet --json "$out/one.json" >/dev/null
    for mesh in 1x2x2 2x2x1; do
        mpiexec.mpich -n 4 "$build/bin/gridshard" eval "${options[@]}" --mesh "$mesh" --quiet \
            --json "$out/four.json" >/dev/null
        compare "$out/four.json" "$out/one.json" "gridshard eval ($name) on $mesh under MPICH"
    done
done
# Debian's parallel netCDF and PnetCDF are Open MPI's: this build has no collective I/O, and says so.
if ! grep -q "collective parallel I/O OFF" "$build/configure.log"; then
    echo "mpich_stage: the MPICH build enabled collective I/O with Open MPI's parallel netCDF" >&2
    exit 1
fi
set +e
message=$("$build/bin/gridshard" eval --nlat 10 --nlon 20 --ntime 1 --io collective --quiet 2>&1 >/dev/null)
status=$?
set -e
if [ "$status" -ne 2 ] || [[ "$message" != *"--io collective: collective I/O is unavailable in this build"* ]]; then
    echo "mpich_stage: --io collective in a build without it: status $status, '$message'" >&2
    exit 1
fi
echo "mpich_stage: MPICH build passes its unit and 1-, 2- and 4-rank MPI tests; eval gives one process's bits;" \
    "--io collective says it is unavailable"
