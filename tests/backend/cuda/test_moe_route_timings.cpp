// Not a test of correctness: the routing kernels' latencies (logits, top-k, plan, fused) at decode and prefill
// sizes, printed for tuning, disabled by default (run with --gtest_also_run_disabled_tests
// --gtest_filter='*Timings*'). Correctness of the same kernels: test_moe_route.cpp.
#include "cuda_test_util.h"
#include "kernels/moe_route.h"
#include "kernels/router_logits_mma.h"
#include "route_test_util.h"

#include "fp4moe/moe.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace {

namespace fc = fp4moe::cuda;
using fp4moe::test::device_buffer;
using namespace fp4moe::test::route;

} // namespace

// Not a check: latencies of the three launches at decode and prefill sizes, for the lead's tuning. Each op is
// captured 20 times in one graph; the median of 10 timed replays over 20 is printed. Run with
// --gtest_also_run_disabled_tests --gtest_filter='*Timings*'.
TEST(CudaMoeRoute, DISABLED_Timings) {
    SKIP_WITHOUT_GPU();
    std::mt19937 rng(fresh_seed());
    struct timing_case {
        const char *name;
        int tokens, hidden;
        fp4moe::moe_desc d;
    };
    const auto qwen = make_desc(128, 8, 0, softmax_routing(true));
    const auto dsv3 = make_desc(256, 8, 1, sigmoid_routing(true, 8, 4, 2.5f));
    const auto glm = make_desc(128, 8, 1, sigmoid_routing(true, 1, 1, 1.0f));
    const timing_case cases[] = {
        {"qwen3", 1, 2048, qwen},    {"qwen3", 8, 2048, qwen},   {"qwen3", 64, 2048, qwen}, {"glm", 1, 4096, glm},
        {"glm", 4, 4096, glm},       {"glm", 16, 4096, glm},     {"glm", 32, 4096, glm},    {"glm", 64, 4096, glm},
        {"dsv3", 1, 7168, dsv3},     {"dsv3", 4, 7168, dsv3},    {"dsv3", 8, 7168, dsv3},   {"dsv3", 32, 7168, dsv3},
        {"dsv3", 16, 7168, dsv3},    {"dsv3", 64, 7168, dsv3},   {"dsv3", 512, 7168, dsv3}, {"dsv3", 4096, 7168, dsv3},
        {"dsv3", 16384, 7168, dsv3}, {"glm", 256, 4096, glm},    {"glm", 1024, 4096, glm},  {"glm", 4096, 4096, glm},
        {"glm", 16384, 4096, glm},   {"qwen3", 4096, 2048, qwen}};
    cudaStream_t stream;
    FP4MOE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t start, stop;
    FP4MOE_CUDA_CHECK(cudaEventCreate(&start));
    FP4MOE_CUDA_CHECK(cudaEventCreate(&stop));
    auto time_us = [&](auto &&launch) {
        constexpr int kPerGraph = 20;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        FP4MOE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < kPerGraph; ++i) EXPECT_EQ(launch(), cudaSuccess);
        FP4MOE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        FP4MOE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        FP4MOE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
        std::vector<float> ms;
        for (int r = 0; r < 10; ++r) {
            FP4MOE_CUDA_CHECK(cudaEventRecord(start, stream));
            FP4MOE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
            FP4MOE_CUDA_CHECK(cudaEventRecord(stop, stream));
            FP4MOE_CUDA_CHECK(cudaEventSynchronize(stop));
            float t = 0;
            FP4MOE_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
            ms.push_back(t);
        }
        FP4MOE_CUDA_CHECK(cudaGraphExecDestroy(exec));
        FP4MOE_CUDA_CHECK(cudaGraphDestroy(graph));
        std::sort(ms.begin(), ms.end());
        return 1000.0 * ms[ms.size() / 2] / kPerGraph;
    };
    std::printf("%-6s %6s %5s | %10s %10s %10s %10s | %12s %12s %12s | %10s %10s\n", "model", "T", "H", "logits us",
                "topk us", "plan us", "+masked us", "topk+plan us", "+masked us", "fused all us", "no-splitK",
                "mma.sync");
    for (const auto &c : cases) {
        const auto &d = c.d;
        const int E = static_cast<int>(d.experts), slots = static_cast<int>(d.slots());
        const int NE = static_cast<int>(d.total_experts()), T = c.tokens;
        std::normal_distribution<float> xn(0.0f, 1.0f), rn(0.0f, 0.02f);
        std::vector<std::uint16_t> x(static_cast<std::size_t>(T) * c.hidden);
        std::vector<float> router(static_cast<std::size_t>(E) * c.hidden);
        for (auto &v : x) v = fp4moe::float_to_bf16(xn(rng)).bits;
        for (auto &v : router) v = rn(rng);
        device_buffer<std::uint16_t> d_x(x);
        device_buffer<float> d_router(router), d_bias(make_bias(input_kind::random, E, rng));
        device_buffer<float> d_logits(static_cast<std::size_t>(T) * E), d_w(static_cast<std::size_t>(T) * slots);
        device_buffer<std::int32_t> d_ids(static_cast<std::size_t>(T) * slots);
        device_plan plan(NE, T * slots, T);
        const auto rule = to_rule(d);
        const float *bias = d.routing.correction_bias ? d_bias.ptr : nullptr;
        const double t_logits =
            time_us([&] { return fc::moe_router_logits(d_x.ptr, d_router.ptr, T, c.hidden, E, d_logits.ptr, stream); });
        const double t_topk = time_us(
            [&] { return fc::moe_route_topk(d_logits.ptr, bias, T, rule, d_ids.ptr, d_w.ptr, nullptr, stream); });
        const double t_plan =
            time_us([&] { return fc::moe_build_plan(d_ids.ptr, T, slots, NE, T, plan.buffers(false), stream); });
        const double t_masked =
            time_us([&] { return fc::moe_build_plan(d_ids.ptr, T, slots, NE, T, plan.buffers(true), stream); });
        double t_gemv = 0; // the logits without split-K (the GEMV / tiled kernels), for comparison
        if (T <= 64) {
            t_gemv = time_us([&] {
                return fc::moe_router_logits_splitk_max(d_x.ptr, d_router.ptr, T, c.hidden, E, d_logits.ptr, 0, stream);
            });
        }
        double t_mma = 0; // the mma.sync tensor-core kernel, where moe_router_logits may take another
        if (T > 64 && fc::router_logits_mma_fits(c.hidden, d_x.ptr, d_router.ptr))
            t_mma = time_us(
                [&] { return fc::router_logits_mma(d_x.ptr, d_router.ptr, T, c.hidden, E, d_logits.ptr, stream); });
        double t_tp = 0, t_tp_masked = 0, t_all = 0; // one-kernel top-k + plan, and the whole fused routing
        if (fc::moe_route_topk_plan_fits(T, rule)) {
            t_tp = time_us([&] {
                return fc::moe_route_topk_plan(d_logits.ptr, bias, T, rule, T, d_ids.ptr, d_w.ptr, nullptr,
                                               plan.buffers(false), stream);
            });
            t_tp_masked = time_us([&] {
                return fc::moe_route_topk_plan(d_logits.ptr, bias, T, rule, T, d_ids.ptr, d_w.ptr, nullptr,
                                               plan.buffers(true), stream);
            });
            t_all = time_us([&] {
                return fc::moe_route_fused(d_x.ptr, d_router.ptr, bias, T, c.hidden, rule, T, d_logits.ptr, d_ids.ptr,
                                           d_w.ptr, nullptr, plan.buffers(false), stream);
            });
        }
        std::printf("%-6s %6d %5d | %10.2f %10.2f %10.2f %10.2f | %12.2f %12.2f %12.2f | %10.2f %10.2f\n", c.name, T,
                    c.hidden, t_logits, t_topk, t_plan, t_masked, t_tp, t_tp_masked, t_all, t_gemv, t_mma);
    }
    FP4MOE_CUDA_CHECK(cudaEventDestroy(start));
    FP4MOE_CUDA_CHECK(cudaEventDestroy(stop));
    FP4MOE_CUDA_CHECK(cudaStreamDestroy(stream));
}
