# braid - build. `make` builds build/lib/libnccl.so.2 (+ libnccl_static.a), the tools and the
# benchmarks; `make test` runs the suite; `make demo` runs all_reduce_perf over host-mode ranks.
#
# Layout rules (new files need no Makefile edit):
#   src/**/*.c                                  -> the library (every folder of src/ is a layer)
#   src/kernels/*.cu                            -> CUDA kernels (when nvcc is found, CUDA=0 skips)
#   tools/<name>.c                              -> build/bin/<name>   (linked to the static lib)
#   tools/lib/*.c                               -> code only the tools use (linked into them and
#                                                  the test runner, never into libnccl.so.2)
#   bench/<name>_perf.c + bench/common/*.c      -> build/bin/<name>_perf (linked to libnccl.so)
#   tests/unit/test_<m>.c (Suite *<m>_suite())  -> build/bin/braid-tests (Check); other
#   tests/unit/*.c are helpers linked into the same runner

BUILD   ?= build
CC      ?= gcc
NVCC    ?= $(shell command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
CUDA    ?= $(if $(NVCC),1,0)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
NVCC_GENCODE ?= -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_100,code=sm_100
OPT     ?= -O2
MPI     ?= 0

CPPFLAGS := -Iinclude -Isrc -DBRAID_NO_CUDA_HEADERS -D_GNU_SOURCE
CFLAGS   ?= $(OPT) -g
CFLAGS   += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -fPIC -pthread -fvisibility=hidden
# Thread-locals (group depth, the reduce loop's stream window, the registry's last answer) are
# read on every call: TLS descriptors make that a load, not a call to __tls_get_addr, and still
# work when the library is dlopened.
ifeq ($(shell uname -m),x86_64)
CFLAGS   += -mtls-dialect=gnu2
endif
LDLIBS   := -pthread -lrt -ldl -lm

# src/transport/net/plugin/export/ is libnccl-net-braid.so's own code (NCCL's net plugin ABI
# over braid's Socket network), linked with the static library, never into libnccl.so.2.
NET_EXPORT_DIR := src/transport/net/plugin/export
LIB_SRCS := $(filter-out $(NET_EXPORT_DIR)/%,$(shell find src -name '*.c' | sort))
# UCX (src/transport/net/ucx/): built when its headers are found (Debian: libucx-dev), UCX=0
# builds without; libucp is dlopened at run time, so libnccl.so.2 loads where UCX is absent.
UCX     ?= $(if $(wildcard /usr/include/ucp/api/ucp.h),1,0)
ifeq ($(UCX),1)
CPPFLAGS += -DBRAID_UCX_BUILT=1
else
LIB_SRCS := $(filter-out src/transport/net/ucx/%,$(LIB_SRCS))
endif
# InfiniBand verbs (src/transport/net/ib/): libibverbs is dlopened; its headers (Debian:
# libibverbs-dev) give the types. IB=0 builds without (the NCCL_IB_HCA parser stays).
IB      ?= $(if $(wildcard /usr/include/infiniband/verbs.h),1,0)
ifeq ($(IB),1)
CPPFLAGS += -DBRAID_IB_BUILT=1
else
LIB_SRCS := $(filter-out $(filter-out src/transport/net/ib/ib_hca.c,$(filter src/transport/net/ib/%,$(LIB_SRCS))),$(LIB_SRCS))
endif
LIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
CU_SRCS  := $(wildcard src/kernels/*.cu)
CU_OBJS  := $(patsubst %.cu,$(BUILD)/obj/%.o,$(CU_SRCS))

TOOL_SRCS  := $(wildcard tools/*.c)
TOOL_LIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tools/lib/*.c))
TOOL_BINS  := $(patsubst tools/%.c,$(BUILD)/bin/%,$(TOOL_SRCS))
BENCH_SRCS := $(wildcard bench/*_perf.c)
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bin/%,$(BENCH_SRCS))
BENCH_COMMON := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard bench/common/*.c))
TEST_SRCS  := $(wildcard tests/unit/test_*.c)
TEST_OBJS  := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/unit/*.c))

SO     := $(BUILD)/lib/libnccl.so.2
STATIC := $(BUILD)/lib/libnccl_static.a

# CUDA=1: the kernels (libbraid_kernels.a) and the static CUDA runtime go into libnccl.so.2,
# the static library's users (tools, tests) and the benchmarks, so a program needs nothing
# else; --exclude-libs keeps their symbols out of the .so's exports. Only device_cuda.c sees
# the CUDA headers. Without a driver at run time braid falls back to host mode (device.c).
ifeq ($(CUDA),1)
ALL_CUDA := $(BUILD)/lib/libbraid_kernels.a
CPPFLAGS += -DBRAID_CUDA_BUILT=1
CUDA_LIBS := $(BUILD)/lib/libbraid_kernels.a $(CUDA_HOME)/lib64/libcudart_static.a -ldl -lrt -lpthread
CUDA_LDFLAGS := -Wl,--exclude-libs,ALL
endif
ifeq ($(MPI),1)
BENCH_CC := mpicc
BENCH_CPPFLAGS := -DBRAID_BENCH_MPI=1
else
BENCH_CC := $(CC)
endif

# Parallel by default: the CUDA kernels are a dozen independent nvcc runs.
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)

.PHONY: all lib tools bench test demo clean bench-compare bench-deps format format-check test-pytorch torch-backend test-torch-backend bench-torch nccl-tests
.SECONDARY:
all: lib tools bench $(ALL_CUDA)

NET_BRAID := $(BUILD)/lib/libnccl-net-braid.so
NET_EXPORT_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard $(NET_EXPORT_DIR)/*.c))
lib: $(SO) $(BUILD)/lib/libnccl.so $(STATIC) $(NET_BRAID)

# braid's Socket network as an NCCL net plugin (ncclNetPlugin_v11/_v10): for NCCL users, and
# loaded by braid's own NCCL-ABI adapter in the tests. Only the export map's symbols leave it.
$(NET_BRAID): $(NET_EXPORT_OBJS) $(STATIC) $(NET_EXPORT_DIR)/exports.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,--version-script=$(NET_EXPORT_DIR)/exports.map -Wl,-z,defs -Wl,--exclude-libs,ALL \
	  -o $@ $(NET_EXPORT_OBJS) $(STATIC) $(LDLIBS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(SO): $(LIB_OBJS) src/exports.map $(ALL_CUDA)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libnccl.so.2 -Wl,--version-script=src/exports.map -Wl,-z,defs $(CUDA_LDFLAGS) \
	  -o $@ $(LIB_OBJS) $(CUDA_LIBS) $(LDLIBS)

# The files that include the CUDA headers (the runtime; cuda_mc.c, cuda_vmm.c: the driver API's types).
ifeq ($(CUDA),1)
$(BUILD)/obj/src/device/device_cuda.o $(BUILD)/obj/src/device/cuda_mc.o $(BUILD)/obj/src/device/cuda_vmm.o: \
    $(BUILD)/obj/src/device/%.o: src/device/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -I$(CUDA_HOME)/include $(CFLAGS) -MMD -MP -c $< -o $@
endif

$(BUILD)/lib/libnccl.so: $(SO)
	ln -sf libnccl.so.2 $@

$(STATIC): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# CUDA kernels: one file per datatype family so `make -j` compiles them in parallel. Their host
# code (launch stubs, registration) must not need the C++ runtime: libnccl.so.2 links C only.
NVCC_HOSTFLAGS := -Xcompiler -fPIC,-fno-exceptions,-fno-threadsafe-statics,-fno-rtti
# ptxas reports registers, stack and spills of every kernel function per architecture: kept
# next to the object (tests/cuda/ptxas.sh prints them and fails on any spill).
$(BUILD)/obj/src/kernels/%.o: src/kernels/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) -Iinclude -Isrc -O3 -std=c++17 $(NVCC_GENCODE) $(NVCC_HOSTFLAGS) -Xptxas -v -MMD -MP -c $< -o $@ \
	  2> $@.ptxas || { cat $@.ptxas >&2; exit 1; }

$(BUILD)/lib/libbraid_kernels.a: $(CU_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

tools: $(TOOL_BINS)
$(BUILD)/obj/tools/%.o: tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/lib $(CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o $(TOOL_LIB_OBJS) $(STATIC) $(ALL_CUDA)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(TOOL_LIB_OBJS) $(STATIC) $(CUDA_LIBS) $(LDLIBS)

bench: $(BENCH_BINS)
$(BUILD)/obj/bench/%.o: bench/%.c
	@mkdir -p $(dir $@)
	$(BENCH_CC) $(CPPFLAGS) $(BENCH_CPPFLAGS) -Ibench/common $(CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/bin/%_perf: $(BUILD)/obj/bench/%_perf.o $(BENCH_COMMON) $(SO) $(BUILD)/lib/libnccl.so
	@mkdir -p $(dir $@)
	$(BENCH_CC) -o $@ $< $(BENCH_COMMON) -L$(BUILD)/lib -lnccl -Wl,-rpath,'$$ORIGIN/../lib' $(LDLIBS)

# Tests: Check suites, one runner. The suite list is generated from the file names.
# Tests see src/ only through quoted includes: libcheck's <check.h> must not find src/base/check.h.
# NCCL_OS_LINUX: the tests call the deprecated ncclResetDebugInit, which NCCL 2.30's nccl.h
# declares only then (elsewhere it is a no-op macro).
TEST_CPPFLAGS = -Iinclude -iquote src -iquote tools/lib -I$(BUILD)/gen -Itests/unit -DBRAID_NO_CUDA_HEADERS -D_GNU_SOURCE \
  -DNCCL_OS_LINUX -Wno-deprecated-declarations $(if $(filter 1,$(UCX)),-DBRAID_UCX_BUILT=1) \
  $(if $(filter 1,$(IB)),-DBRAID_IB_BUILT=1)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -lpthread)
$(BUILD)/gen/suites.h: $(TEST_SRCS)
	@mkdir -p $(dir $@)
	@printf '%s\n' $(patsubst tests/unit/test_%.c,'BRAID_SUITE(%)',$(TEST_SRCS)) > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
$(BUILD)/obj/tests/unit/main.o: $(BUILD)/gen/suites.h
$(BUILD)/obj/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
# The emulated verbs provider (tests/ibemu/): the tests load it through BRAID_IB_VERBS_LIBRARY.
IBEMU := $(if $(filter 1,$(IB)),$(BUILD)/lib/libbraid-ibemu.so)
$(BUILD)/lib/libbraid-ibemu.so: $(wildcard tests/ibemu/*.c tests/ibemu/*.h)
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -o $@ $(filter %.c,$^)

# The test profiler (tests/plugins/test_profiler.c) at each NCCL profiler ABI version; v0
# exports no table (the "unsupported" case). tests/unit/test_profiler.c loads them.
PROF_TEST_LIBS := $(foreach v,0 1 2 3 4 5 6,$(BUILD)/lib/libnccl-profiler-braidtest-v$(v).so)
$(BUILD)/lib/libnccl-profiler-braidtest-v%.so: tests/plugins/test_profiler.c tests/plugins/test_profiler.h src/plugin/profiler_abi.h
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-function -fvisibility=hidden -Iinclude -Isrc \
	  -DBRAID_NO_CUDA_HEADERS -DPROF_V=$* -o $@ $< -pthread

# A net plugin that declares NCCL_PTR_DMABUF and records its registrations
# (tests/net/dmabuf_plugin.c); tests/unit/test_net_dmabuf.c loads it through the adapter.
NET_TEST_LIBS := $(BUILD)/lib/libnccl-net-braidtest-dmabuf.so $(BUILD)/lib/libnccl-net-braidtest-prof.so
$(BUILD)/lib/libnccl-net-braidtest-dmabuf.so: tests/net/dmabuf_plugin.c src/transport/net/plugin/nccl_net_abi.h
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -fvisibility=hidden -Iinclude -Isrc \
	  -DBRAID_NO_CUDA_HEADERS -o $@ $<

# A v10 net plugin wrapping libnccl-net-braid.so that reports NetPlugin profiler events
# (tests/plugins/test_netprof.c); tests/unit/test_profiler_proxy.c loads it.
$(BUILD)/lib/libnccl-net-braidtest-prof.so: tests/plugins/test_netprof.c src/transport/net/plugin/nccl_net_abi.h $(NET_BRAID)
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -fvisibility=hidden -Iinclude -Isrc \
	  -DBRAID_NO_CUDA_HEADERS -D_GNU_SOURCE -o $@ $< -ldl -pthread

$(BUILD)/bin/braid-tests: $(TEST_OBJS) $(TOOL_LIB_OBJS) $(STATIC) $(ALL_CUDA) $(IBEMU) $(PROF_TEST_LIBS) $(NET_TEST_LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(TEST_OBJS) $(TOOL_LIB_OBJS) $(STATIC) $(CUDA_LIBS) $(CHECK_LIBS) $(LDLIBS)

# The GPU suite without libcheck (tests/gpu/check_shim.h): what tests/gpu/run.sh builds on a GPU
# machine, which has no package manager.
GPU_TEST_SRCS := tests/gpu/gpu_main.c tests/unit/test_gpu.c tests/unit/gpu_rt.c tests/unit/refdata.c
$(BUILD)/bin/braid-gpu-tests: $(GPU_TEST_SRCS) $(STATIC) $(ALL_CUDA) tests/gpu/check_shim.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CPPFLAGS) -DBRAID_CHECK_SHIM -Itests/gpu $(CFLAGS) -o $@ $(GPU_TEST_SRCS) $(STATIC) $(CUDA_LIBS) $(LDLIBS)

# The dependencies first, then a fresh make: UCX and IB (like CUDA) are detected when make
# starts. The CUDA kernels need only nvcc, so they compile while apt installs the packages
# (minutes of downloads and unpacking on a fresh machine).
test:
	@if [ "$(CUDA)" = 1 ]; then $(MAKE) --no-print-directory $(ALL_CUDA) & kernels=$$!; fi; \
	  tests/ensure-deps.sh check clang-format libfuzzer ucx ibverbs; deps=$$?; \
	  if [ -n "$${kernels:-}" ] && ! wait $$kernels; then echo "make test: the CUDA kernels did not build" >&2; exit 1; fi; \
	  exit $$deps
	$(MAKE) --no-print-directory all $(BUILD)/bin/braid-tests fuzz-build
	BUILD=$(BUILD) CUDA=$(CUDA) tests/run.sh

# PyTorch (torch 2.11.0 and the newest) imports with braid preloaded: tests/pytorch/run.sh.
# Downloads about a gigabyte into a cache outside the repository the first time; not in `make test`.
test-pytorch: lib
	tests/pytorch/run.sh $(BUILD)

# The braid torch.distributed backend for CPU (integrations/torch), built against torch
# $(TORCH) in its cached virtualenv: `make torch-backend` builds it into $(BUILD)/torch-$(TORCH);
# `make test-torch-backend` runs its suite against Gloo and the DDP example; `make bench-torch`
# times dist.all_reduce on braid and Gloo (2 processes). None of them is part of `make test`.
TORCH ?= 2.15.0
torch-backend: lib
	tests/pytorch/with-torch.sh $(TORCH) $(BUILD) python -c 'import braid_torch; print("braid_torch", braid_torch.library_path())'
test-torch-backend: lib
	tests/pytorch/backend.sh $(BUILD) $(TORCH)
bench-torch: lib
	tests/pytorch/with-torch.sh $(TORCH) $(BUILD) torchrun --nproc-per-node 2 bench/torch_allreduce.py $(BENCH_ARGS)

# Fuzzing (fuzz/README.md): libFuzzer targets fuzz/fuzz_<name>.c, linked against the library
# built again by clang with AddressSanitizer, UndefinedBehaviorSanitizer and coverage (host
# code only, in $(BUILD)/fuzz). `make fuzz` runs each target FUZZ_SECONDS from its seed corpus
# after replaying its regression inputs; `make test` runs a short round (tests/run.sh).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS  := -std=gnu11 -g -O1 -fno-omit-frame-pointer -pthread $(FUZZ_SAN)
# the layers the targets reach (base, bootstrap, topo, the Socket plugin), not the data path
FUZZ_LIB_SRCS := $(filter src/base/% src/bootstrap/% src/topo/% src/transport/net/socket/%,$(LIB_SRCS))
FUZZ_LIB_OBJS := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(FUZZ_LIB_SRCS))
FUZZ_BINS    := $(patsubst fuzz/%.c,$(FUZZ_DIR)/bin/%,$(wildcard fuzz/fuzz_*.c))
.PHONY: fuzz fuzz-build
$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -Iinclude -Isrc -DBRAID_NO_CUDA_HEADERS -D_GNU_SOURCE $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link \
	  -MMD -MP -c $< -o $@
$(FUZZ_DIR)/lib/libnccl_fuzz.a: $(FUZZ_LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(FUZZ_DIR)/bin/%: $(FUZZ_DIR)/obj/fuzz/%.o $(FUZZ_DIR)/lib/libnccl_fuzz.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_DIR)/lib/libnccl_fuzz.a $(LDLIBS)
fuzz-build:
	@tests/ensure-deps.sh libfuzzer
	$(MAKE) --no-print-directory $(FUZZ_BINS)
fuzz: fuzz-build
	fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

# The demo runs on host-mode ranks, so it builds the library without the CUDA kernels (in
# $(BUILD)/host: seconds instead of the kernels' minutes); `make` / `make test` build them.
demo:
	$(MAKE) --no-print-directory CUDA=0 BUILD=$(BUILD)/host lib tools bench
	$(BUILD)/host/bin/all_reduce_perf -b 8 -e 64M -f 2 -P 2

# braid against the CPU peers on this machine (every collective; Open MPI, and MPICH, Gloo and
# Intel oneCCL when installed), interleaved rounds, near/far cores and the memory ceiling per round; tables + plots.
# COMPARE_ARGS="--coll sendrecv --rounds 3" passes options; `make bench-deps` installs the
# optional peers (never part of `make test`).
bench-compare: bench $(IBEMU)
	BUILD=$(BUILD) bench/compare.sh $(COMPARE_ARGS)

bench-deps:
	tests/ensure-deps.sh mpi mpich gloo oneccl matplotlib

# NVIDIA's nccl-tests, unmodified, built against braid's include/ and libnccl.so.2 only:
# make nccl-tests NCCL_TESTS_DIR=/path/to/nccl-tests (a checkout; without one it says so).
nccl-tests: lib
	tests/compat/nccl-tests.sh "$(NCCL_TESTS_DIR)" $(BUILD)

# Formatting: .clang-format is the rule; `make format` applies it to every C/CUDA source in git,
# `make format-check` (part of `make test`) names the files that differ.
FORMAT_SRCS = $(shell git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null)
format:
	clang-format -i --style=file $(FORMAT_SRCS)
format-check:
	@tests/format-check.sh

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj $(BUILD)/fuzz/obj -name '*.d' 2>/dev/null)
