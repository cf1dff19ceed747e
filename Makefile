# gridshard: the entry points. `make demo` runs the main job, `make test` the whole suite.
# Every target installs missing Debian packages first (scripts/install-deps.sh is idempotent).

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build demo test test-fast test-asan format format-check clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: the decomposition of the 0.25-degree grid over a 4-rank 1x2x2 mesh.
demo: build
	$(BUILD_DIR)/bin/gridshard decompose --nlat 721 --nlon 1440 --mesh 1x2x2

# The whole suite: formatting, the release build's tests, then the sanitizer build's tests.
test: format-check test-fast test-asan

test-fast: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	@cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DGRIDSHARD_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_DIR) -j $(JOBS)
	cd $(ASAN_DIR) && ctest --output-on-failure -j $(JOBS) -LE no-sanitizer

format:
	@git ls-files --cached --others --exclude-standard '*.hpp' '*.cpp' | xargs clang-format -i

format-check: deps
	@git ls-files --cached --others --exclude-standard '*.hpp' '*.cpp' | xargs clang-format --dry-run --Werror && echo "format-check: clean"

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR)
