// toolmatrix-cpu-check: prove, on the machine that is about to run llama-server, that the CPU module ggml picks
// here runs and computes right, before a server is trusted with it.
//
// ggml chooses its CPU module (libggml-cpu-<level>.so beside the binary) by what CPUID reports, not by what the
// kernel or hypervisor lets a process execute; a level they refuse kills the server with SIGILL at its first
// matrix product. This loads the backends exactly as llama-server does (ggml_backend_load_all from the binary's
// folder), then runs the kernels a GGUF model's forward pass runs: matrix products of each weight type a quantized
// model holds, single-token and batched, in plain and in repacked buffers (what llama-server picks for CPU
// weights), against a float reference.
//
// Output, one JSON line each, flushed at once, so a caller whose check died by a signal still knows the module:
//   {"module": PATH, "features": {NAME: VALUE, ...}}      before any kernel runs
//   {"ok": true, "kernels": N, "max_rel_error": X}        every product within tolerance (exit 0)
//   {"ok": false, "error": S}                              a wrong result or no CPU backend (exit 1)
// Death by SIGILL is the answer "this machine refuses an instruction set of that module".

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

std::string json_string(const std::string & text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
        }
        out += c;
    }
    return out + "\"";
}

// The CPU module this process loaded, as the dynamic loader mapped it.
std::string loaded_module() {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        const size_t at = line.find('/');
        if (at != std::string::npos && line.find("libggml-cpu", at) != std::string::npos) {
            return line.substr(at);
        }
    }
    return "";
}

// One product out = a(type, k x rows) * b(f32, k x cols) on `backend`, a placed in `buft`; the largest error
// against the float product of a's dequantized rows, relative to the result's scale; -1 where the buffer does not
// take that type (a repacked layout exists for a few types only; llama-server then keeps the plain one).
double product_error(ggml_backend_t backend, ggml_backend_buffer_type_t buft, ggml_type type, int cols,
                     std::mt19937 & rng) {
    const int k = 512, rows = 64;
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> a_f32(k * rows), b_f32(k * cols);
    for (float & v : a_f32) v = dist(rng);
    for (float & v : b_f32) v = dist(rng);

    ggml_init_params params = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, true};
    ggml_context_ptr weights(ggml_init(params));
    ggml_context_ptr work(ggml_init(params));
    ggml_tensor * a = ggml_new_tensor_2d(weights.get(), type, k, rows);
    ggml_tensor * b = ggml_new_tensor_2d(work.get(), GGML_TYPE_F32, k, cols);
    ggml_tensor * out = ggml_mul_mat(work.get(), a, b);
    ggml_backend_buffer_ptr a_buf(ggml_backend_alloc_ctx_tensors_from_buft(weights.get(), buft));
    ggml_backend_buffer_set_usage(a_buf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    ggml_backend_buffer_ptr work_buf(ggml_backend_alloc_ctx_tensors(work.get(), backend));
    if (!ggml_backend_dev_supports_op(ggml_backend_get_device(backend), out)) {
        return -1.0;
    }

    std::vector<uint8_t> a_data(ggml_row_size(type, k) * rows);
    ggml_quantize_chunk(type, a_f32.data(), a_data.data(), 0, rows, k, nullptr);
    std::vector<float> a_ref(k * rows);
    if (type == GGML_TYPE_F32) {
        a_ref = a_f32;
    } else {
        ggml_get_type_traits(type)->to_float(a_data.data(), a_ref.data(), k * rows);
    }
    ggml_backend_tensor_set(a, a_data.data(), 0, a_data.size());
    ggml_backend_tensor_set(b, b_f32.data(), 0, b_f32.size() * sizeof(float));

    ggml_cgraph * graph = ggml_new_graph(work.get());
    ggml_build_forward_expand(graph, out);
    const bool computed = ggml_backend_graph_compute(backend, graph) == GGML_STATUS_SUCCESS;
    std::vector<float> got(rows * cols);
    ggml_backend_tensor_get(out, got.data(), 0, got.size() * sizeof(float));

    double worst = computed ? 0.0 : INFINITY;
    for (int c = 0; c < cols; ++c) {
        for (int r = 0; r < rows; ++r) {
            double want = 0.0;
            for (int i = 0; i < k; ++i) want += double(a_ref[r * k + i]) * b_f32[c * k + i];
            // The kernels quantize b as the model's activations are; sqrt(k) is the scale of such a sum.
            const double error = std::fabs(got[c * rows + r] - want) / std::sqrt(double(k));
            worst = std::isfinite(error) ? std::max(worst, error) : INFINITY;
        }
    }
    return worst;
}

}  // namespace

int main() {
    ggml_backend_load_all();  // as llama-server does: the best CPU module beside this binary
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (dev == nullptr) {
        std::printf("{\"ok\": false, \"error\": \"no CPU backend loaded (no libggml-cpu*.so beside the binary?)\"}\n");
        return 1;
    }
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    std::string features;
    auto get_features = (ggml_backend_get_features_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features");
    for (ggml_backend_feature * f = get_features ? get_features(reg) : nullptr; f && f->name; ++f) {
        features += (features.empty() ? "" : ", ") + json_string(f->name) + ": " + json_string(f->value);
    }
    std::printf("{\"module\": %s, \"features\": {%s}}\n", json_string(loaded_module()).c_str(), features.c_str());
    std::fflush(stdout);

    ggml_backend_ptr backend(ggml_backend_dev_init(dev, nullptr));
    // The plain CPU buffer and the extra ones llama-server places CPU weights in first (repacked layouts).
    std::vector<ggml_backend_buffer_type_t> bufts = {ggml_backend_dev_buffer_type(dev)};
    auto extra = (ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    for (ggml_backend_buffer_type_t * b = extra ? extra(dev) : nullptr; b && *b; ++b) {
        bufts.push_back(*b);
    }
    // The weight types of the quantized GGUFs toolmatrix serves (Q4_K_M holds Q4_K, Q6_K, Q8_0 and F32 tensors).
    const ggml_type types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K,
                               GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    std::mt19937 rng(7);
    double worst = 0.0;
    int kernels = 0;
    for (ggml_backend_buffer_type_t buft : bufts) {
        for (ggml_type type : types) {
            for (int cols : {1, 8}) {  // one token (vector products) and a prompt batch (matrix products)
                const double error = product_error(backend.get(), buft, type, cols, rng);
                if (error == -1.0) {
                    continue;
                }
                ++kernels;
                if (!(error < 0.5)) {
                    std::printf("{\"ok\": false, \"error\": \"%s x f32 (%d columns, %s buffer) is wrong: error %g\"}\n",
                                ggml_type_name(type), cols, ggml_backend_buft_name(buft), error);
                    return 1;
                }
                worst = std::max(worst, error);
            }
        }
    }
    std::printf("{\"ok\": true, \"kernels\": %d, \"max_rel_error\": %.4g}\n", kernels, worst);
    return 0;
}
