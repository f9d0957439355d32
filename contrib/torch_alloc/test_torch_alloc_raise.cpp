/* test_torch_alloc_raise.cpp — vdev_torch_malloc_raising, the allocation
 * function PyTorch is given, loaded with dlopen as PyTorch loads it, on a
 * simulated GPU split into logical GPUs of 64 MiB and 32 MiB: a block that
 * fits comes back as from vdev_torch_malloc; one that does not throws
 * std::runtime_error with "CUDA out of memory (vdev): " and vdev's report
 * (never a NULL block, which PyTorch would keep as a tensor's memory); a
 * device with no vdev device behind it throws with vdev_torch_malloc's
 * message; size 0 is NULL without a throw, as PyTorch expects. */
#include "vdev_torch_alloc.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

static int passed, failed;
static void check(bool ok, int line, const std::string &what)
{
    if (ok) {
        passed++;
    } else {
        failed++;
        std::fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, line, what.c_str());
    }
}
#define CHECK(c) check((c), __LINE__, #c)

typedef void *(*malloc_fn)(ssize_t, int, cudaStream_t);
typedef void (*free_fn)(void *, ssize_t, int, cudaStream_t);

/* The message the call throws ("" when it returns). */
static std::string thrown(malloc_fn m, ssize_t size, int device, void **out)
{
    *out = nullptr;
    try {
        *out = m(size, device, nullptr);
    } catch (const std::runtime_error &e) {
        return e.what();
    }
    return "";
}

int main()
{
    setenv("VDEV_SIM_GPUS", "1x1GiB", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:64MiB,32MiB", 1);
    setenv("VDEV_TORCH_DEVICES", "0:GPU:1", 1);
    void *h = dlopen(VDEV_TORCH_ALLOC_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        std::fprintf(stderr, "test_torch_alloc_raise: %s\n", dlerror());
        return 1;
    }
    malloc_fn m = reinterpret_cast<malloc_fn>(dlsym(h, "vdev_torch_malloc_raising"));
    free_fn f = reinterpret_cast<free_fn>(dlsym(h, "vdev_torch_free"));
    CHECK(m != nullptr && f != nullptr);
    if (!m || !f)
        return 1;

    void *p;
    CHECK(thrown(m, 1000, 0, &p).empty());
    CHECK(p != nullptr);

    void *q;
    std::string e = thrown(m, 40 << 20, 0, &q); /* GPU:1 has 32 MiB */
    CHECK(q == nullptr);
    CHECK(e.rfind("CUDA out of memory (vdev): OOM when allocating 40.00 MiB (41943040 bytes) "
                  "on /device:GPU:1:", 0) == 0);
    CHECK(e.find("the limit is short by") != std::string::npos);

    e = thrown(m, 100, 5, &q); /* PyTorch's device 5: vdev has no GPU:5 */
    CHECK(q == nullptr);
    CHECK(e.rfind("vdev_torch_malloc: ", 0) == 0);
    CHECK(e.find("GPU:5") != std::string::npos);

    CHECK(thrown(m, 0, 0, &q).empty());
    CHECK(q == nullptr);

    /* and it goes on after a failure */
    void *r;
    CHECK(thrown(m, 16 << 20, 0, &r).empty());
    CHECK(r != nullptr);
    f(r, 16 << 20, 0, nullptr);
    f(p, 1000, 0, nullptr);
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
