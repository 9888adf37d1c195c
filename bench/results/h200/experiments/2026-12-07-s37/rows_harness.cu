// s37 review helper: each `down by rows` tactic of down-rows.patch against its base tactic (the same tactic without
// down_rows), random NVFP4 weights and plans, I up to 1536, T = 1..8, both layouts, a refused token, run twice for
// determinism. Build line in README.md (call 2).
#include "kernels/moe_decode.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <random>
#include <vector>
using namespace fp4moe::cuda;
#define CK(x)                                                                                                          \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_));                                       \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
static float bf(uint16_t v) {
    uint32_t u = uint32_t(v) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t tobf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
template <class T>
T *up(const std::vector<T> &v) {
    T *p;
    CK(cudaMalloc(&p, std::max<size_t>(1, v.size() * sizeof(T))));
    CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}
int fails = 0;
void run_case(int H, int I, int E, int S, int k, int T, bool masked, bool refuse, unsigned seed) {
    std::mt19937 rng(seed);
    const int NE = E + S, slots = k + S, maxT = 8;
    decode_weights w;
    w.tiles_gu = (I + 7) / 8, w.ksteps_gu = (H + 63) / 64, w.tiles_down = (H + 15) / 16, w.ksteps_down = (I + 63) / 64;
    auto rnd_bytes = [&](size_t n, bool codes) {
        std::vector<uint8_t> v(n);
        for (auto &b : v) b = codes ? uint8_t(104 + rng() % 16) : uint8_t(rng());
        return v;
    };
    const size_t gq = size_t(w.tiles_gu) * w.ksteps_gu * 512, gs = size_t(w.tiles_gu) * w.ksteps_gu * 64;
    const size_t dq = size_t(w.tiles_down) * w.ksteps_down * 512, ds = size_t(w.tiles_down) * w.ksteps_down * 64;
    w.gate_up_q = up(rnd_bytes(NE * gq, false));
    w.gate_up_s = up(rnd_bytes(NE * gs, true));
    w.down_q = up(rnd_bytes(NE * dq, false));
    w.down_s = up(rnd_bytes(NE * ds, true));
    std::vector<float> g1(NE), g2(NE), g3(NE);
    for (int e = 0; e < NE; ++e)
        g1[e] = 1e-4f * (1 + rng() % 4), g2[e] = 1e-4f * (1 + rng() % 4), g3[e] = 1e-5f * (1 + rng() % 4);
    w.gs_gate = up(g1);
    w.gs_up = up(g2);
    w.gs_down = up(g3);
    std::vector<uint16_t> x(size_t(T) * H);
    for (auto &v : x) v = tobf(std::uniform_real_distribution<float>(-1, 1)(rng));
    std::vector<int> ids(T * slots), counts(NE, 0);
    std::vector<float> tw(T * slots);
    std::vector<std::vector<int>> rows(NE);
    for (int t = 0; t < T; ++t) {
        std::vector<int> ex(E);
        for (int i = 0; i < E; ++i) ex[i] = i;
        std::shuffle(ex.begin(), ex.end(), rng);
        for (int j = 0; j < k; ++j) ids[t * slots + j] = ex[j];
        for (int j = 0; j < S; ++j) ids[t * slots + k + j] = E + j;
        for (int j = 0; j < slots; ++j) tw[t * slots + j] = std::uniform_real_distribution<float>(0.1f, 1)(rng);
        if (refuse && t == T / 2) {
            for (int j = 0; j < slots; ++j) ids[t * slots + j] = -1;
            continue;
        }
        for (int j = 0; j < slots; ++j) rows[ids[t * slots + j]].push_back(t * slots + j);
    }
    std::vector<int> offsets(NE + 1, 0), perm, mp(size_t(NE) * maxT, -1);
    for (int e = 0; e < NE; ++e) {
        counts[e] = rows[e].size();
        offsets[e + 1] = offsets[e] + counts[e];
        for (size_t r = 0; r < rows[e].size(); ++r) perm.push_back(rows[e][r]), mp[e * maxT + r] = rows[e][r];
    }
    perm.resize(std::max<size_t>(perm.size(), 1));
    decode_batch b;
    b.hidden = H, b.inter = I, b.num_experts = NE, b.slots = slots, b.shared = S, b.tokens = T, b.max_tokens = maxT,
    b.masked = masked;
    b.x = up(x);
    b.topk_ids = up(ids);
    b.topk_weights = up(tw);
    b.counts = up(counts);
    b.offsets = up(offsets);
    b.perm = up(perm);
    b.masked_pairs = up(mp);
    const size_t wsb = moe_decode_workspace(H, I, NE, slots, maxT);
    void *ws;
    CK(cudaMalloc(&ws, wsb));
    uint16_t *out;
    CK(cudaMalloc(&out, size_t(T) * H * 2));
    b.workspace = ws, b.out = out;
    auto go = [&](decode_tactic t) {
        CK(cudaMemset(ws, 0xFF, wsb));
        CK(cudaMemset(out, 0x55, size_t(T) * H * 2));
        CK(moe_decode_run(w, b, t, 0));
        CK(cudaDeviceSynchronize());
        std::vector<uint16_t> o(size_t(T) * H);
        CK(cudaMemcpy(o.data(), out, o.size() * 2, cudaMemcpyDeviceToHost));
        return o;
    };
    for (int id = 0; id < kDecodeTacticCount; ++id) {
        decode_tactic t = kDecodeTactics[id];
        if (t.down_rows == 0) continue;
        decode_tactic base = t;
        base.down_rows = 0;
        base.down_rows_ctas = 0;
        auto ref = go(base), got = go(t), got2 = go(t);
        double num = 0, den = 0;
        int nonfinite = 0, badnan = 0;
        float maxrel = 0;
        for (int tt = 0; tt < T; ++tt)
            for (int h = 0; h < H; ++h) {
                const size_t i = size_t(tt) * H + h;
                float a = bf(got[i]), r = bf(ref[i]);
                if (ids[tt * slots] < 0) {
                    if (!std::isnan(a)) ++badnan;
                    continue;
                }
                if (!std::isfinite(a) || !std::isfinite(r)) {
                    ++nonfinite;
                    continue;
                }
                num += double(a - r) * (a - r), den += double(r) * r;
            }
        const double err = std::sqrt(num / std::max(den, 1e-300));
        const bool det = memcmp(got.data(), got2.data(), got.size() * 2) == 0;
        const bool ok = err < 1e-3 && nonfinite == 0 && badnan == 0 && det && den > 0;
        if (!ok) ++fails;
        printf("%s H=%d I=%d E=%d S=%d k=%d T=%d %s%s tactic %d (rows %d ctas %d): err %.2e nonfinite %d badnan %d det "
               "%d den %.2e\n",
               ok ? "ok  " : "FAIL", H, I, E, S, k, T, masked ? "masked" : "perm", refuse ? " refuse" : "", id,
               t.down_rows, t.down_rows_ctas, err, nonfinite, badnan, det, den);
    }
    cudaFree(ws);
    cudaFree(out);
}
int main() {
    unsigned seed = 1234;
    struct C {
        int H, I, E, S, k;
    } cs[] = {{2048, 1536, 128, 0, 8}, {2048, 1504, 256, 1, 8}, {1024, 784, 64, 1, 6},
              {512, 512, 512, 2, 8},   {4096, 1024, 160, 0, 8}, {320, 144, 32, 1, 4}};
    for (auto c : cs)
        for (int T : {1, 2, 3, 5, 8})
            for (int m = 0; m < 2; ++m) run_case(c.H, c.I, c.E, c.S, c.k, T, m, T == 3, seed++);
    printf("fails %d\n", fails);
    return fails != 0;
}
