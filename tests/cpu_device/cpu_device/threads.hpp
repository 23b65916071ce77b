// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// A GPU's threads on the CPU, for the tests: a launch runs its blocks one
// after another on the calling thread, and a block's threads as fibers
// (each on a stack of its own), each run until it reaches a barrier or a
// warp operation, then the next. So the kernel's own code runs unchanged,
// under ASan and UBSan, with every device allocation a heap block of its
// exact size, and, as one block runs at a time, a function's static
// variables standing for its __shared__ ones (runtime.hpp).
//
// What it checks beyond the sanitizers: a block whose threads wait at
// barriers that can never all be reached (a __syncthreads under a branch)
// stops with a message, and so does a warp operation of a warp whose lanes
// have not all stayed (a full-mask shuffle or ballot would read an exited
// lane). Blocks take turns in launch order; a block's threads take theirs
// forwards on even launches and backwards on odd ones, so a read of a
// word another thread writes without a barrier between them reads the wrong
// word on one of the two.
//
// What it cannot show: a warp operation here also orders the warp's
// memory, so a missing __syncwarp shows only under compute-sanitizer's
// racecheck on a GPU; and it measures nothing about speed.

#include <ucontext.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define CPU_DEVICE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CPU_DEVICE_ASAN 1
#endif
#endif
#if defined(CPU_DEVICE_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace cpu_device {

struct Index3 {
  unsigned x = 0, y = 0, z = 0;
};

[[noreturn]] inline void fail(const char* what, int block, int thread) {
  std::fprintf(stderr, "cpu_device: block %d, thread %d: %s\n", block, thread, what);
  std::abort();
}

namespace detail {

// Threads wait at one until every live thread it counts has arrived; a
// thread that exits counts no more.
struct Barrier {
  int arrived = 0;
  int expected = 0;
  unsigned generation = 0;

  // The last arrival (or exit) releases the waiting ones.
  void complete_if_full() {
    if (arrived > 0 && arrived == expected) {
      arrived = 0;
      ++generation;
    }
  }
};

struct Fiber {
  void* jump[5] = {};  // __builtin_setjmp's
  bool started = false;
  void* stack = nullptr;
  bool done = false;
  const Barrier* waiting = nullptr;
  unsigned waiting_generation = 0;
  void* fake_stack = nullptr;  // ASan's, while switched away
};

// The words a warp operation or a block operation exchanges, a slot a
// thread; two sets, taken in turn, so one barrier an operation suffices (no
// thread can reach the operation after next before every thread has read
// this one's).
inline constexpr std::size_t kSlotBytes = 32;
struct Exchange {
  std::vector<unsigned char> slots[2];
  int turn = 0;
};

// What a gather hands each thread: the values of up to kMax threads, on the
// fiber's stack rather than the heap, as every warp operation makes one.
template <class T, int kMax>
struct Gathered {
  T values[kMax];
  int count = 0;
  std::size_t size() const { return static_cast<std::size_t>(count); }
  const T& operator[](std::size_t i) const { return values[i]; }
  const T* begin() const { return values; }
  const T* end() const { return values + count; }
};
inline constexpr int kMaxLanes = 64;
inline constexpr int kMaxThreads = 1024;

struct Warp {
  Barrier barrier;
  Exchange exchange;
  int live = 0;
};

inline constexpr std::size_t kStackBytes = 256 * 1024;
inline constexpr std::size_t kGuardBytes = 4096;

class Machine {
 public:
  static Machine& get() {
    static thread_local Machine m;
    return m;
  }

  int warp_size() const { return warp_size_; }

  // Runs `kernel` over `blocks` blocks of `threads` threads, in warps of
  // `warp_size` lanes, with `shared` bytes of dynamic shared memory.
  void run(unsigned blocks, unsigned threads, int warp_size, std::size_t shared,
           const std::function<void()>& kernel) {
    if (running_) fail("a launch from inside a kernel", block_, thread_);
    warp_size_ = warp_size;
    if (threads == 0 || threads > static_cast<unsigned>(kMaxThreads)) {
      fail("a launch's threads a block must be 1 to 1024", -1, -1);
    }
    running_ = true;
    kernel_ = &kernel;
    grid_ = blocks;
    threads_ = threads;
    // Exactly the bytes asked for, fresh each launch: ASan sees a read past them.
    dynamic_shared_.reset(new unsigned char[shared > 0 ? shared : 1]);
    ensure_fibers(threads);
    const bool backwards = (launches_++ % 2) == 1;
    for (unsigned b = 0; b < blocks; ++b) run_block(static_cast<int>(b), backwards);
    running_ = false;
  }

  Index3 thread_index() const { return Index3{static_cast<unsigned>(thread_), 0, 0}; }
  Index3 block_index() const { return Index3{static_cast<unsigned>(block_), 0, 0}; }
  Index3 block_dim() const { return Index3{threads_, 1, 1}; }
  Index3 grid_dim() const { return Index3{grid_, 1, 1}; }
  void* dynamic_shared() { return dynamic_shared_.get(); }

  // __syncthreads.
  void block_sync() { arrive(block_barrier_); }

  // __syncwarp and the wave barrier.
  void warp_sync() { arrive(warp().barrier); }

  // Every lane's `value`, lane by lane, in every lane of the warp.
  template <class T>
  Gathered<T, kMaxLanes> warp_gather(const T& value) {
    static_assert(sizeof(T) <= kSlotBytes, "a slot's words");
    Warp& w = warp();
    if (w.live != warp_size_) fail("a warp operation without all the warp's lanes", block_, thread_);
    Gathered<T, kMaxLanes> all;
    gather(w.exchange, w.barrier, value, warp_lane(), warp_size_, all);
    return all;
  }

  // Every thread's `value`, thread by thread, in every thread of the block.
  template <class T>
  Gathered<T, kMaxThreads> block_gather(const T& value) {
    static_assert(sizeof(T) <= kSlotBytes, "a slot's words");
    if (live_ != static_cast<int>(threads_)) fail("a block operation after a thread exited", block_, thread_);
    Gathered<T, kMaxThreads> all;
    gather(block_exchange_, block_barrier_, value, thread_, static_cast<int>(threads_), all);
    return all;
  }

  int lane() const { return warp_lane(); }

 private:
  Machine() { fibers_.reserve(kMaxThreads); }
  ~Machine() {
    for (detail::Fiber& f : fibers_) munmap(f.stack, kStackBytes + kGuardBytes);
  }

  int warp_lane() const { return thread_ % warp_size_; }
  Warp& warp() { return warps_[static_cast<std::size_t>(thread_ / warp_size_)]; }

  template <class T, int kMax>
  void gather(Exchange& x, Barrier& barrier, const T& value, int slot, int count, Gathered<T, kMax>& all) {
    std::vector<unsigned char>& words = x.slots[x.turn];
    if (words.size() < kSlotBytes * static_cast<std::size_t>(count)) words.resize(kSlotBytes * kMax);
    std::memcpy(words.data() + kSlotBytes * static_cast<std::size_t>(slot), &value, sizeof(T));
    const unsigned generation = barrier.generation;
    arrive(barrier);
    // The last to arrive turns the exchange; the others see it turned.
    if (barrier.generation != generation + 1) fail("an exchange's barrier taken out of turn", block_, thread_);
    all.count = count;
    for (int i = 0; i < count; ++i) {
      std::memcpy(&all.values[i], words.data() + kSlotBytes * static_cast<std::size_t>(i), sizeof(T));
    }
  }

  void arrive(Barrier& b) {
    Exchange* turned = nullptr;
    if (&b == &block_barrier_) turned = &block_exchange_;
    for (Warp& w : warps_) {
      if (&b == &w.barrier) turned = &w.exchange;
    }
    ++b.arrived;
    const unsigned generation = b.generation;
    b.complete_if_full();
    if (b.generation != generation) {
      turned->turn ^= 1;
      return;
    }
    Fiber& f = fibers_[static_cast<std::size_t>(thread_)];
    f.waiting = &b;
    f.waiting_generation = generation;
    yield();
  }

  void ensure_fibers(unsigned threads) {
    while (fibers_.size() < threads) {
      void* mem = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (mem == MAP_FAILED) fail("mmap of a fiber's stack", -1, -1);
      mprotect(mem, kGuardBytes, PROT_NONE);  // an overflow faults rather than corrupts
      fibers_.emplace_back();
      fibers_.back().stack = mem;
    }
  }

  // A fiber's life: started once (makecontext), it runs a kernel's thread
  // to its end, waits to be resumed for the next block's, and so on. Its
  // switches are the compiler's setjmp and longjmp, which save and load a
  // few registers: swapcontext makes a system call for the signal mask, and
  // ASan's longjmp one for the signal stack, at every barrier of every
  // thread. No frame is left behind by a switch, so none needs unwinding.
  static void entry() {
    Machine& m = get();
#if defined(CPU_DEVICE_ASAN)
    __sanitizer_finish_switch_fiber(nullptr, &m.scheduler_bottom_, &m.scheduler_size_);
#endif
    for (;;) {
      (*m.kernel_)();
      m.exit_thread();
    }
  }

  void exit_thread() {
    Fiber& f = fibers_[static_cast<std::size_t>(thread_)];
    f.done = true;
    --live_;
    --block_barrier_.expected;
    Warp& w = warp();
    --w.live;
    --w.barrier.expected;
    // An exit can be what a barrier waited for.
    const unsigned block_generation = block_barrier_.generation;
    block_barrier_.complete_if_full();
    if (block_barrier_.generation != block_generation) block_exchange_.turn ^= 1;
    const unsigned warp_generation = w.barrier.generation;
    w.barrier.complete_if_full();
    if (w.barrier.generation != warp_generation) w.exchange.turn ^= 1;
    yield();
  }

  // Continues the context saved in `to` (a function apart from the
  // __builtin_setjmp, as the compiler requires). Not instrumented: ASan
  // would precede the longjmp with its no-return hook, which asks for the
  // signal stack, a system call.
  [[gnu::noinline]] __attribute__((no_sanitize("address"))) static void jump(void** to) {
    __builtin_longjmp(to, 1);
  }

  void yield() {
    Fiber& f = fibers_[static_cast<std::size_t>(thread_)];
#if defined(CPU_DEVICE_ASAN)
    __sanitizer_start_switch_fiber(&f.fake_stack, scheduler_bottom_, scheduler_size_);
#endif
    if (__builtin_setjmp(f.jump) == 0) jump(scheduler_jump_);
#if defined(CPU_DEVICE_ASAN)
    __sanitizer_finish_switch_fiber(f.fake_stack, &scheduler_bottom_, &scheduler_size_);
#endif
  }

  void resume(int t) {
    thread_ = t;
    Fiber& f = fibers_[static_cast<std::size_t>(t)];
    f.waiting = nullptr;
#if defined(CPU_DEVICE_ASAN)
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, static_cast<char*>(f.stack) + kGuardBytes, kStackBytes);
#endif
    if (__builtin_setjmp(scheduler_jump_) == 0) {
      if (f.started) jump(f.jump);
      f.started = true;
      ucontext_t start{};
      getcontext(&start);
      start.uc_stack.ss_sp = static_cast<char*>(f.stack) + kGuardBytes;
      start.uc_stack.ss_size = kStackBytes;
      start.uc_link = nullptr;  // a fiber never returns
      makecontext(&start, &Machine::entry, 0);
      setcontext(&start);
    }
#if defined(CPU_DEVICE_ASAN)
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  }

  void run_block(int b, bool backwards) {
    block_ = b;
    const int threads = static_cast<int>(threads_);
    const int warps = (threads + warp_size_ - 1) / warp_size_;
    live_ = threads;
    block_barrier_ = Barrier{0, threads, 0};
    block_exchange_.turn = 0;
    warps_.assign(static_cast<std::size_t>(warps), Warp{});
    for (int i = 0; i < warps; ++i) {
      // The last warp of a block of part of a warp has only those lanes,
      // and so no warp operation (warp_gather).
      Warp& w = warps_[static_cast<std::size_t>(i)];
      w.live = std::min(warp_size_, threads - i * warp_size_);
      w.barrier.expected = w.live;
    }
    for (int t = 0; t < threads; ++t) {
      Fiber& f = fibers_[static_cast<std::size_t>(t)];
      f.done = false;
      f.waiting = nullptr;
    }
    for (;;) {
      int unfinished = 0;
      bool ran = false;
      for (int i = 0; i < threads; ++i) {
        const int t = backwards ? threads - 1 - i : i;
        Fiber& f = fibers_[static_cast<std::size_t>(t)];
        if (f.done) continue;
        ++unfinished;
        if (f.waiting != nullptr && f.waiting->generation == f.waiting_generation) continue;
        resume(t);
        ran = true;
      }
      if (unfinished == 0) return;
      if (!ran) fail("every thread left waits at a barrier that the others never reach", block_, -1);
    }
  }

  int warp_size_ = 32;
  bool running_ = false;
  unsigned launches_ = 0;
  const std::function<void()>* kernel_ = nullptr;
  unsigned grid_ = 0;
  unsigned threads_ = 0;
  int block_ = -1;
  int thread_ = -1;
  int live_ = 0;
  std::unique_ptr<unsigned char[]> dynamic_shared_;
  std::vector<Fiber> fibers_;  // never reallocated (Machine()): a suspended fiber refers to its own
  std::vector<Warp> warps_;
  Barrier block_barrier_;
  Exchange block_exchange_;
  void* scheduler_jump_[5] = {};
#if defined(CPU_DEVICE_ASAN)
  const void* scheduler_bottom_ = nullptr;  // the calling thread's stack, for ASan's fiber switches
  std::size_t scheduler_size_ = 0;
#endif
};

}  // namespace detail

using detail::Machine;

}  // namespace cpu_device
