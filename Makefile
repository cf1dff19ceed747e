# gridshard: the entry points. `make demo` runs the main job, `make test` the whole suite.
# Every target installs missing Debian packages first (scripts/install-deps.sh is idempotent).

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?=
# Every build folder the suite configures compiles through ccache (scripts/install-deps.sh installs it), so what two
# of them compile alike is compiled once: the wheel's library is the release build's objects. CMake reads the
# variable when it first configures a folder; CMAKE_CXX_COMPILER_LAUNCHER= turns it off.
export CMAKE_CXX_COMPILER_LAUNCHER ?= ccache

.PHONY: all deps build demo demo-forecast test test-mpich test-slurm test-netns test-fast test-asan fuzz portable-bits test-ace test-wheel test-device bench format format-check clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) -- --no-print-directory

# The main job: `gridshard eval` on the built-in case (721 x 1440, 4 steps, 3 variables) over 4 ranks on a
# 1x2x2 mesh. Open MPI needs --oversubscribe on machines with fewer cores, and consent to run as root.
MPIEXEC ?= mpirun
MPIEXEC_FLAGS ?= --oversubscribe
demo: build
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
	$(MPIEXEC) -n 4 $(MPIEXEC_FLAGS) $(BUILD_DIR)/bin/gridshard eval --mesh 1x2x2

# The second demo: a forecast evaluation of the built-in ensemble forecast (181 x 360, 4 initial conditions x 8
# members x 9 six-hourly lead times) over 4 ranks on a 2x1x2 mesh, with the tropics and extra-tropics beside the
# globe; ACE's diagnostics files and their plots go to $(BUILD_DIR)/demo-forecast.
DEMO_FORECAST_DIR ?= $(BUILD_DIR)/demo-forecast
demo-forecast: build
	@mkdir -p $(DEMO_FORECAST_DIR)
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
	$(MPIEXEC) -n 4 $(MPIEXEC_FLAGS) $(BUILD_DIR)/bin/gridshard eval --mesh 2x1x2 --nlat 181 --nlon 360 \
	    --initial-conditions 4 --ensemble-size 8 --ntime 9 --region tropics --region northern_extratropics \
	    --region southern_extratropics --diagnostics $(DEMO_FORECAST_DIR) --json $(DEMO_FORECAST_DIR)/report.json
	PYTHONPATH=$(BUILD_DIR)/python /usr/bin/python3 -m gridshard.plot $(DEMO_FORECAST_DIR)

# The whole suite: formatting and the Python linter, the release build's tests, the sanitizer build's tests, a bounded fuzz run, the
# baseline-instruction-set build's bits, the MPICH build's tests, a one-node Slurm cluster's srun and sbatch, ranks
# in network namespaces of their own, ACE's own tests on gridshard's ACE backend, the wheel, and the GPU check (which
# says it is skipped where no CUDA device is present).
# Each stage prints the time it starts at (STAMP), so a run's log shows where its time went.
STAMP = @echo "make: $@ starts at $$(date +%T)"
test: format-check test-fast test-asan fuzz test-mpich portable-bits test-slurm test-netns test-ace test-wheel test-device
	@echo "make: test ends at $$(date +%T)"

test-fast: build
	$(STAMP)
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The suite's second build, in $(SECOND_DIR) (tests/second_build.sh): against Debian's MPICH, for the x86-64 baseline
# without the hot loops' run-time dispatch. test-mpich and portable-bits both run on it; the first builds it.
SECOND_DIR ?= build-second

# The second MPI: on the second build, its unit and 1- and 2-rank MPI tests, the 4-rank ones on the 1x2x2 mesh, and
# gridshard eval on 4 ranks against one process (tests/mpich_stage.sh).
test-mpich: deps
	$(STAMP)
	bash tests/mpich_stage.sh $(SECOND_DIR) $(JOBS)

# A one-node Slurm cluster from Debian's slurm-wlm and munge, started and stopped by the script in a temporary
# folder: srun -n 4 and sbatch of gridshard eval, and the Python suite on 4 tasks, bit-identical to one process.
test-slurm: build
	$(STAMP)
	bash tests/slurm/run_slurm_test.sh $(BUILD_DIR)

# Four ranks, each in a network and UTS namespace of its own (made and removed by the script; needs root),
# TCP only: MPI suites and gridshard eval against one process.
test-netns: build
	$(STAMP)
	bash tests/netns/run_netns_test.sh $(BUILD_DIR)

# Every instruction-set version of the hot loops gives the same bits: the second build (the x86-64 baseline) against
# the release build.
portable-bits: build
	$(STAMP)
	bash tests/portable_bits.sh $(BUILD_DIR) $(SECOND_DIR) $(JOBS)

# ACE's published package (fme, pinned with its torch in tests/ace/) in a project-local venv, kept in .ace/ between
# runs; its distributed and metric tests under mpirun at ACE's CI layouts; summary in $(BUILD_DIR)/ace/summary.txt.
test-ace: build
	$(STAMP)
	bash scripts/ace-venv.sh .ace/venv
	.ace/venv/bin/python tests/ace/run_ace_tests.py --build-dir $(BUILD_DIR)

# The Python suite of gradients on CUDA tensors at 1, 2 and 4 ranks, and what a call costs on the GPU, where a CUDA
# device is present (in ACE's venv, whose torch is a CUDA build); elsewhere it says so and succeeds.
test-device: build
	$(STAMP)
	bash tests/device/run_device_check.sh $(BUILD_DIR)

# `pip wheel .` (scikit-build-core, pyproject.toml) into $(BUILD_DIR)/wheel, installed in a fresh venv: the
# build tree's bits.
test-wheel: build
	$(STAMP)
	bash tests/python/wheel_test.sh $(BUILD_DIR)

# The suite under AddressSanitizer and UBSan at 1 to 4 ranks, one mesh of each family: 1x1x1; 1x1x2 (a rank that is
# its own neighbour on both sides); the uneven 3-rank splits of each axis (1x3x1, 1x1x3, 3x1x1); both splits at once
# (1x2x2), data ranks beside a split (2x2x1) and TCP. The sanitizers look for memory errors along the code paths, and
# the other meshes of a family take the same paths: the 2-rank lat and data splits, the 4-rank splits of one axis and
# the 6- and 8-rank meshes (half of the suite's time under the sanitizers) compare bits in test-fast's release
# build, as does the comparison with libsharp (a reference library: the transform's own suite, spectrum_test, runs
# here). The aggregator's test, the slowest under the sanitizers after the CLI's, runs there at 1x1x1, 1x1x3
# (uneven) and 1x2x2. ASAN_LABELS_EXCLUDE="no-sanitizer" ASAN_TESTS_EXCLUDE= runs every one.
ASAN_LABELS_EXCLUDE ?= no-sanitizer|np6|np8
ASAN_TESTS_EXCLUDE ?= ^spectrum_libsharp_test|^aggregator_test\.(np2\.|np3\.(1x3x1|3x1x1)|np4\.(1x4x1|1x1x4|2x2x1|4x1x1)|tcp\.)|\.np2\.(1x2x1|2x1x1)$$|\.np4\.(1x4x1|1x1x4|4x1x1)$$
# The instrumented build in $(ASAN_DIR), shared with `make fuzz`: clang with ASan and UBSan everywhere and libFuzzer's
# coverage in the library (GRIDSHARD_FUZZ), at -O1, the sanitizers' advice for speed with exact stacks.
INSTRUMENTED_CONFIGURE = CC=clang CXX=clang++ cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug \
	-DCMAKE_CXX_FLAGS_DEBUG="-g -O1" -DGRIDSHARD_FUZZ=ON -DGRIDSHARD_BUILD_BENCHMARKS=OFF $(CMAKE_FLAGS) >/dev/null
test-asan: deps
	$(STAMP)
	@$(INSTRUMENTED_CONFIGURE)
	@cmake --build $(ASAN_DIR) -j $(JOBS) -- --no-print-directory
	cd $(ASAN_DIR) && ctest --output-on-failure -j $(JOBS) -LE "$(ASAN_LABELS_EXCLUDE)" \
		$(if $(ASAN_TESTS_EXCLUDE),-E "$(ASAN_TESTS_EXCLUDE)")

# The CF reader's fuzz target (clang's libFuzzer, with ASan and UBSan; built in the instrumented build above) for
# FUZZ_SECONDS over a seed corpus of valid and cut-short files, from a fixed FUZZ_SEED so a run can be repeated;
# inputs that grow coverage accumulate in $(FUZZ_DIR)/corpus, crashes go to $(FUZZ_DIR)/crashes. Run longer with
# `make fuzz FUZZ_SECONDS=3600 FUZZ_SEED=0` (0: a new seed each run), netCDF-4 inputs with GRIDSHARD_FUZZ_HDF5=1.
FUZZ_DIR ?= $(ASAN_DIR)/fuzz
FUZZ_SECONDS ?= 60
FUZZ_SEED ?= 1
fuzz: deps
	$(STAMP)
	@$(INSTRUMENTED_CONFIGURE)
	@cmake --build $(ASAN_DIR) -j $(JOBS) --target cf_reader_fuzz -- --no-print-directory
	@/usr/bin/python3 tests/fuzz/make_seeds.py $(FUZZ_DIR)/seeds
	@mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/crashes
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp:print_suppressions=0 \
	$(ASAN_DIR)/bin/cf_reader_fuzz -seed=$(FUZZ_SEED) -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 \
		-print_final_stats=1 \
		-artifact_prefix=$(FUZZ_DIR)/crashes/ $(FUZZ_DIR)/corpus $(FUZZ_DIR)/seeds

# Benchmarks of the hot paths: prints a table and writes $(BUILD_DIR)/bench/results.json (docs/performance.md).
bench: build
	@bash scripts/install-deps.sh bench
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target gridshard_benchmarks -- --no-print-directory
	bash scripts/ace-venv.sh .ace/venv
	/usr/bin/python3 bench/run_bench.py --build-dir $(BUILD_DIR)

format:
	@git ls-files --cached --others --exclude-standard '*.hpp' '*.cpp' | xargs clang-format -i

# The C++ against .clang-format, and the Python of python/, bench/ and tests/ through Debian's flake8 (.flake8).
format-check: deps
	$(STAMP)
	@git ls-files --cached --others --exclude-standard '*.hpp' '*.cpp' | xargs clang-format --dry-run --Werror && echo "format-check: clean"
	@flake8 python bench tests && echo "flake8: clean"

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(SECOND_DIR)
