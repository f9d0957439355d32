/* test_exit_product.c — a program that returns from main while a simulated
 * GPU's stream still runs matrix products (no vdev_shutdown, no read of a
 * result) must end cleanly.
 *
 * The exit handlers tear OpenBLAS down (its destructor drops the tables
 * sgemm dispatches through) while the stream's thread goes on running its
 * queue; a product that started after that crashed the process at exit
 * (about one run in two with 900 small products queued). vdev holds products
 * back once the process is exiting (src/ops/threads.c). The test runs the
 * program 12 times as child processes (itself, with the argument "child")
 * and wants exit status 0 from each.
 *
 * Exit handlers of the program's own still use vdev: one registered before
 * the first product (atexit(vdev_shutdown), the usual cleanup) with products
 * still queued, and one that runs a product and reads it back. Both hung for
 * ever while vdev held products back from an exit handler of its own, which
 * ran before them. Each such child runs under alarm(): a hang is SIGALRM. */
#define _GNU_SOURCE
#include "check.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int child(void)
{
    check_fresh("1x4GiB");
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    if (vdev_init() != VDEV_OK)
        return 3;
    int64_t s[2] = {96, 96};
    vdev_device_push("GPU:0");
    vdev_tensor_t *a = vdev_tensor_uniform(s, 2, -1, 1, 1);
    vdev_tensor_t *b = vdev_tensor_uniform(s, 2, -1, 1, 2);
    if (!a || !b)
        return 4;
    /* Queued on the stream; none is waited for. */
    for (int i = 0; i < 900; i++)
        if (!vdev_matmul(a, b, false, i & 1))
            return 5;
    return 0; /* products still queued and running */
}

static vdev_tensor_t *ones;

/* Registered before vdev's first product: runs after main returned. A
 * product of ones [8, 8] by itself is 8 everywhere; else exit status 6. */
static void product_at_exit(void)
{
    vdev_tensor_t *c = vdev_matmul(ones, ones, false, false);
    float v[64] = {0};
    if (!c || vdev_tensor_to_host(c, v, sizeof v) != VDEV_OK || v[0] != 8 || v[63] != 8)
        _exit(6);
    vdev_shutdown();
    if (vdev_is_initialized())
        _exit(7);
}

/* The exit handler `how` ("shutdown" or "product") is registered first,
 * then products are queued on GPU:0 and main returns. */
static int child_handler(const char *how)
{
    alarm(120);
    check_fresh("1x4GiB");
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    if (atexit(!strcmp(how, "shutdown") ? vdev_shutdown : product_at_exit) != 0)
        return 3;
    if (vdev_init() != VDEV_OK)
        return 3;
    int64_t s[2] = {96, 96}, s8[2] = {8, 8};
    vdev_device_push("GPU:0");
    vdev_tensor_t *a = vdev_tensor_uniform(s, 2, -1, 1, 1);
    ones = vdev_tensor_ones(s8, 2, VDEV_F32);
    if (!a || !ones)
        return 4;
    for (int i = 0; i < 300; i++)
        if (!vdev_matmul(a, a, false, i & 1))
            return 5;
    return 0; /* products still queued: the handler runs with them */
}

/* Runs this program as a child with argument `arg`; its exit status, or -1
 * (printed) when a signal ended it. */
static int run_child(const char *self, const char *arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", self, arg, (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    return check_child_status(status);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "child"))
        return child();
    if (argc == 2 && !strncmp(argv[1], "handler-", 8))
        return child_handler(argv[1] + 8);
    for (int run = 0; run < 12; run++) {
        int st = run_child(argv[0], "child");
        if (st != 0)
            printf("  run %d: exit status %d\n", run, st);
        CHECK(st == 0);
    }
    for (int run = 0; run < 3; run++) {
        CHECK(run_child(argv[0], "handler-shutdown") == 0);
        CHECK(run_child(argv[0], "handler-product") == 0);
    }
    return check_done();
}
