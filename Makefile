# The front door. `make demo` and `make test` are the whole set-up on a fresh
# Debian machine with gcc, cmake and make.
MAKEFLAGS += --no-print-directory
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
# Tests at once: twice the cores, since most tests wait (on daemons,
# timeouts, each other) far more than they compute.
TEST_JOBS ?= $(shell echo $$((2 * $(JOBS))))
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DVRAM_WERROR=ON
endif

.PHONY: all build demo test test-deps test-plain test-asan test-tsan bench install clean

all: build

build:
	@cmake -S . -B "$(BUILD)" $(CMAKE_FLAGS) >/dev/null
	@cmake --build "$(BUILD)" -j $(JOBS)

demo: build
	@demo/demo.sh "$(BUILD)"

# Every test, plainly, then under AddressSanitizer + UndefinedBehaviorSanitizer,
# then the threaded tests under ThreadSanitizer (scripts/test-all.sh): the
# sanitizers' trees are built while the plain tests run, a stage that fails
# does not stop the next, and the run ends with the time of each stage and
# fails naming those that failed.
test:
	@JOBS="$(JOBS)" TEST_JOBS="$(TEST_JOBS)" CMAKE_FLAGS="$(CMAKE_FLAGS)" scripts/test-all.sh "$(BUILD)"

# Debian packages some tests need (clang's libFuzzer, Slurm); see the script.
test-deps:
	@scripts/test-deps.sh

# scripts/ctest.sh runs ctest with a /tmp of the tests' own and fails the run
# if anything is left there.
test-plain: build
	scripts/ctest.sh "$(BUILD)" --output-on-failure -j $(TEST_JOBS)

test-asan:
	@cmake -S . -B "$(BUILD)-asan" $(CMAKE_FLAGS) -DVRAM_SANITIZE=address,undefined >/dev/null
	@cmake --build "$(BUILD)-asan" -j $(JOBS)
	scripts/ctest.sh "$(BUILD)-asan" --output-on-failure -j $(TEST_JOBS)

test-tsan:
	@cmake -S . -B "$(BUILD)-tsan" $(CMAKE_FLAGS) -DVRAM_SANITIZE=thread >/dev/null
	@cmake --build "$(BUILD)-tsan" -j $(JOBS)
	scripts/ctest.sh "$(BUILD)-tsan" --output-on-failure -j $(TEST_JOBS) -L threads

# make bench: the allocator on the W1 and W2 traces (those in TRACES when
# they are there, else written by vram-tracegen), the interposer's overhead,
# vramd with 1,000 clients, and its admission with the driver's limits, and
# containers as vramd jobs (a start with the hook, a kill to the grant back).
TRACES ?= ../shared/traces
bench: build
	@echo "machine: $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $$(nproc) cores"
	@bench/allocator.sh "$(BUILD)" $(TRACES)
	@echo "interposer overhead (null driver: the difference is what vram adds per call):"
	@LD_LIBRARY_PATH="$(BUILD)/bench-driver" taskset -c $$(( $$(nproc) - 1 )) "$(BUILD)/vram-bench-overhead"
	@LD_LIBRARY_PATH="$(BUILD)/bench-driver" VRAM_MEMORY_LIMIT=64GiB LD_PRELOAD="$(CURDIR)/$(BUILD)/libvram-preload.so" \
	  taskset -c $$(( $$(nproc) - 1 )) "$(BUILD)/vram-bench-overhead"
	@LD_LIBRARY_PATH="$(BUILD)/bench-driver" VRAM_DAEMON=off taskset -c $$(( $$(nproc) - 1 )) \
	  "$(BUILD)/vram" run --limit 64GiB --log off -- "$(BUILD)/vram-bench-overhead"
	@LD_LIBRARY_PATH="$(BUILD)/bench-driver" VRAM_DAEMON=off taskset -c $$(( $$(nproc) - 1 )) \
	  "$(BUILD)/vram" run --limit 64GiB --log off -- "$(BUILD)/vram-bench-overhead" --members 7
	@tmp=$$(mktemp -d) && LD_LIBRARY_PATH="$(BUILD)/bench-driver" VRAM_DAEMON=off taskset -c $$(( $$(nproc) - 1 )) \
	  "$(BUILD)/vram" run --limit 64GiB --log off --record $$tmp/overhead.vrec -- "$(BUILD)/vram-bench-overhead" --pairs 200000; \
	  rc=$$?; rm -rf $$tmp; exit $$rc
	@echo "what the driver holds, read from NVML near the budget (simulated driver and NVML, whose"
	@echo "allocations are slow: the difference is one reading per allocation):"
	@tmp=$$(mktemp -d) && export LD_LIBRARY_PATH=$(BUILD)/sim VRAM_SIM_DIR=$$tmp VRAM_DAEMON=off && \
	  OVERHEAD_LABEL="far from the budget" taskset -c $$(( $$(nproc) - 1 )) \
	  $(BUILD)/vram run --limit 64GiB --log off -- $(BUILD)/vram-bench-overhead --context --pairs 20000 && \
	  OVERHEAD_LABEL="within 64 MiB of it" taskset -c $$(( $$(nproc) - 1 )) \
	  $(BUILD)/vram run --limit 580MiB --log off -- $(BUILD)/vram-bench-overhead --context --pairs 20000; \
	  rc=$$?; rm -rf $$tmp; exit $$rc
	@echo "contexts and modules charged to the budget (simulated driver and NVML):"
	@bench/contexts.sh "$(BUILD)"
	@echo "vramd with 1000 clients, with 10000 idle ones, then under attack (simulated NVML):"
	@LD_LIBRARY_PATH="$(BUILD)/sim" "$(BUILD)/vram-bench-daemon" "$(BUILD)/vramd"
	@echo "vramd's admission with the driver's per-cgroup limits (simulated R615; root, cgroup2):"
	@LD_LIBRARY_PATH="$(BUILD)/sim" "$(BUILD)/vram-bench-limits" "$(BUILD)/vramd"
	@echo "vramd's history with 1000 clients, then 10000 (CPU time):"
	@"$(BUILD)/vram-bench-history"
	@echo "recording GPU memory events, and reading a million of them:"
	@bench/record.sh "$(BUILD)"
	@echo "containers as vramd jobs (podman and runc, simulated GPU; root):"
	@bench/containers.sh "$(BUILD)"

# make install [PREFIX=/usr/local] [DESTDIR=staging]: as people expect of it.
# Without PREFIX, the prefix the build was configured with (CMAKE_INSTALL_PREFIX,
# /usr/local unless set). DESTDIR, from make's command line or the environment,
# is what cmake --install reads from its environment.
install: build
	DESTDIR="$(DESTDIR)" cmake --install "$(BUILD)" $(if $(PREFIX),--prefix "$(PREFIX)")

clean:
	rm -rf "$(BUILD)" "$(BUILD)-asan" "$(BUILD)-tsan"
