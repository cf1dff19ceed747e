#!/usr/bin/env bash
# Creates the project-local virtual environment for ACE's tests (`make test-ace`): ACE's published package
# fme and the torch it needs, pinned in tests/ace/requirements-*.txt, from the Python package index.
#
#   scripts/ace-venv.sh [VENV_DIR]      (default .ace/venv; wheels are kept in .ace/wheels between runs)
#
# The venv sees Debian's site packages (for python3-mpi4py, built against the system's Open MPI); its own
# packages come first, so fme gets its numpy and torch 2.x, not Debian's. Every package is installed
# --no-deps from a local wheelhouse, filled once: pip never resolves (and never pulls torch's 2.5 GB CUDA
# stack). Re-running with the same pins and an existing venv does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.ace/venv}
wheels=${GRIDSHARD_ACE_WHEELS:-.ace/wheels}
python=/usr/bin/python3
requirements=(tests/ace/requirements-torch.txt tests/ace/requirements-fme.txt)
stamp="$venv/.gridshard-requirements"
want=$(cat "${requirements[@]}" | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi

bash scripts/install-deps.sh
pins() { grep -hv '^#' "$@" | grep -v '^$'; }
mkdir -p "$wheels"
# torch-harmonics is published as a source distribution only: built into a wheel once (pure Python here).
if ! $python -m pip download -q --no-deps --no-index --find-links "$wheels" -d "$wheels" \
        $(pins "${requirements[@]}") >/dev/null 2>&1; then
    echo "ace-venv: downloading the pinned wheels into $wheels" >&2
    $python -m pip download -q --no-deps --only-binary :all: -d "$wheels" \
        $(pins "${requirements[@]}" | grep -v '^torch_harmonics==')
    $python -m pip wheel -q --no-deps -w "$wheels" "$(pins tests/ace/requirements-fme.txt | grep '^torch_harmonics==')"
fi
rm -rf "$venv"
$python -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" --no-deps $(pins "${requirements[@]}")
"$venv/bin/python" -c "import fme.core.distributed, fme.core.metrics, torch, mpi4py; print('ace-venv: fme', fme.__version__, 'torch', torch.__version__)"
echo "$want" > "$stamp"
