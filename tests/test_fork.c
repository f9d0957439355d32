/* test_fork.c — a child that fork() makes from a process whose runtime runs
 * (Python's multiprocessing does this by default on Linux): it has none of
 * the parent's threads, so every use of the parent's runtime, and starting
 * another, must fail at once with VDEV_ERR_UNSUPPORTED and advice instead
 * of waiting forever on a stream nobody serves; freeing the parent's
 * tensors and vdev_shutdown must return; a change of the configuration
 * there is refused with the same error (not "cannot be modified after being
 * initialized": the child's runtime is not initialized); and the parent must
 * go on as if nothing happened. A child forked while no runtime runs starts its own.
 * The parent's layers, models, optimizers, tapes and DLPack exports, the
 * checkpoint calls on its tensors and the memory queries and governance
 * setters are refused the same way, naming the call, and freeing those
 * handles only drops them.
 *
 * Each child runs its checks under alarm(), so a hang fails the test, and
 * reports its failures through its exit status. */
#define _GNU_SOURCE
#include "check.h"

#include <dlpack/dlpack.h>
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

/* Runs child() in a forked child under a 120 s alarm; the child's exit
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
        alarm(120);
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

/* The parent's handles of every other kind (made in main) */
static vdev_dense_t *dense;
static vdev_mlp_t *mlp;
static vdev_optimizer_t *sgd, *adam;
static vdev_tape_t *tape;
static vdev_tensor_t *var;
static struct DLManagedTensor *export;
static char ckpt_path[64];

/* status `got` is the fork refusal of fn */
#define REFUSED(got, fn)                                                                           \
    do {                                                                                           \
        CHECK((got) == VDEV_ERR_UNSUPPORTED);                                                      \
        expect_refusal((fn), parent, __LINE__);                                                    \
    } while (0)
/* a call returning a pointer or a count: `bad` is its failure value */
#define REFUSED_AS(call, bad, fn)                                                                  \
    do {                                                                                           \
        vdev_clear_error();                                                                        \
        CHECK((call) == (bad));                                                                    \
        REFUSED(vdev_last_status(), fn);                                                           \
    } while (0)

/* Layers, models, optimizers, tapes: each call refused, each free a drop. */
static void child_of_models(long parent)
{
    vdev_tensor_t *x = cpu_t, *out[8] = {0}, *grad = NULL;
    const char *names[8];
    int64_t n, sizes[2] = {4, 2};
    REFUSED_AS(vdev_dense_new(4, 4, VDEV_ACT_RELU, 1), NULL, "vdev_dense_new");
    REFUSED_AS(vdev_dense_forward(dense, x), NULL, "vdev_dense_forward");
    REFUSED_AS(vdev_mlp_new(sizes, 2, VDEV_ACT_RELU, VDEV_ACT_NONE, 1), NULL, "vdev_mlp_new");
    REFUSED_AS(vdev_mlp_forward(mlp, x), NULL, "vdev_mlp_forward");
    REFUSED_AS(vdev_mlp_variables(mlp, out, 8), -1, "vdev_mlp_variables");
    REFUSED_AS(vdev_sgd_new(0.1f, 0.0f), NULL, "vdev_sgd_new");
    REFUSED_AS(vdev_adam_new(0.1f, 0.9f, 0.999f, 1e-7f), NULL, "vdev_adam_new");
    REFUSED(vdev_optimizer_apply(sgd, &var, &gpu_t, 1), "vdev_optimizer_apply");
    REFUSED_AS(vdev_optimizer_slots(sgd, var, out, names, 8), -1, "vdev_optimizer_slots");
    REFUSED(vdev_optimizer_get_iterations(sgd, &n), "vdev_optimizer_get_iterations");
    REFUSED(vdev_optimizer_set_iterations(sgd, 3), "vdev_optimizer_set_iterations");
    REFUSED(vdev_sgd_set(sgd, 0.1f, 0.5f), "vdev_sgd_set");
    REFUSED(vdev_sgd_set_nesterov(sgd, true), "vdev_sgd_set_nesterov");
    REFUSED(vdev_adam_set(adam, 0.1f, 0.9f, 0.99f, 1e-7f), "vdev_adam_set");
    REFUSED(vdev_adam_set_amsgrad(adam, true), "vdev_adam_set_amsgrad");
    REFUSED(vdev_optimizer_set_clipping(adam, 1.0f, 0, 0), "vdev_optimizer_set_clipping");
    REFUSED(vdev_optimizer_set_weight_decay(adam, 0.1f), "vdev_optimizer_set_weight_decay");
    REFUSED(vdev_optimizer_exclude_from_weight_decay(adam, &var, 1),
            "vdev_optimizer_exclude_from_weight_decay");
    /* the parent's tape records on this thread: a new one is refused all the same */
    REFUSED_AS(vdev_tape_begin(), NULL, "vdev_tape_begin_ex");
    REFUSED(vdev_tape_watch(tape, var), "vdev_tape_watch");
    REFUSED_AS(vdev_tape_watched_variables(tape, out, 8), -1, "vdev_tape_watched_variables");
    REFUSED(vdev_tape_gradient(tape, var, &var, 1, &grad), "vdev_tape_gradient");
    REFUSED(vdev_tape_pause(tape), "vdev_tape_pause");
    REFUSED(vdev_tape_resume(tape), "vdev_tape_resume");
    vdev_clear_error();
    vdev_tape_end(tape);
    vdev_dense_free(dense);
    vdev_mlp_free(mlp);
    vdev_optimizer_free(sgd);
    vdev_optimizer_free(adam);
    CHECK(vdev_last_status() == VDEV_OK);
    CHECK(vdev_mlp_variables(mlp, out, 8) == -1); /* the handle is gone */
    CHECK_MSG("vdev_mlp_variables: not a live model (freed already, or not a model)");
}

/* Checkpoints of the parent's tensors, DLPack, memory queries and setters. */
static void child_of_memory(long parent)
{
    const char *names[1] = {"t"};
    char buf[64];
    REFUSED(vdev_checkpoint_save(ckpt_path, names, &gpu_t, 1, NULL, 0), "vdev_checkpoint_save");
    REFUSED(vdev_checkpoint_load(ckpt_path, names, &gpu_t, 1), "vdev_checkpoint_load");
    /* reading a file's own contents needs no runtime: as in any process */
    vdev_checkpoint_t *ck = NULL;
    CHECK_OK(vdev_checkpoint_open(ckpt_path, &ck));
    CHECK(vdev_checkpoint_n_entries(ck) == 1);
    vdev_checkpoint_close(ck);
    struct DLManagedTensor *m = NULL;
    REFUSED(vdev_tensor_to_dlpack(gpu_t, &m), "vdev_tensor_to_dlpack");
    REFUSED_AS(vdev_tensor_from_dlpack(export), NULL, "vdev_tensor_from_dlpack");
    const char *dev = "GPU:0";
    struct vdev_memory_info mi;
    struct vdev_memory_limits ml;
    uint64_t released;
    void *p = NULL;
    REFUSED(vdev_memory_info(dev, &mi), "vdev_memory_info");
    REFUSED(vdev_memory_reset_peak(dev), "vdev_memory_reset_peak");
    REFUSED(vdev_memory_release_cached(dev, &released), "vdev_memory_release_cached");
    REFUSED(vdev_mem_alloc(dev, 64, &p), "vdev_mem_alloc");
    REFUSED(vdev_mem_free(dev, buf), "vdev_mem_free");
    REFUSED(vdev_memory_get_limits(dev, &ml), "vdev_memory_get_limits");
    REFUSED(vdev_memory_set_limits(dev, 0, 0), "vdev_memory_set_limits");
    REFUSED(vdev_memory_set_priority(dev, VDEV_PRIORITY_HIGH), "vdev_memory_set_priority");
    REFUSED(vdev_memory_set_pressure_callback(dev, NULL, NULL),
            "vdev_memory_set_pressure_callback");
    vdev_clear_error();
    export->deleter(export); /* drops the parent's tensor's reference, nothing more */
    CHECK(vdev_last_status() == VDEV_OK);
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

    int64_t sizes[2] = {4, 2};
    dense = vdev_dense_new(4, 4, VDEV_ACT_RELU, 1);
    mlp = vdev_mlp_new(sizes, 2, VDEV_ACT_RELU, VDEV_ACT_NONE, 1);
    sgd = vdev_sgd_new(0.1f, 0.9f);
    adam = vdev_adam_new(0.1f, 0.9f, 0.999f, 1e-7f);
    CHECK(dense && mlp && sgd && adam);
    var = vdev_variable(vdev_tensor_fill(shape, 2, VDEV_F32, 1.0));
    CHECK(var != NULL);
    CHECK_OK(vdev_optimizer_apply(sgd, &var, &gpu_t, 1)); /* it has slots */
    snprintf(ckpt_path, sizeof ckpt_path, "/tmp/vdev_test_fork.%ld.ckpt", (long)getpid());
    const char *names[1] = {"t"};
    CHECK_OK(vdev_checkpoint_save(ckpt_path, names, &gpu_t, 1, NULL, 0));
    CHECK_OK(vdev_tensor_to_dlpack(cpu_t, &export));
    tape = vdev_tape_begin();
    CHECK(tape != NULL);
    CHECK_OK(vdev_tape_watch(tape, var));

    CHECK(in_child(child_of_running) == 0);
    CHECK(in_child(child_of_models) == 0);
    CHECK(in_child(child_of_memory) == 0);
    /* the parent's own go on */
    vdev_tensor_t *y = vdev_dense_forward(dense, cpu_t);
    CHECK(y != NULL);
    vdev_tensor_free(y);
    int64_t iters = 0;
    CHECK_OK(vdev_optimizer_get_iterations(sgd, &iters));
    CHECK(iters == 1);
    vdev_tape_end(tape);
    vdev_dense_free(dense);
    vdev_mlp_free(mlp);
    vdev_optimizer_free(sgd);
    vdev_optimizer_free(adam);
    vdev_tensor_free(var);
    export->deleter(export);
    remove(ckpt_path);

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
