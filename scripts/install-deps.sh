#!/usr/bin/env bash
# Installs the Debian packages gridshard needs to build, test and run (torch: the Python module's tests take
# tensors, and `make bench` compares with it; Slurm and munge: `make test-slurm` brings up a one-node cluster;
# MPICH beside Open MPI, which stays the default: `make test-mpich`; parallel netCDF and PnetCDF: `eval --io
# collective`; iproute2: `make test-netns`; FFTW: the power spectrum; libsharp: the tests' reference for it; flake8:
# the Python linter of `make format-check`; ccache: the builds of the suite share the objects they compile alike).
# Idempotent: runs `apt-get update` and `apt-get install` only when a package is missing.
set -euo pipefail

packages=(
    build-essential cmake make pkg-config ccache
    clang-format flake8
    libgtest-dev libbenchmark-dev
    openmpi-bin libopenmpi-dev
    libcli11-dev nlohmann-json3-dev
    libnetcdf-dev netcdf-bin cdo nco libudunits2-dev libnetcdf-mpi-dev libpnetcdf-dev
    clang-14 libclang-rt-14-dev
    python3 python3-numpy python3-mpi4py python3-pybind11 python3-pytest python3-pytest-xdist python3-netcdf4 python3-xarray python3-matplotlib python3-torch python3-venv python3-pip
    slurm-wlm munge mpich libmpich-dev iproute2
    libfftw3-dev libsharp-dev
)

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
    sudo=sudo
else
    sudo=
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
