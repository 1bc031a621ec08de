# The front door. `make demo` and `make test` are the whole set-up on a fresh
# Debian machine with gcc, cmake and make.
MAKEFLAGS += --no-print-directory
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DVRAM_WERROR=ON
endif

.PHONY: all build demo test test-deps test-plain test-asan test-tsan bench install clean

all: build

build:
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@demo/demo.sh $(BUILD)

# Every test, plainly, then under AddressSanitizer + UndefinedBehaviorSanitizer,
# then the threaded tests under ThreadSanitizer.
test: test-deps test-plain test-asan test-tsan

# Debian packages some tests need (clang's libFuzzer, Slurm); see the script.
test-deps:
	@scripts/test-deps.sh

test-plain: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan:
	@cmake -S . -B $(BUILD)-asan $(CMAKE_FLAGS) -DVRAM_SANITIZE=address,undefined >/dev/null
	@cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ctest --output-on-failure -j $(JOBS)

test-tsan:
	@cmake -S . -B $(BUILD)-tsan $(CMAKE_FLAGS) -DVRAM_SANITIZE=thread >/dev/null
	@cmake --build $(BUILD)-tsan -j $(JOBS)
	cd $(BUILD)-tsan && ctest --output-on-failure -j $(JOBS) -L threads

TRACES ?= ../shared/traces
bench: build
	@echo "machine: $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $$(nproc) cores"
	taskset -c $$(( $$(nproc) - 1 )) $(BUILD)/vram-replay $(TRACES)/w1.csv.gz $(TRACES)/w2.csv.gz
	@echo "interposer overhead (null driver: the difference is what vram adds per call):"
	@LD_LIBRARY_PATH=$(BUILD)/bench-driver taskset -c $$(( $$(nproc) - 1 )) $(BUILD)/vram-bench-overhead
	@LD_LIBRARY_PATH=$(BUILD)/bench-driver VRAM_MEMORY_LIMIT=1TiB LD_PRELOAD=$(CURDIR)/$(BUILD)/libvram-preload.so \
	  taskset -c $$(( $$(nproc) - 1 )) $(BUILD)/vram-bench-overhead
	@echo "vramd with 1000 clients, then under attack (simulated NVML):"
	@LD_LIBRARY_PATH=$(BUILD)/sim $(BUILD)/vram-bench-daemon $(BUILD)/vramd

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan
