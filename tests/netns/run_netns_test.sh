#!/usr/bin/env bash
# Ranks that share nothing but the file system, as on different nodes: each of 4 ranks runs in a network
# namespace of its own (its own loopback and one veth address on a bridge the script creates) and a UTS
# namespace of its own (its own host name), started by Open MPI's rsh launcher through an agent that enters
# the namespaces (tests/netns/netns_agent.sh), with TCP as the only transport. No two ranks share a host
# name, an address or shared memory. Runs, each against one process:
#   - the ranks' network namespaces and host names, which must all differ;
#   - the MPI suites metrics_test, halo_exchange_test and parallel_io_test at 1x2x2;
#   - `gridshard eval` on the built-in case at 1x2x2 and 2x2x1, on a netCDF-4 pair (read collectively, the
#     default) and with --io collective on a forecast whose diagnostics must be the same bytes.
# Every namespace, link and folder it makes is removed on exit, whatever happens. Needs root (ip netns).
# Usage: tests/netns/run_netns_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ranks=4
if [ "$(id -u)" -ne 0 ]; then
    echo "run_netns_test: needs root to create network namespaces (ip netns)" >&2
    exit 1
fi
command -v ip >/dev/null || { echo "run_netns_test: ip (iproute2) is missing" >&2; exit 1; }
# Names and a subnet of this run's own, so that runs side by side do not meet.
tag=$(( $$ % 10000 ))
subnet="10.$(( 100 + $$ % 100 )).$(( $$ / 100 % 250 ))"
bridge="gsbr$tag"
dir=$(mktemp -d /tmp/gridshard-netns.XXXXXX)
namespaces=()
cleanup() {
    for ns in "${namespaces[@]}"; do
        ip netns del "$ns" 2>/dev/null || true  # takes its end of the veth pair, and so the pair, with it
    done
    ip link del "$bridge" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

ip link add "$bridge" type bridge
ip addr add "$subnet.1/24" dev "$bridge"
ip link set "$bridge" up
: >"$dir/hosts"
for i in $(seq "$ranks"); do
    ns="gs$tag-n$i"
    ip netns add "$ns"
    namespaces+=("$ns")
    ip link add "gsv$tag-$i" type veth peer name eth0 netns "$ns"
    ip link set "gsv$tag-$i" master "$bridge"
    ip link set "gsv$tag-$i" up
    ip netns exec "$ns" ip addr add "$subnet.$((10 + i))/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
    echo "$ns slots=1" >>"$dir/hosts"
done

# One rank a namespace (slots=1), each started by its own daemon, which Open MPI treats as a node of its own.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export PMIX_MCA_gds=hash  # the daemons share /tmp: no shared-memory key-value store between "nodes"
launch=(mpiexec --hostfile "$dir/hosts" --mca plm_rsh_agent "$here/netns_agent.sh"
        --mca btl tcp,self --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24")

mpiexec_ns() {
    timeout 300 "${launch[@]}" -n "$ranks" "$@"
}

# Every rank in a namespace of its own, with a host name of its own.
seen=$(mpiexec_ns sh -c 'echo "$(readlink /proc/self/ns/net) $(hostname)"' 2>"$dir/err" | sort -u)
if [ "$(echo "$seen" | awk '{print $1}' | sort -u | wc -l)" -ne "$ranks" ] ||
   [ "$(echo "$seen" | awk '{print $2}' | sort -u | wc -l)" -ne "$ranks" ]; then
    echo "run_netns_test: the ranks do not have namespaces and host names of their own: $seen" >&2
    cat "$dir/err" >&2
    exit 1
fi
echo "run_netns_test: $ranks ranks, each in its own network and UTS namespace ($subnet.0/24, TCP only)"

for suite in metrics_test halo_exchange_test parallel_io_test; do
    if ! mpiexec_ns "$build/bin/$suite" --mesh=1x2x2 --gtest_brief=1 >"$dir/$suite.log" 2>&1; then
        cat "$dir/$suite.log" >&2
        echo "run_netns_test: $suite failed with ranks in separate namespaces" >&2
        exit 1
    fi
done
echo "run_netns_test: metrics_test, halo_exchange_test, parallel_io_test (1x2x2) passed"

same() {  # same JSON scores as one process
    /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
if a["variables"] != b["variables"]:
    sys.exit(f"run_netns_test: {sys.argv[3]} differs from one process")
PY
}
gridshard=$build/bin/gridshard
builtin=(eval --nlat 91 --nlon 180 --ntime 3 --quiet)
"$gridshard" "${builtin[@]}" --json "$dir/one.json" >/dev/null
for mesh in 1x2x2 2x2x1; do
    mpiexec_ns "$gridshard" "${builtin[@]}" --mesh "$mesh" --json "$dir/four.json" >/dev/null
    same "$dir/four.json" "$dir/one.json" "eval (built-in) on $mesh"
done
PYTHONPATH="$root/tests/cli" /usr/bin/python3 -c "
import make_files
make_files.write('$dir/t.nc', 46, 90, 5, seed=1)
make_files.write('$dir/p.nc', 46, 90, 5, seed=2, shift=0.3)"
files=(eval --truth "$dir/t.nc" --pred "$dir/p.nc" --quiet)
"$gridshard" "${files[@]}" --io independent --json "$dir/one.json" >/dev/null
mpiexec_ns "$gridshard" "${files[@]}" --mesh 2x1x2 --json "$dir/four.json" >/dev/null
same "$dir/four.json" "$dir/one.json" "eval (netCDF-4, read collectively) on 2x1x2"
forecast=(eval --nlat 46 --nlon 90 --ntime 3 --initial-conditions 2 --ensemble-size 4 --quiet)
mkdir "$dir/one" "$dir/four"
"$gridshard" "${forecast[@]}" --diagnostics "$dir/one" --json "$dir/one.json" >/dev/null
mpiexec_ns "$gridshard" "${forecast[@]}" --mesh 1x2x2 --io collective --diagnostics "$dir/four" \
    --json "$dir/four.json" >/dev/null
same "$dir/four.json" "$dir/one.json" "eval (forecast, --io collective) on 1x2x2"
for f in mean_diagnostics.nc zonal_mean_diagnostics.nc time_mean_diagnostics.nc; do
    cmp "$dir/one/$f" "$dir/four/$f" || { echo "run_netns_test: $f written collectively differs" >&2; exit 1; }
done
echo "run_netns_test: gridshard eval (built-in, netCDF-4, forecast with collective diagnostics) gives one process's bits"
echo "run_netns_test: passed"
