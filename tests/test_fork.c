/* test_fork.c — a child that fork() makes from a process whose runtime runs
 * (Python's multiprocessing does this by default on Linux): it has none of
 * the parent's threads, so every use of the parent's runtime, and starting
 * another, must fail at once with VDEV_ERR_UNSUPPORTED and advice instead
 * of waiting forever on a stream nobody serves; freeing the parent's
 * tensors and vdev_shutdown must return; a change of the configuration
 * there is refused with the same error (not "cannot be modified after being
 * initialized": the child's runtime is not initialized); and the parent must
 * go on as if nothing happened. A child forked while no runtime runs starts its own.
 *
 * Each child runs its checks under alarm(), so a hang fails the test, and
 * reports its failures through its exit status. */
#define _GNU_SOURCE
#include "check.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* The advice every refusal in a forked child ends with. */
#define ADVICE                                                                                     \
    "from which this process was forked; a forked child can neither use that runtime (its "      \
    "device streams and worker threads stayed in the parent) nor start another: start vdev "     \
    "after fork() in each process that uses it, or start children with spawn (Python: "          \
    "multiprocessing.get_context('spawn'))"

/* The message of a refusal for fn in a child of process parent. */
static void expect_refusal(const char *fn, long parent, int line)
{
    char want[640];
    snprintf(want, sizeof want, "%s: vdev was started in process %ld, " ADVICE, fn, parent);
    if (strcmp(vdev_last_error(), want) == 0)
        check_passed++;
    else
        check_fail(__FILE__, line, "message \"%s\", expected \"%s\"", vdev_last_error(), want);
}

/* Runs child() in a forked child under a 30 s alarm; the child's exit
 * status is its number of failed checks. Returns that status, or -1 when
 * the child died of a signal (a hang ends in SIGALRM). */
static int in_child(void (*child)(long parent))
{
    fflush(stdout);
    long parent = (long)getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        alarm(30);
        check_passed = check_failed = 0;
        child(parent);
        int failed = check_done() != 0;
        fflush(stdout);
        _exit(failed);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return check_child_status(status);
}

static vdev_tensor_t *gpu_t, *cpu_t;

/* In a child of a running runtime: everything is refused, nothing hangs. */
static void child_of_running(long parent)
{
    CHECK(!vdev_is_initialized());
    /* an op on the parent's tensors, on a simulated GPU and on the CPU */
    vdev_tensor_t *r = vdev_add_scalar(gpu_t, 1.0f);
    CHECK(r == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_UNSUPPORTED);
    expect_refusal("AddScalar: input #0", parent, __LINE__);
    r = vdev_matmul(cpu_t, cpu_t, false, false);
    CHECK(r == NULL);
    expect_refusal("MatMul: input #0", parent, __LINE__);
    float h[64];
    CHECK_STATUS(vdev_tensor_to_host(gpu_t, h, sizeof h), VDEV_ERR_UNSUPPORTED);
    expect_refusal("vdev_tensor_to_host", parent, __LINE__);
    /* a new tensor, a device query, start-up itself */
    int64_t shape[1] = {16};
    CHECK(vdev_tensor_zeros(shape, 1, VDEV_F32) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_UNSUPPORTED);
    CHECK_MSG("vdev was started in process");
    CHECK_STATUS(vdev_init(), VDEV_ERR_UNSUPPORTED);
    expect_refusal("vdev_init", parent, __LINE__);
    /* the configuration is refused as start-up is, not as if a start-up
     * had happened here ("Physical devices cannot be modified ...") */
    CHECK_STATUS(vdev_config_set_memory_growth("/physical_device:GPU:0", true),
                 VDEV_ERR_UNSUPPORTED);
    expect_refusal("vdev_config_set_memory_growth", parent, __LINE__);
    CHECK_STATUS(vdev_config_set_memory_fraction("/physical_device:GPU:0", 0.5),
                 VDEV_ERR_UNSUPPORTED);
    expect_refusal("vdev_config_set_memory_fraction", parent, __LINE__);
    int visible[1] = {0};
    CHECK_STATUS(vdev_config_set_visible_devices(visible, 1), VDEV_ERR_UNSUPPORTED);
    expect_refusal("vdev_config_set_visible_devices", parent, __LINE__);
    uint64_t limits[2] = {64ull << 20, 64ull << 20};
    CHECK_STATUS(vdev_config_set_logical_devices("/physical_device:GPU:1", limits, 2),
                 VDEV_ERR_UNSUPPORTED);
    expect_refusal("vdev_config_set_logical_devices", parent, __LINE__);
    struct vdev_memory_info mi;
    CHECK_STATUS(vdev_memory_info("GPU:0", &mi), VDEV_ERR_UNSUPPORTED);
    /* freeing the parent's tensors drops the handles, gives nothing back */
    vdev_clear_error();
    vdev_tensor_free(gpu_t);
    vdev_tensor_free(cpu_t);
    CHECK(vdev_last_status() == VDEV_OK);
    vdev_shutdown(); /* returns: the parent's streams are not waited for */
    CHECK_STATUS(vdev_init(), VDEV_ERR_UNSUPPORTED);
}

/* In a child forked while no runtime ran: its own start-up and work. */
static void child_of_stopped(long parent)
{
    (void)parent;
    check_own_product("GPU:1", 64);
}

int main(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    int64_t shape[2] = {4, 4};
    CHECK_OK(vdev_device_push("GPU:0"));
    gpu_t = vdev_tensor_fill(shape, 2, VDEV_F32, 2.0);
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_push("CPU:0"));
    cpu_t = vdev_tensor_fill(shape, 2, VDEV_F32, 3.0);
    CHECK_OK(vdev_device_pop());
    CHECK(gpu_t && cpu_t);
    /* the stream has work queued when the child is made */
    vdev_tensor_t *q = vdev_mul_scalar(gpu_t, 5.0f);
    CHECK(q != NULL);

    CHECK(in_child(child_of_running) == 0);

    /* the parent's runtime is untouched */
    CHECK(vdev_is_initialized());
    float h[16];
    CHECK_OK(vdev_tensor_to_host(q, h, sizeof h));
    CHECK(h[0] == 10.0f && h[15] == 10.0f);
    vdev_tensor_t *r = vdev_add_scalar(cpu_t, 1.0f);
    CHECK_OK(vdev_tensor_to_host(r, h, sizeof h));
    CHECK(h[0] == 4.0f);
    vdev_tensor_free(r);
    vdev_tensor_free(q);
    vdev_tensor_free(gpu_t);
    vdev_tensor_free(cpu_t);
    vdev_shutdown();

    /* no runtime runs: a child starts its own, and so does the parent */
    CHECK(in_child(child_of_stopped) == 0);
    CHECK_OK(vdev_init());
    CHECK(vdev_is_initialized());
    vdev_shutdown();
    return check_done();
}
