// cuda/attention_cudnn.cpp — see attention_cudnn.h (built where the Makefile finds cuDNN and
// cudnn-frontend's headers; elsewhere attention_cudnn_unavailable.cpp). One SDPA graph per (device, shape, dtype,
// direction), built on first use and cached with its workspace; each call binds the pointers and
// executes on the caller's stream.
//
// Layouts, as cuDNN's [B, H, S, D] tensors with strides (elements):
//   Q, K, V   at qkv, qkv + C, qkv + 2C     dims (B, NH, T, hs)  strides (T·3C, hs, 3C, 1)
//   O, dO     out, dout                     dims (B, NH, T, hs)  strides (T·C, hs, C, 1)
//   lse       FP32                          dims (B, NH, T, 1)   strides (NH·T, T, 1, 1)
//   dQ, dK, dV at dqkv, dqkv + C, dqkv + 2C  as Q, K, V
#include "cuda/attention_cudnn.h"

#include "utils.h"

#define CUDNN_FRONTEND_SKIP_JSON_LIB 1
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>

namespace train_gpt {

namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

void check(fe::error_t e, const char* what) {
    if (e.is_bad()) fail("cuDNN attention: %s: %s", what, e.get_message().c_str());
}
void check_cudnn(cudnnStatus_t s, const char* what) {
    if (s != CUDNN_STATUS_SUCCESS) fail("cuDNN attention: %s: %s", what, cudnnGetErrorString(s));
}
void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) fail("cuDNN attention: %s: %s", what, cudaGetErrorString(e));
}

struct GraphKey {
    int device, B, T, C, NH;
    DType dtype;
    bool backward;
    bool operator<(const GraphKey& o) const {
        return std::tie(device, B, T, C, NH, dtype, backward) <
               std::tie(o.device, o.B, o.T, o.C, o.NH, o.dtype, o.backward);
    }
};

// A built graph, its tensors (to bind pointers to) and its workspace.
struct Sdpa {
    std::shared_ptr<fe::graph::Graph> graph;
    TensorPtr q, k, v, o, lse, dout, dq, dk, dv;
    void* workspace = nullptr;
    int64_t workspace_bytes = 0;
    ~Sdpa() {
        if (workspace != nullptr) cudaFree(workspace);
    }
};

struct Cache {
    std::mutex mutex;
    std::map<int, cudnnHandle_t> handles;   // per device
    std::map<GraphKey, std::unique_ptr<Sdpa>> graphs;
};
Cache& cache() {
    static auto* c = new Cache();   // never destroyed: released explicitly (release_cudnn_attention)
    return *c;
}

fe::DataType_t io_type(DType d) {
    if (d == DType::BF16) return fe::DataType_t::BFLOAT16;
    if (d == DType::F16) return fe::DataType_t::HALF;
    fail("--attention cudnn runs on bf16 or fp16 activations, not %s", dtype_name(d));
}

std::vector<int64_t> qkv_strides(const GraphKey& k) {
    const int64_t C3 = 3 * (int64_t)k.C;
    return {(int64_t)k.T * C3, k.C / k.NH, C3, 1};
}
std::vector<int64_t> out_strides(const GraphKey& k) { return {(int64_t)k.T * k.C, k.C / k.NH, k.C, 1}; }

TensorPtr tensor(fe::graph::Graph& g, const char* name, const GraphKey& k, const std::vector<int64_t>& strides) {
    return g.tensor(
        fe::graph::Tensor_attributes().set_name(name).set_dim({k.B, k.NH, k.T, k.C / k.NH}).set_stride(strides));
}

std::unique_ptr<Sdpa> build(const GraphKey& k, cudnnHandle_t handle) {
    auto s = std::make_unique<Sdpa>();
    s->graph = std::make_shared<fe::graph::Graph>();
    fe::graph::Graph& g = *s->graph;
    g.set_io_data_type(io_type(k.dtype))
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    const float scale = 1.0f / std::sqrt((float)(k.C / k.NH));   // as the CPU twin: 1 / √hs
    s->q = tensor(g, "Q", k, qkv_strides(k));
    s->k = tensor(g, "K", k, qkv_strides(k));
    s->v = tensor(g, "V", k, qkv_strides(k));
    if (!k.backward) {
        auto options = fe::graph::SDPA_attributes()
                           .set_name("attention")
                           .set_generate_stats(true)
                           .set_causal_mask(true)
                           .set_attn_scale(scale);
        auto [o, lse] = g.sdpa(s->q, s->k, s->v, options);
        o->set_output(true).set_dim({k.B, k.NH, k.T, k.C / k.NH}).set_stride(out_strides(k));
        lse->set_output(true)
            .set_data_type(fe::DataType_t::FLOAT)
            .set_dim({k.B, k.NH, k.T, 1})
            .set_stride({(int64_t)k.NH * k.T, k.T, 1, 1});
        s->o = o;
        s->lse = lse;
    } else {
        s->o = tensor(g, "O", k, out_strides(k));
        s->dout = tensor(g, "dO", k, out_strides(k));
        s->lse = g.tensor(fe::graph::Tensor_attributes()
                              .set_name("lse")
                              .set_dim({k.B, k.NH, k.T, 1})
                              .set_stride({(int64_t)k.NH * k.T, k.T, 1, 1})
                              .set_data_type(fe::DataType_t::FLOAT));
        auto options = fe::graph::SDPA_backward_attributes()
                           .set_name("attention_backward")
                           .set_causal_mask(true)
                           .set_attn_scale(scale)
                           .set_deterministic_algorithm(true);   // backend.h: a fixed summation order
        auto [dq, dk, dv] = g.sdpa_backward(s->q, s->k, s->v, s->o, s->dout, s->lse, options);
        for (const TensorPtr& d : {dq, dk, dv})
            d->set_output(true).set_dim({k.B, k.NH, k.T, k.C / k.NH}).set_stride(qkv_strides(k));
        s->dq = dq;
        s->dk = dk;
        s->dv = dv;
    }
    check(g.validate(), "validate");
    check(g.build_operation_graph(handle), "build_operation_graph");
    check(g.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
    check(g.check_support(handle), "check_support (this GPU / cuDNN cannot run the shape)");
    check(g.build_plans(handle), "build_plans");
    check(g.get_workspace_size(s->workspace_bytes), "get_workspace_size");
    if (s->workspace_bytes > 0) check_cuda(cudaMalloc(&s->workspace, (size_t)s->workspace_bytes), "workspace");
    return s;
}

// The graph for key (built on first use) and the device's handle, set to `stream`.
Sdpa& graph_for(GraphKey key, void* stream, cudnnHandle_t* handle) {
    if (key.C % key.NH != 0 || (key.C / key.NH) % 8 != 0 || key.C / key.NH > 128) {
        fail("--attention cudnn: head size %d (C %d, NH %d); cuDNN's fused attention takes multiples of 8 up to 128",
             key.C / key.NH, key.C, key.NH);
    }
    check_cuda(cudaGetDevice(&key.device), "cudaGetDevice");
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    cudnnHandle_t& h = c.handles[key.device];
    if (h == nullptr) check_cudnn(cudnnCreate(&h), "cudnnCreate");
    check_cudnn(cudnnSetStream(h, static_cast<cudaStream_t>(stream)), "cudnnSetStream");
    std::unique_ptr<Sdpa>& slot = c.graphs[key];
    if (!slot) slot = build(key, h);
    *handle = h;
    return *slot;
}

void execute(Sdpa& s, cudnnHandle_t handle, std::unordered_map<TensorPtr, void*>& pack, const char* what) {
    check(s.graph->execute(handle, pack, s.workspace), what);
}

}   // namespace

bool cudnn_attention_available(std::string* why) {
    const size_t version = cudnnGetVersion();
    if (version < 90000) {
        if (why != nullptr) *why = format("cuDNN %zu is older than 9.0", version);
        return false;
    }
    return true;
}

void attention_forward_cudnn(void* out, float* lse, const void* qkv, int B, int T, int C, int NH, DType dtype,
                             void* stream) {
    if (B == 0 || T == 0) return;
    cudnnHandle_t handle = nullptr;
    Sdpa& s = graph_for({0, B, T, C, NH, dtype, false}, stream, &handle);
    const size_t bytes = dtype_size(dtype);
    char* base = const_cast<char*>(static_cast<const char*>(qkv));
    std::unordered_map<TensorPtr, void*> pack = {
        {s.q, base}, {s.k, base + (size_t)C * bytes}, {s.v, base + 2 * (size_t)C * bytes}, {s.o, out}, {s.lse, lse}};
    execute(s, handle, pack, "attention_forward");
}

void attention_backward_cudnn(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse, int B,
                              int T, int C, int NH, DType dtype, void* stream) {
    if (B == 0 || T == 0) return;
    cudnnHandle_t handle = nullptr;
    Sdpa& s = graph_for({0, B, T, C, NH, dtype, true}, stream, &handle);
    const size_t bytes = dtype_size(dtype);
    char* base = const_cast<char*>(static_cast<const char*>(qkv));
    char* dbase = static_cast<char*>(dqkv);
    std::unordered_map<TensorPtr, void*> pack = {{s.q, base},
                                                 {s.k, base + (size_t)C * bytes},
                                                 {s.v, base + 2 * (size_t)C * bytes},
                                                 {s.o, const_cast<void*>(out)},
                                                 {s.dout, const_cast<void*>(dout)},
                                                 {s.lse, const_cast<float*>(lse)},
                                                 {s.dq, dbase},
                                                 {s.dk, dbase + (size_t)C * bytes},
                                                 {s.dv, dbase + 2 * (size_t)C * bytes}};
    execute(s, handle, pack, "attention_backward");
}

void release_cudnn_attention() {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.graphs.clear();
    for (auto& [device, handle] : c.handles)
        if (handle != nullptr) cudnnDestroy(handle);
    c.handles.clear();
}

}   // namespace train_gpt
