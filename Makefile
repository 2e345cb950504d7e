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
HAVE_NVCC := $(shell test -x "$(NVCC)" && echo 1)
# where the trainer goes
TRAIN_GPT ?= train_gpt
# Hopper: sm_90a enables the FP8 / wgmma instructions. Override for other GPUs.
GENCODE  ?= -gencode=arch=compute_90a,code=sm_90a
BUILD    := build

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
LIB_SRCS := $(filter-out $(NO_CUDA_SRC),$(sort $(wildcard llmc/*.cpp llmc/*/*.cpp)))
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
TOOL_NAMES := prepare_text bench_tokenizer
TOOLS      := $(TOOL_NAMES:%=$(BUILD)/%)
DATA_OBJS  := $(BUILD)/dev/data/bpe_train.o

TEST_SRCS := $(sort $(wildcard tests/*.cpp))
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

$(CUDA_TEST_BIN): $(CUDA_TEST_OBJS) $(LIB)
	$(call quiet,LINK,$@)$(CXX) -fopenmp $^ -o $@ $(LDLIBS) -lgtest -lgtest_main

ifeq ($(HAVE_NVCC),1)
test: all $(TEST_BIN) $(CUDA_TEST_BIN)
	$(TEST_BIN)
	$(CUDA_TEST_BIN)
endif

clean:
	rm -rf $(BUILD) $(TRAIN_GPT)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
