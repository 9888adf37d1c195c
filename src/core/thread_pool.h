// A fixed pool of CPU worker threads for data-parallel loops (static chunking, the caller participates).
//
// Threading guarantees:
//   - The workers are created once, in the constructor, and joined in the destructor.
//   - parallel_for() may be called from any thread; concurrent calls are serialized by an internal mutex
//     (one loop runs at a time), so a pool may be shared by runners that run concurrently.
//   - parallel_for() is not reentrant: calling it from inside a loop body on the same pool is a programmer
//     error and aborts (FP4MOE_ASSERT) instead of deadlocking.
//   - Steady state allocates nothing: the body is passed by reference (type-erased pointer + trampoline),
//     workers sleep on an atomic generation counter (futex via std::atomic::wait after a short spin).
//   - Everything the caller wrote before parallel_for() is visible to the body on every thread, and
//     everything the body wrote is visible to the caller after parallel_for() returns (acquire/release).
//   - The body must not throw (an escaping exception terminates the program).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace fp4moe {

class thread_pool {
public:
    /// A pool of `threads` participants: the calling thread plus `threads - 1` workers (threads <= 0: all
    /// hardware threads).
    explicit thread_pool(int threads);
    ~thread_pool();
    thread_pool(const thread_pool &) = delete;
    thread_pool &operator=(const thread_pool &) = delete;

    /// Participants in a loop (workers + the caller).
    int size() const { return static_cast<int>(workers_.size()) + 1; }

    /// Calls fn(begin, end) on contiguous chunks covering [0, n): with p = min(size(), max_threads, n)
    /// participants (max_threads <= 0: size()), chunk i is [i * n / p, (i + 1) * n / p) and runs on
    /// participant i; chunk 0 runs on the calling thread. The split depends only on (n, p), never on timing.
    /// Returns when every chunk has finished. n <= 0 calls nothing.
    /// `fn` is fn(begin, end) or fn(begin, end, participant) with participant = i in [0, size()): distinct for
    /// chunks running at the same time, so it can index per-thread scratch.
    template <typename Fn>
    void parallel_for(std::int64_t n, Fn &&fn, int max_threads = 0) {
        using F = std::remove_reference_t<Fn>;
        run(n, max_threads, const_cast<void *>(static_cast<const void *>(&fn)),
            [](void *ctx, std::int64_t b, std::int64_t e, int i) {
                F &f = *static_cast<F *>(ctx);
                if constexpr (std::is_invocable_v<F &, std::int64_t, std::int64_t, int>)
                    f(b, e, i);
                else
                    f(b, e);
            });
    }

private:
    using trampoline = void (*)(void *, std::int64_t, std::int64_t, int);
    void run(std::int64_t n, int max_threads, void *ctx, trampoline call);
    void worker_main(int index);
    void run_chunk(int index);

    std::vector<std::thread> workers_;
    std::mutex call_mutex_; // serializes parallel_for callers

    // The current loop, published by `generation_` (release) and read by workers after observing it (acquire).
    void *ctx_ = nullptr;
    trampoline call_ = nullptr;
    std::int64_t n_ = 0;
    int parts_ = 0;

    std::atomic<std::uint64_t> generation_{0};
    std::atomic<int> pending_{0}; // workers still running the current generation
    std::atomic<bool> stop_{false};
};

} // namespace fp4moe
