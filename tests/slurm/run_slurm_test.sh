#!/usr/bin/env bash
# Brings up a one-node Slurm cluster from Debian's slurm-wlm and munge in a temporary folder (its own munge
# key and socket, its own slurm.conf and free ports; nothing in /etc is touched), then runs under it:
#   - `srun -n 4 gridshard eval` on a 1x2x2 mesh, the built-in case and a netCDF file pair;
#   - `sbatch --wait tests/slurm/eval.sbatch` (the job script a user can copy);
#   - the Python module's suite on 4 tasks;
# and checks each JSON is bit-identical to one process. The daemons are stopped and the folder removed on
# exit, whatever happens. Usage: tests/slurm/run_slurm_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
for tool in munged mungekey slurmctld slurmd srun sbatch sinfo; do
    command -v "$tool" >/dev/null || { echo "run_slurm_test: $tool is missing (scripts/install-deps.sh installs slurm-wlm and munge)" >&2; exit 1; }
done
dir=$(mktemp -d /tmp/gridshard-slurm.XXXXXX)
cleanup() {
    local pids=()
    for file in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
        [ -f "$file" ] && pids+=("$(cat "$file")")
    done
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for _ in $(seq 100); do  # until every daemon has gone (10 s at most), then the folder
        alive=0
        for pid in "${pids[@]}"; do
            kill -0 "$pid" 2>/dev/null && alive=1
        done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    rm -rf "$dir"
}
trap cleanup EXIT
host=$(hostname -s)
read -r ctld_port slurmd_port < <(/usr/bin/python3 -c '
import socket
ports = []
sockets = [socket.socket() for _ in range(2)]
for s in sockets:
    s.bind(("", 0))
    ports.append(s.getsockname()[1])
print(*ports)')
mkdir -p "$dir/state" "$dir/spool" "$dir/jobs"
mungekey -c -k "$dir/munge.key" >/dev/null
chmod 600 "$dir/munge.key"
munged --key-file="$dir/munge.key" --socket="$dir/munge.socket" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" --force
cat > "$dir/slurm.conf" <<CONF
ClusterName=gridshard
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
NodeName=$host CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
    sinfo -h -o %t 2>/dev/null | grep -q idle && break
    sleep 0.5
done
if ! sinfo -h -o %t | grep -q idle; then
    echo "run_slurm_test: the node did not come up" >&2
    tail -20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2
    exit 1
fi
echo "run_slurm_test: one-node cluster '$host' up (slurmctld port $ctld_port, slurmd port $slurmd_port)"
export OMPI_MCA_mpi_yield_when_idle=1  # 4 tasks on fewer cores: idle ranks yield
gridshard=$build/bin/gridshard

same() {  # same JSON scores as one process (the mesh aside)
    /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
strip = lambda d: {k: v for k, v in d.items() if k != "mesh"}
if strip(a) != strip(b):
    sys.exit(f"run_slurm_test: {sys.argv[3]} differs from one process")
print(f"run_slurm_test: {sys.argv[3]}: bit-identical to one process (mesh {a['mesh']})")
PY
}

builtin=(--nlat 91 --nlon 180 --ntime 3)
"$gridshard" eval "${builtin[@]}" --quiet --json "$dir/one.json" >/dev/null
srun -n 4 "$gridshard" eval "${builtin[@]}" --mesh 1x2x2 --quiet --json "$dir/srun.json" >/dev/null
same "$dir/srun.json" "$dir/one.json" "srun -n 4 gridshard eval (built-in case)"

/usr/bin/python3 "$root/tests/cli/make_files.py" "$dir/t.nc" "$dir/p.nc"
"$gridshard" eval --truth "$dir/t.nc" --pred "$dir/p.nc" --quiet --json "$dir/one_files.json" >/dev/null
srun -n 4 "$gridshard" eval --truth "$dir/t.nc" --pred "$dir/p.nc" --mesh 1x2x2 --quiet \
    --json "$dir/srun_files.json" >/dev/null
same "$dir/srun_files.json" "$dir/one_files.json" "srun -n 4 gridshard eval (netCDF files)"

GRIDSHARD=$gridshard sbatch --wait --chdir="$dir/jobs" --output="$dir/jobs/%j.out" "$here/eval.sbatch" \
    "$dir/t.nc" "$dir/p.nc" "$dir/sbatch.json" >/dev/null
same "$dir/sbatch.json" "$dir/one_files.json" "sbatch eval.sbatch"

PYTHONPATH=$build/python GRIDSHARD_TEST_TORCH=1 OMP_NUM_THREADS=1 srun -n 4 /usr/bin/python3 -m pytest -q \
    -p no:cacheprovider --color=no "$root/tests/python/test_distributed.py" --mesh=1x2x2 | tail -1
echo "run_slurm_test: passed"
