#!/usr/bin/env bash
# `pip wheel .` builds the Python package through scikit-build-core (pyproject.toml); the wheel, installed
# into a fresh venv, computes what the build tree's module computes, bit for bit.
#   tests/python/wheel_test.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(realpath "${1:-build}")
work="$build/wheel"
rm -rf "$work"
mkdir -p "$work"
# Configured as `make build` configures the release build (the compiler `c++`, Unix Makefiles), so that the wheel's
# library is the release build's objects out of ccache (Makefile) rather than a second compile: ccache's key holds the
# compiler's name and the dependency file's target, which sysconfig's compiler name and pip's default generator
# (Ninja) change. The compiler and the flags are the same either way.
export CXX=${CXX:-c++} CMAKE_GENERATOR=${CMAKE_GENERATOR:-Unix Makefiles}
/usr/bin/python3 -m pip wheel . --no-deps -q -w "$work/dist"
# Every pure-Python file of the package, its subpackages' (gridshard/ace/) included, is in the wheel.
expected=$(cd python && find gridshard -name '*.py' | LC_ALL=C sort)
in_wheel=$(/usr/bin/python3 -c 'import sys, zipfile
print("\n".join(sorted(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.endswith(".py"))))' "$work"/dist/gridshard-*.whl)
[ "$expected" = "$in_wheel" ] || { echo "wheel_test: the wheel's Python files are not python/gridshard's:" >&2
                                   diff <(echo "$expected") <(echo "$in_wheel") >&2; exit 1; }
/usr/bin/python3 -m venv --system-site-packages "$work/venv"  # numpy and mpi4py from Debian
"$work/venv/bin/python" -m pip install -q --no-deps --no-index "$work"/dist/gridshard-*.whl
check='import gridshard, numpy as np
x = np.random.default_rng(1).standard_normal((3, 19, 24))
w = gridshard.spherical_area_weights(np.linspace(-80, 80, 19), 24)
d = gridshard.Distributed()
print(gridshard.__file__.split("/")[-3], [v.hex() for v in np.concatenate([d.weighted_std(x, w), d.gradient_magnitude_percent_diff(x, x * x, w)])])'
from_wheel=$(cd "$work" && "$work/venv/bin/python" -c "$check")
from_build=$(cd "$work" && PYTHONPATH="$build/python" /usr/bin/python3 -c "$check")
echo "wheel: $from_wheel"
echo "build: $from_build"
[ "${from_wheel%% *}" = site-packages ] || { echo "wheel_test: the wheel's package was not the one imported" >&2; exit 1; }
[ "${from_wheel#* }" = "${from_build#* }" ] || { echo "wheel_test: the wheel and the build tree differ" >&2; exit 1; }
echo "wheel_test: the wheel gives the build tree's bits"
