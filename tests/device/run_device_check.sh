#!/usr/bin/env bash
# The GPU check: gridshard's Python suites of gradients and of the device path on CUDA tensors at 1, 2 and 4 ranks
# sharing one GPU (gloo between them: NCCL refuses two ranks on one device), and what a call costs there by the device
# path, the staging path and ACE's own way (device_figures.py; one rank over NCCL, four over gloo). Runs wherever a CUDA device is present; elsewhere it says so and succeeds.
# It takes ACE's venv (scripts/ace-venv.sh), whose torch is a CUDA build; the module from BUILD_DIR.
#
# Usage: tests/device/run_device_check.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
venv=.ace/venv/bin/python
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "run_device_check: no CUDA device here: skipped (the CUDA path is untested on this machine)"
    exit 0
fi
[ -x "$venv" ] || bash scripts/ace-venv.sh .ace/venv
if ! "$venv" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "run_device_check: nvidia-smi sees a GPU but torch cannot use it: skipped"
    exit 0
fi
nvidia-smi -L
export PYTHONPATH=$PWD/$build/python GRIDSHARD_TEST_DEVICE=cuda GRIDSHARD_TEST_TORCH=1 OMP_NUM_THREADS=2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
for run in "1 1x1x1" "2 1x1x2" "4 1x2x2"; do
    set -- $run
    echo "== test_gradients.py on CUDA tensors, $1 rank(s), mesh $2"
    mpirun -n "$1" --oversubscribe "$venv" -m pytest -q -p no:cacheprovider --color=no \
        tests/python/test_gradients.py "--mesh=$2"
    echo "== test_device_path.py on CUDA tensors, $1 rank(s), mesh $2 (the device path against the library's bits)"
    mpirun -n "$1" --oversubscribe "$venv" -m pytest -q -p no:cacheprovider --color=no \
        tests/python/test_device_path.py "--mesh=$2"
done
echo "== what a call costs on the GPU: one rank over NCCL, then 4 ranks (1x2x2) sharing it over gloo"
mpirun -n 1 "$venv" tests/device/device_figures.py --mesh 1x1x1 --backend nccl
mpirun -n 4 --oversubscribe "$venv" tests/device/device_figures.py --mesh 1x2x2 --backend gloo
