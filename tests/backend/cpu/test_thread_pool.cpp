// The core thread pool (src/core/thread_pool.h) and CPU feature detection, tested here beside their user
// cpu.fast (tests/core belongs to the core owner's executable).
#include "core/cpu_features.h"
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace fp4moe {
namespace {

TEST(ThreadPool, StaticChunksCoverRangeOnce) {
    thread_pool pool(3);
    EXPECT_EQ(pool.size(), 3);
    for (std::int64_t n : {0, 1, 2, 3, 7, 1000}) {
        std::vector<int> hits(static_cast<std::size_t>(n), 0);
        std::vector<std::pair<std::int64_t, std::int64_t>> chunks(3, {-1, -1});
        pool.parallel_for(n, [&](std::int64_t b, std::int64_t e, int i) {
            chunks[i] = {b, e};
            for (std::int64_t k = b; k < e; ++k) ++hits[k];
        });
        for (std::int64_t k = 0; k < n; ++k) EXPECT_EQ(hits[k], 1) << "n=" << n << " k=" << k;
        // Chunk i = [i*n/p, (i+1)*n/p) with p = min(3, n).
        const std::int64_t p = std::min<std::int64_t>(3, n);
        for (std::int64_t i = 0; i < p; ++i) {
            if (n * i / p < n * (i + 1) / p) {
                EXPECT_EQ(chunks[i], std::make_pair(n * i / p, n * (i + 1) / p)) << n;
            }
        }
    }
}

TEST(ThreadPool, CallerRunsChunkZeroAndWorkersRunTheRest) {
    thread_pool pool(2);
    std::thread::id ids[2];
    pool.parallel_for(2, [&](std::int64_t b, std::int64_t, int i) {
        EXPECT_EQ(b, i);
        ids[i] = std::this_thread::get_id();
    });
    EXPECT_EQ(ids[0], std::this_thread::get_id());
    EXPECT_NE(ids[1], std::this_thread::get_id());
}

TEST(ThreadPool, MaxThreadsLimitsParticipants) {
    thread_pool pool(4);
    std::atomic<int> calls{0};
    pool.parallel_for(
        100,
        [&](std::int64_t b, std::int64_t e) {
            EXPECT_EQ(b, 0);
            EXPECT_EQ(e, 100);
            ++calls;
        },
        1);
    EXPECT_EQ(calls.load(), 1);
}

TEST(ThreadPool, ManyLoopsAndConcurrentCallers) {
    thread_pool pool(2);
    std::atomic<std::int64_t> total{0};
    auto work = [&] {
        for (int it = 0; it < 500; ++it) pool.parallel_for(10, [&](std::int64_t b, std::int64_t e) { total += e - b; });
    };
    std::thread other(work);
    work();
    other.join();
    EXPECT_EQ(total.load(), 2 * 500 * 10);
}

TEST(ThreadPool, NestedCallAborts) {
    thread_pool pool(2);
    EXPECT_DEATH(pool.parallel_for(2, [&](std::int64_t, std::int64_t) { pool.parallel_for(2, [](auto, auto) {}); }),
                 "not reentrant");
}

TEST(CpuFeatures, BestIsConsistent) {
    const cpu_features &f = detect_cpu_features();
    const cpu_isa best = f.best();
    if (best == cpu_isa::avx512) {
        EXPECT_TRUE(f.avx2 && f.avx512f && f.avx512bw && f.avx512vl);
    }
    if (!f.avx2) {
        EXPECT_EQ(best, cpu_isa::scalar);
    }
    EXPECT_STREQ(cpu_isa_name(cpu_isa::avx2), "avx2");
    EXPECT_EQ(&detect_cpu_features(), &f);
}

} // namespace
} // namespace fp4moe
