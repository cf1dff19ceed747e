"""gridshard's Python suites run under mpirun with the plugin mpi_pytest (one rank prints, a failure on one rank
fails every rank, a stuck rank ends the run)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

pytest_plugins = ["mpi_pytest"]
