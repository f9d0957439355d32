/* host_cuda.cpp — the stand-in CUDA runtime of host_cuda.h: kernel launches,
 * block and warp barriers, shuffles, the few runtime calls the kernels make,
 * and a column-major cuBLAS SGEMM that checks its arguments as cuBLAS does.
 *
 * Each thread of a block is a fiber (ucontext) with its own stack, all run by
 * the launching thread: a scheduler resumes them round robin, each runs until
 * it waits at a barrier (__syncthreads, or the warp barrier of a shuffle) or
 * ends, and a fiber waiting at a barrier is resumed only once every fiber of
 * the barrier has arrived. The blocks run one after the other. Switching
 * fibers costs far less than waking hundreds of host threads at every
 * barrier, which made an emulated kernel a thousand times slower. Stack
 * switches are announced to AddressSanitizer (its fiber interface), so the
 * test runs under ASan too. */
#include "host_cuda.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#define VDEV_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VDEV_EMU_ASAN 1
#endif
#endif
#ifdef VDEV_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

namespace {

constexpr size_t kStack = 256 << 10; /* per GPU thread (sanitizers need room) */

/* A barrier of n fibers: arrivals counted, a generation to wait on. */
struct Barrier {
    int n = 0, count = 0;
    unsigned gen = 0;
};

struct Fiber {
    ucontext_t ctx;
    char *stack = nullptr;
    Barrier *waiting = nullptr; /* on this barrier's generation `gen`, or none */
    unsigned gen = 0;
    bool done = false;
    uint3 tid{0, 0, 0};
};

/* One launch at a time (the lock below), so the fibers, their stacks and the
 * block state are shared statics. */
std::mutex launch_lock;
std::vector<Fiber> fibers;
std::vector<Barrier> warp_bars;
std::vector<uint64_t> slots; /* one per thread, for shuffles */
Barrier block_bar;
ucontext_t sched_ctx;
int cur = -1;                          /* the running fiber */
const std::function<void()> *cur_body; /* what every fiber runs */

#ifdef VDEV_EMU_ASAN
void *sched_fake_stack;
const void *sched_stack_bottom;
size_t sched_stack_size;
#endif

/* Fiber -> scheduler. */
void yield_to_scheduler()
{
#ifdef VDEV_EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, sched_stack_bottom, sched_stack_size);
    swapcontext(&fibers[(size_t)cur].ctx, &sched_ctx);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    swapcontext(&fibers[(size_t)cur].ctx, &sched_ctx);
#endif
}

/* Arrives at b; returns once all of b's fibers have. */
void arrive(Barrier &b)
{
    if (++b.count == b.n) {
        b.count = 0;
        b.gen++;
        return;
    }
    Fiber &f = fibers[(size_t)cur];
    f.waiting = &b;
    f.gen = b.gen;
    yield_to_scheduler();
}

void fiber_main()
{
#ifdef VDEV_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &sched_stack_bottom, &sched_stack_size);
#endif
    (*cur_body)();
    fibers[(size_t)cur].done = true;
#ifdef VDEV_EMU_ASAN
    __sanitizer_start_switch_fiber(nullptr, sched_stack_bottom, sched_stack_size);
#endif
    /* returning resumes uc_link: the scheduler */
}

/* Sets f up to run fiber_main from the start of its stack (out of line:
 * getcontext returns twice, which the caller's loop variables must not see). */
__attribute__((noinline)) void start_fiber(Fiber &f)
{
    f.done = false;
    f.waiting = nullptr;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = &sched_ctx;
    makecontext(&f.ctx, fiber_main, 0);
}

/* Scheduler -> fiber i, with its builtins set. */
void resume(int i)
{
    Fiber &f = fibers[(size_t)i];
    cur = i;
    threadIdx = f.tid;
#ifdef VDEV_EMU_ASAN
    __sanitizer_start_switch_fiber(&sched_fake_stack, f.stack, kStack);
    swapcontext(&sched_ctx, &f.ctx);
    __sanitizer_finish_switch_fiber(sched_fake_stack, &sched_stack_bottom, &sched_stack_size);
#else
    swapcontext(&sched_ctx, &f.ctx);
#endif
}

std::mutex state_lock;
cudaError_t last_error = cudaSuccess;
vdev_emu_counts counts;
int fail_launch, fail_create, fail_gemm; /* vdev_emu_fail_next: the code, 0 for none */

/* The failure set for the next call of one kind, taken (under state_lock). */
int take_failure(int *slot)
{
    int code = *slot;
    *slot = 0;
    return code;
}

} // namespace

void vdev_emu::run_grid(dim3 g, dim3 b, const std::function<void()> &body)
{
    unsigned long threads = (unsigned long)b.x * b.y * b.z;
    if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z || threads > 1024 || b.z > 64 ||
        g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
        std::lock_guard<std::mutex> l(state_lock);
        last_error = cudaErrorInvalidConfiguration;
        counts.bad_launches++;
        return;
    }
    {
        std::lock_guard<std::mutex> l(state_lock);
        if (int code = take_failure(&fail_launch)) {
            last_error = (cudaError_t)code;
            return;
        }
    }
    std::lock_guard<std::mutex> launch(launch_lock);
    size_t n = threads;
    if (fibers.size() < n)
        fibers.resize(n);
    for (size_t t = 0; t < n; t++)
        if (!fibers[t].stack) {
            void *st =
                mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (st == MAP_FAILED) {
                std::fprintf(stderr, "host_cuda: no memory for the stack of a GPU thread\n");
                std::abort();
            }
            fibers[t].stack = (char *)st;
        }
    warp_bars.assign((n + 31) / 32, Barrier());
    for (size_t w = 0; w < warp_bars.size(); w++)
        warp_bars[w].n = (int)(n - w * 32 < 32 ? n - w * 32 : 32);
    slots.assign(n, 0);
    block_bar = Barrier();
    block_bar.n = (int)n;
    blockDim = b;
    gridDim = g;
    cur_body = &body;
    for (unsigned z = 0; z < g.z; z++)
        for (unsigned y = 0; y < g.y; y++)
            for (unsigned x = 0; x < g.x; x++) {
                blockIdx = uint3{x, y, z};
                for (size_t t = 0; t < n; t++) {
                    Fiber &f = fibers[t];
                    f.tid = uint3{(unsigned)(t % b.x), (unsigned)(t / b.x % b.y),
                                  (unsigned)(t / ((unsigned long)b.x * b.y))};
                    start_fiber(f);
                }
                /* Round robin: run each fiber that can go until it waits or ends. */
                size_t finished = 0;
                while (finished < n) {
                    bool progress = false;
                    finished = 0;
                    for (size_t t = 0; t < n; t++) {
                        Fiber &f = fibers[t];
                        if (f.done) {
                            finished++;
                            continue;
                        }
                        if (f.waiting && f.waiting->gen == f.gen)
                            continue;
                        f.waiting = nullptr;
                        resume((int)t);
                        progress = true;
                        if (f.done)
                            finished++;
                    }
                    if (!progress && finished < n) {
                        std::fprintf(stderr, "host_cuda: the threads of a block wait at barriers "
                                             "that not all of them reach (a kernel bug)\n");
                        std::abort();
                    }
                }
            }
    cur = -1;
    std::lock_guard<std::mutex> l(state_lock);
    counts.launches++;
}

void vdev_emu::syncthreads() { arrive(block_bar); }

int vdev_emu::lane_id() { return cur & 31; }

uint64_t vdev_emu::shuffle(uint64_t v, int src_lane)
{
    int me = cur, w = me >> 5;
    Barrier &bar = warp_bars[(size_t)w];
    slots[(size_t)me] = v;
    arrive(bar);
    uint64_t r = src_lane >= 0 && src_lane < bar.n ? slots[(size_t)(w * 32 + src_lane)] : v;
    arrive(bar);
    return r;
}

cudaError_t cudaGetLastError()
{
    std::lock_guard<std::mutex> l(state_lock);
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorName(cudaError_t e)
{
    return e == cudaSuccess                     ? "cudaSuccess"
           : e == cudaErrorInvalidConfiguration ? "cudaErrorInvalidConfiguration"
           : e == cudaErrorMemoryAllocation     ? "cudaErrorMemoryAllocation"
                                                : "cudaErrorInvalidValue";
}

const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaSuccess                     ? "no error"
           : e == cudaErrorInvalidConfiguration ? "invalid configuration argument"
           : e == cudaErrorMemoryAllocation     ? "out of memory"
                                                : "invalid argument";
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t)
{
    if (!p && bytes)
        return cudaErrorInvalidValue;
    std::memset(p, value, bytes);
    std::lock_guard<std::mutex> l(state_lock);
    counts.memsets++;
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind, cudaStream_t)
{
    if ((!dst || !src) && bytes)
        return cudaErrorInvalidValue;
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}

/* ---- cuBLAS ---- */

struct vdev_emu_blas {
    cudaStream_t stream;
    void *workspace;
    size_t workspace_bytes;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    std::lock_guard<std::mutex> l(state_lock);
    if (int code = take_failure(&fail_create))
        return (cublasStatus_t)code;
    *h = new vdev_emu_blas{nullptr, nullptr, 0};
    counts.blas_handles++;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    std::lock_guard<std::mutex> l(state_lock);
    counts.blas_handles--;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    h->workspace = nullptr; /* as cuBLAS does: back to its own workspace */
    h->workspace_bytes = 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *workspace, size_t bytes)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (((uintptr_t)workspace & 255) != 0)
        return CUBLAS_STATUS_INVALID_VALUE; /* cuBLAS needs 256-byte alignment */
    h->workspace = workspace;
    h->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                 int64_t m, int64_t n, int64_t k, const float *alpha,
                                 const float *A, int64_t lda, const float *B, int64_t ldb,
                                 const float *beta, float *C, int64_t ldc)
{
    auto at_least = [](int64_t v) { return v > 1 ? v : 1; };
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || lda < at_least(ta == CUBLAS_OP_N ? m : k) ||
        ldb < at_least(tb == CUBLAS_OP_N ? k : n) || ldc < at_least(m)) {
        std::lock_guard<std::mutex> l(state_lock);
        counts.bad_gemms++;
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    {
        std::lock_guard<std::mutex> l(state_lock);
        if (int code = take_failure(&fail_gemm))
            return (cublasStatus_t)code;
        counts.gemms++;
    }
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < k; p++) {
                float a = ta == CUBLAS_OP_N ? A[i + p * lda] : A[p + i * lda];
                float b = tb == CUBLAS_OP_N ? B[p + j * ldb] : B[j + p * ldb];
                acc += a * b;
            }
            float *c = &C[i + j * ldc];
            *c = *beta == 0.0f ? *alpha * acc : *alpha * acc + *beta * *c;
        }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc)
{
    return cublasSgemm_v2_64(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_SUCCESS         ? "the operation completed successfully"
           : s == CUBLAS_STATUS_INVALID_VALUE ? "an invalid value was used as an argument"
           : s == CUBLAS_STATUS_ALLOC_FAILED  ? "the resource allocation failed"
                                              : "the library was not initialized";
}

extern "C" void vdev_emu_counts_get(struct vdev_emu_counts *out)
{
    std::lock_guard<std::mutex> l(state_lock);
    *out = counts;
}

extern "C" void vdev_emu_fail_next(const char *what, int code)
{
    std::lock_guard<std::mutex> l(state_lock);
    *(!strcmp(what, "launch") ? &fail_launch : !strcmp(what, "cublasCreate") ? &fail_create
                                                                             : &fail_gemm) = code;
}
