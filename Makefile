# train_gpt — build.
#
#   make            the trainer ./train_gpt and the data tools in build/ (one short line per file;
#                   make V=1 prints the whole command lines)
#   make test       build and run the GoogleTest suites (CPU; CUDA suites report SKIPPED without a GPU)
#   make clean
#
# Without nvcc (no CUDA toolkit), `make` builds a CPU-only trainer and says so: train_gpt.cu is
# compiled as C++, the CUDA kernel set and the NCCL Comm are replaced by cuda/cuda_unavailable.cpp
# (--device cuda then stops with the reason), nothing links against the CUDA libraries, and the
# test suites (which compare with CUDA's own conversions and build the CUDA tests) are not built.
#
# Host-only code (CLI11, JSON, BLAS, the CPU kernel set) is compiled by the host compiler;
# nvcc compiles only .cu files. Every llmc/**/*.cpp, and every llmc/**/*.cu (the CUDA kernel
# set, the NCCL Comm), goes into one static library, every
# tests/*.cpp into one test binary, every dev/data/*.cpp into a tool of its name. The CUDA code
# builds without a GPU; it needs one only to run.

CXX      ?= g++
CUDA_HOME ?= /usr/local/cuda
NVCC     ?= $(shell command -v nvcc 2>/dev/null || echo $(CUDA_HOME)/bin/nvcc)
HAVE_NVCC := $(shell test -f "$(NVCC)" -a -x "$(NVCC)" && echo 1)
# where the trainer goes
TRAIN_GPT ?= train_gpt
# Hopper: sm_90a enables the FP8 / wgmma instructions. Override for other GPUs.
GENCODE  ?= -gencode=arch=compute_90a,code=sm_90a
BUILD    := build
comma    := ,

CPPFLAGS := -I. -Illmc -I$(CUDA_HOME)/include -I/usr/include/x86_64-linux-gnu/openblas-pthread
CXXFLAGS ?= -O3 -march=native
CXXFLAGS += -std=c++17 -fopenmp -Wall -Wextra -MMD -MP
NVCCFLAGS ?= -O3
NVCCFLAGS += -std=c++17 $(GENCODE) -Xcompiler -fopenmp,-Wall -MMD -MP
# cuBLASLt and NCCL (the CUDA kernel set's GEMMs and collectives) are in $(CUDA_HOME)/lib64 here.
CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lnccl -lcudart
LDLIBS   := -lopenblas -lgomp -lpthread -ldl -lpcre2-8 -lxxhash
# Open MPI (llmc/distributed/comm_mpi.cpp, build/test_mpi): flags from its wrapper compiler. Only the files
# that include <mpi.h> get its include path; everything links libmpi (it is in the library).
MPI_CPPFLAGS := $(shell mpicxx --showme:compile 2>/dev/null)
MPI_LDLIBS   := $(shell mpicxx --showme:link 2>/dev/null)
LDLIBS   += $(MPI_LDLIBS)

NO_CUDA_SRC := llmc/cuda/cuda_unavailable.cpp
CUDNN_SRC := llmc/cuda/attention_cudnn.cpp
NO_CUDNN_SRC := llmc/cuda/attention_cudnn_unavailable.cpp
LIB_SRCS := $(filter-out $(NO_CUDA_SRC) $(CUDNN_SRC) $(NO_CUDNN_SRC),$(sort $(wildcard llmc/*.cpp llmc/*/*.cpp)))
ifeq ($(HAVE_NVCC),1)
LIB_CU_SRCS := $(sort $(wildcard llmc/*.cu llmc/*/*.cu))
LIB      := $(BUILD)/libtrain_gpt.a
TRAIN_GPT_OBJ := $(BUILD)/train_gpt.o
LDLIBS   := $(CUDA_LDLIBS) $(LDLIBS)
else
$(info notice: no nvcc at $(NVCC): building a CPU-only trainer (no CUDA kernel set); install the CUDA toolkit, or give NVCC=..., for the GPU)
LIB_CU_SRCS :=
LIB_SRCS += $(NO_CUDA_SRC)
LIB      := $(BUILD)/libtrain_gpt_cpu_only.a
TRAIN_GPT_OBJ := $(BUILD)/train_gpt_cpu_only.o
endif

# cuDNN's fused attention (--attention cudnn, llmc/cuda/attention_cudnn.cpp, host code): built
# where cuDNN (cudnn.h beside the CUDA headers) and cudnn-frontend's headers (scripts/setup.sh
# unpacks them into third_party/cudnn_frontend) are found; elsewhere attention_cudnn_unavailable.cpp
# takes its place (another object: the CPU-only build shares build/'s objects) and the trainer
# refuses the flag, saying why. cudnn-frontend's engines also call NVRTC.
CUDNN_FRONTEND ?= third_party/cudnn_frontend/include
HAVE_CUDNN := $(shell test "$(HAVE_NVCC)" = 1 -a -f "$(CUDA_HOME)/include/cudnn.h" -a \
                -f "$(CUDNN_FRONTEND)/cudnn_frontend.h" && echo 1)
ifeq ($(HAVE_CUDNN),1)
LIB_SRCS += $(CUDNN_SRC)
%/llmc/cuda/attention_cudnn.o: CPPFLAGS += -isystem $(CUDNN_FRONTEND)
LDLIBS := -lcudnn -lnvrtc $(LDLIBS)
else
LIB_SRCS += $(NO_CUDNN_SRC)
endif
LIB_OBJS := $(LIB_SRCS:%.cpp=$(BUILD)/%.o) $(LIB_CU_SRCS:%.cu=$(BUILD)/%.o)

# Quiet by default: one line per file ("  CXX  llmc/model/gpt.cpp"); V=1: the whole commands.
# $(call quiet,WHAT,FILE) prefixes a recipe line.
ifeq ($(V),1)
quiet =
else
quiet = @printf '  %-5s %s\n' '$(1)' '$(2)';
endif

# dev/data: the data tools (a main each) and what only they use (BPE training), which the tests
# link too.
TOOL_NAMES := prepare_text bench_tokenizer bench_shard_scan
TOOLS      := $(TOOL_NAMES:%=$(BUILD)/%)
DATA_OBJS  := $(BUILD)/dev/data/bpe_train.o

# tests/twins/: host twins that only tests use (the flash attention's tiling), linked into the
# CPU and the CUDA test binaries
TWIN_SRCS := $(sort $(wildcard tests/twins/*.cpp))
TEST_SRCS := $(sort $(wildcard tests/*.cpp)) $(TWIN_SRCS)
TEST_OBJS := $(TEST_SRCS:%.cpp=$(BUILD)/%.o)
TEST_BIN  := $(BUILD)/test_cpu

# tests/mpi/*.cpp: one binary with its own main (MPI_Init before GoogleTest), run under mpirun.
MPI_TEST_SRCS := $(sort $(wildcard tests/mpi/*.cpp))
MPI_TEST_OBJS := $(MPI_TEST_SRCS:%.cpp=$(BUILD)/%.o)
MPI_TEST_BIN  := $(BUILD)/test_mpi

# tests/cuda/*.cu: the CUDA kernel set against its CPU twin, one binary (nvcc-compiled); every
# test reports SKIPPED, with the reason, on a machine without a GPU.
CUDA_TEST_SRCS := $(sort $(wildcard tests/cuda/*.cu))
CUDA_TEST_OBJS := $(CUDA_TEST_SRCS:%.cu=$(BUILD)/%.o)
CUDA_TEST_BIN  := $(BUILD)/test_cuda

.PHONY: all test clean tools tests
all: $(TRAIN_GPT) $(TOOLS)
tools: $(TOOLS)
ifeq ($(HAVE_NVCC),1)
tests: $(TEST_BIN) $(MPI_TEST_BIN) $(CUDA_TEST_BIN)
else
tests test:
	@echo "the test suites need the CUDA toolkit (nvcc, its headers): CI compiles the CUDA kernel set"; exit 1
endif

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(call quiet,CXX,$<)$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(call quiet,NVCC,$<)$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) -c $< -o $@

# the trainer as C++ where there is no nvcc (it names no CUDA type)
$(BUILD)/train_gpt_cpu_only.o: train_gpt.cu
	@mkdir -p $(dir $@)
	$(call quiet,CXX,$<)$(CXX) $(CPPFLAGS) $(CXXFLAGS) -x c++ -c $< -o $@

$(LIB): $(LIB_OBJS)
	@rm -f $@
	$(call quiet,AR,$@)ar rcs $@ $^

$(TRAIN_GPT): $(TRAIN_GPT_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(call quiet,LINK,$@)$(CXX) -fopenmp $^ -o $@ $(LDLIBS)

$(BUILD)/%: $(BUILD)/dev/data/%.o $(DATA_OBJS) $(LIB)
	$(call quiet,LINK,$@)$(CXX) -fopenmp $^ -o $@ $(LDLIBS)

$(TEST_BIN): $(TEST_OBJS) $(DATA_OBJS) $(LIB) $(TOOLS) $(TRAIN_GPT)
	$(call quiet,LINK,$@)$(CXX) -fopenmp $(TEST_OBJS) $(DATA_OBJS) $(LIB) -o $@ $(LDLIBS) -lgtest -lgtest_main

$(BUILD)/llmc/distributed/comm_mpi.o $(MPI_TEST_OBJS): CPPFLAGS += $(MPI_CPPFLAGS)

$(MPI_TEST_BIN): $(MPI_TEST_OBJS) $(LIB)
	$(call quiet,LINK,$@)$(CXX) -fopenmp $^ -o $@ $(LDLIBS) -lgtest

$(CUDA_TEST_BIN): $(CUDA_TEST_OBJS) $(TWIN_SRCS:%.cpp=$(BUILD)/%.o) $(LIB)
	$(call quiet,LINK,$@)$(CXX) -fopenmp $^ -o $@ $(LDLIBS) -lgtest -lgtest_main

ifeq ($(HAVE_NVCC),1)
test: all $(TEST_BIN) $(CUDA_TEST_BIN)
	$(TEST_BIN)
	$(CUDA_TEST_BIN)
endif

# ---- fuzzing (scripts/fuzz.sh): the libFuzzer harnesses tests/fuzz/fuzz_*.cpp, one binary each
# in build/fuzz/, built with clang, ASan and UBSan (any UBSan report stops the run) over only the
# host sources that read files (and what they call); coverage-instrumented for libFuzzer.
FUZZ_CXX      ?= clang++-14
FUZZ_BUILD    := $(BUILD)/fuzz
FUZZ_FLAGS    := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_LIB_SRCS := llmc/utils.cpp llmc/json_fields.cpp $(wildcard llmc/data/*.cpp llmc/checkpoint/*.cpp) \
                 llmc/eval/hellaswag_data.cpp llmc/model/layout.cpp llmc/precision/precision.cpp \
                 llmc/precision/fp8_scaling.cpp llmc/precision/loss_scaler.cpp
FUZZ_LIB      := $(FUZZ_BUILD)/libfuzz_host.a
FUZZERS       := $(patsubst tests/fuzz/%.cpp,$(FUZZ_BUILD)/%,$(sort $(wildcard tests/fuzz/fuzz_*.cpp)))

.PHONY: fuzzers
fuzzers: $(FUZZERS)

$(FUZZ_BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(call quiet,CLANG,$<)$(FUZZ_CXX) $(CPPFLAGS) -std=c++17 -MMD -MP $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_SRCS:%.cpp=$(FUZZ_BUILD)/%.o)
	@rm -f $@
	$(call quiet,AR,$@)ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_LIB)
	$(call quiet,LINK,$@)$(FUZZ_CXX) $(FUZZ_FLAGS) -fsanitize=fuzzer $^ -o $@ -lpcre2-8 -lxxhash

# ---- sanitizers (scripts/sanitize.sh): the host library, the data tools, the trainer and the CPU
# test suite with ASan + UBSan (g++; any UBSan report is fatal), in build/sanitize/. The CUDA
# kernel set and the NCCL Comm (llmc/**/*.cu) are the usual build's objects, linked in
# uninstrumented; the trainer's own host code (train_gpt.cu) gets the sanitizers through nvcc's
# host compiler. build/sanitize/test_cpu runs build/sanitize/train_gpt and prepare_text.
SAN_BUILD    := $(BUILD)/sanitize
SAN_FLAGS    := -g -fno-omit-frame-pointer -fsanitize=address -fsanitize=undefined -fno-sanitize-recover=all
SAN_CXXFLAGS := -O2 -march=native -std=c++17 -fopenmp -Wall -Wextra -MMD -MP $(SAN_FLAGS)
SAN_LIB      := $(SAN_BUILD)/libtrain_gpt.a
SAN_TOOLS    := $(TOOL_NAMES:%=$(SAN_BUILD)/%)

.PHONY: sanitize
sanitize: $(SAN_BUILD)/test_cpu $(SAN_BUILD)/train_gpt $(SAN_TOOLS)

$(SAN_BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(call quiet,CXX,$<)$(CXX) $(CPPFLAGS) $(SAN_CXXFLAGS) -c $< -o $@

$(SAN_BUILD)/llmc/distributed/comm_mpi.o: CPPFLAGS += $(MPI_CPPFLAGS)

$(SAN_BUILD)/train_gpt.o: train_gpt.cu
	@mkdir -p $(dir $@)
	$(call quiet,NVCC,$<)$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) -Xcompiler $(subst $(eval) ,$(comma),$(strip $(SAN_FLAGS))) -c $< -o $@

$(SAN_LIB): $(LIB_SRCS:%.cpp=$(SAN_BUILD)/%.o) $(LIB_CU_SRCS:%.cu=$(BUILD)/%.o)
	@rm -f $@
	$(call quiet,AR,$@)ar rcs $@ $^

$(SAN_BUILD)/train_gpt: $(SAN_BUILD)/train_gpt.o $(SAN_LIB)
	$(call quiet,LINK,$@)$(CXX) -fopenmp $(SAN_FLAGS) $^ -o $@ $(LDLIBS)

$(SAN_TOOLS): $(SAN_BUILD)/%: $(SAN_BUILD)/dev/data/%.o $(DATA_OBJS:$(BUILD)/%=$(SAN_BUILD)/%) $(SAN_LIB)
	$(call quiet,LINK,$@)$(CXX) -fopenmp $(SAN_FLAGS) $^ -o $@ $(LDLIBS)

$(SAN_BUILD)/test_cpu: $(TEST_OBJS:$(BUILD)/%=$(SAN_BUILD)/%) $(DATA_OBJS:$(BUILD)/%=$(SAN_BUILD)/%) $(SAN_LIB)
	$(call quiet,LINK,$@)$(CXX) -fopenmp $(SAN_FLAGS) $^ -o $@ $(LDLIBS) -lgtest -lgtest_main

# the tools' own objects are made through the pattern rule $(BUILD)/%: make would delete them as
# intermediates after a clean build, and compile them again next time
.SECONDARY: $(TOOL_NAMES:%=$(BUILD)/dev/data/%.o) $(TOOL_NAMES:%=$(SAN_BUILD)/dev/data/%.o)

clean:
	rm -rf $(BUILD) $(TRAIN_GPT)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
