# softverbs: the two commands are `make demo` and `make check`; `make bench`
# measures it.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
BENCH_DIR  ?= results
BENCH_ARGS ?=

.PHONY: all deps build demo check check-plain check-nodirect check-asan build-asan check-tsan build-tsan bench clean interop soak fuzz middleware middleware-asan deb distros distros-build

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) -- --no-print-directory

# The main job on the auto-started device: Debian's unmodified
# ibv_rc_pingpong as a server and a client process, a real RC transfer
# through sv0 (the daemon starts by itself and leaves when idle).
demo: build
	@bash tests/e2e/demo.sh $(BUILD)

# Every test through ctest, the end-to-end tests again on the daemon path
# alone (SOFTVERBS_DIRECT=0: no WRITE or READ runs in the initiating
# process, docs/DESIGN.md "The direct path"), then every test again under
# ASan+UBSan.
check: build
	@$(MAKE) --no-print-directory check-plain check-nodirect check-asan

check-plain:
	ctest --test-dir $(BUILD) --output-on-failure -j2 -LE middleware

# (the benchmarks measure both paths themselves)
check-nodirect:
	SOFTVERBS_DIRECT=0 ctest --test-dir $(BUILD) --output-on-failure -j2 \
		-LE middleware -R '^e2e_' -E '^e2e_(bench_short|budgets)$$'

build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSV_SANITIZE=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j$(JOBS) -- --no-print-directory

check-asan: build-asan
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j2 -LE 'middleware|package'

# ThreadSanitizer (SV_TSAN): the library, the daemon and our own test
# programs instrumented, then the tests that run threads in one process
# (teardown's busy engine thread, test_wr's two posters on one QP and two
# pollers of one CQ, test_nosyscall's worker, test_fatal's and
# test_rdmacm's event waiters; thread and resource domains) and more
# end-to-end ones: the daemon's own threads behind each. A report fails
# the test: the program stops with it (halt_on_error), and isolated.sh
# finds the daemon's in its log.
# Left out: the scripts that run Debian's uninstrumented programs; tests
# of the process's own allocations and mappings, which TSan's runtime
# changes (noalloc's malloc interposer, nofile's count of mappings); and,
# one thread each and slow under TSan, test_data (over ctest's 120 s
# beside another test), test_exhaust (a minute alone) and test_malformed
# (its fuzz waits 5 s for each answer).
TSAN_TESTS ?= ^(test_(engine|atomic|objtab)|unit_mm|e2e_test_(teardown|direct|direct_maps_text|fatal|resdom|td|wr|nosyscall|rdmacm|errors|idle|xrc|semantics|middleware|verbs|qp_api|dm|why|inject|import|odp|awrite|atomics|masked|mcast|tm))$$

build-tsan: deps
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSV_TSAN=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j$(JOBS) -- --no-print-directory

check-tsan: build-tsan
	TSAN_OPTIONS='halt_on_error=1 second_deadlock_stack=1' \
		ctest --test-dir $(TSAN_BUILD) --output-on-failure -j2 -R '$(TSAN_TESTS)'

# The libFuzzer targets (tests/fuzz, docs/FUZZING.md: fuzz_cm_mad, fuzz_roce,
# fuzz_cmd, fuzz_wqe, fuzz_ucma, fuzz_view, fuzz_net), built
# with clang, ASan and UBSan in FUZZ_BUILD, each run for FUZZ_SECONDS over
# its seed corpus; the corpus they grow stays in FUZZ_BUILD/corpus, a crash's
# input in FUZZ_BUILD/corpus/crash-*. (make check runs each for 10 s.)
# A Debian package of the build (scripts/mkdeb.sh): $(BUILD)/softverbs_*.deb,
# which installs beside Debian's rdma-core.
deb: build
	@scripts/mkdeb.sh $(BUILD)

# Our library under every rdma-core Debian has (issue 36): roots of DISTROS
# made by debootstrap with Debian's verbs consumers (cached in
# $(BUILD)/distros), every consumer relocated against the build, then
# devinfo, pingpong, perftest, rping and UCX on sv0 in each
# (tests/distros/run.sh). Root and Debian's mirror for a cold cache.
# distros-build: the build itself on Debian 13 (gcc 14, CMake 3.31,
# rdma-core 56): `make demo` and `make check` in a fresh trixie root, the
# working tree copied in (tests/distros/build.sh; about 30 minutes, a whole
# second make check: its own command, not part of .ci/run's 90 minutes).
DISTROS ?= trixie sid
DISTROS_BUILD ?= trixie
distros: build
	@bash tests/distros/run.sh $(BUILD) $(DISTROS)

distros-build:
	@for s in $(DISTROS_BUILD); do bash tests/distros/build.sh $(BUILD) $$s || exit 1; done

fuzz: deps
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DSV_FUZZ=ON \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	@cmake --build $(FUZZ_BUILD) -j$(JOBS) -- --no-print-directory
	@for f in $(FUZZ_BUILD)/bin/fuzz_*; do \
		n=$${f##*/fuzz_}; \
		bash tests/fuzz/run.sh $$f tests/fuzz/seeds/$$n \
			$(FUZZ_BUILD)/corpus/$$n $(FUZZ_SECONDS) || exit 1; \
	done

# softverbs next to the copy limits (memcpy, process_vm_writev), Debian's
# perftest and UCX's ucx_perftest, rdma_cm connection setup (Debian's cmtime)
# next to TCP's connect/accept, on this machine, in one run: the table,
# results.json, the plots and raw logs in $(BENCH_DIR)/DATE, which
# $(BENCH_DIR)/latest points to. BENCH_ARGS=--short for a quick one.
bench: build
	@d=$(BENCH_DIR)/$$(date +%Y%m%d-%H%M%S); \
	SV_BUILD_DIR=$(BUILD) bash bench/run.sh $(BENCH_ARGS) $$d; rc=$$?; \
	ln -sfn $$(basename $$d) $(BENCH_DIR)/latest; exit $$rc

# Against Linux: Debian's kernel rdma_rxe in a qemu guest (software
# emulation) on a tap in a network namespace, and Debian's pingpongs between
# its rxe0 and sv0, both directions (tests/interop, needs root). The guest's
# packages are downloaded once into INTEROP_DIR (default BUILD/interop);
# logs, console and the capture of the tap in INTEROP_DIR/runs/latest.
interop: build
	@tests/interop/deps.sh
	@export INTEROP_DIR=$${INTEROP_DIR:-$(abspath $(BUILD))/interop}; \
	bash tests/interop/build-guest.sh && \
	bash tests/interop/harness.sh && \
	SV_BUILD_DIR=$(BUILD) bash tests/interop/rxe_interop.sh

# The middleware people run, across two hosts (network namespaces, a
# softverbsd in each, needs root): MPI jobs of 8 ranks (tests/mpi, Debian's
# Open MPI and MPICH, installed here by tests/mpi/deps.sh), each result
# checked and the traffic between the hosts counted; one at a time (each job
# keeps both cores busy). docs/MIDDLEWARE.md has the recipe and the findings.
# Then the same jobs on the ASan+UBSan build (middleware-asan).
middleware: build
	@tests/mpi/deps.sh
	@cmake -S . -B $(BUILD) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) -- --no-print-directory
	ctest --test-dir $(BUILD) --output-on-failure -j1 -L middleware
	@$(MAKE) --no-print-directory middleware-asan

middleware-asan: build-asan
	@tests/mpi/deps.sh
	@cmake -S . -B $(ASAN_BUILD) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j$(JOBS) -- --no-print-directory
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j1 -L middleware

# The long run of issue 7: 10 GiB each of RC WRITE, READ and SEND between
# two network namespaces under the daemons' fault injector (1% drop, 1%
# duplicate, 1% reorder, 0.1% corrupt), every byte checked; first the
# ThreadSanitizer build's tests (check-tsan, which .ci/run also runs).
SOAK_BYTES ?= 10737418240
soak: build
	@$(MAKE) --no-print-directory check-tsan
	bash tests/net/stress_netns.sh $(abspath $(BUILD)) inject $(SOAK_BYTES) 7200

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
