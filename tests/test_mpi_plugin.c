/* test_mpi_plugin.c — training across processes where MPI cannot start,
 * in one process without mpirun: the calls that need MPI fail with the
 * plugin's error instead of crashing or waiting, and the calls that take a
 * strategy or a worker context check their handles first.
 *
 *  - VDEV_MPI_PLUGIN naming a file that is not there: making a multi-worker
 *    mirrored strategy or a parameter-server strategy is
 *    VDEV_ERR_UNSUPPORTED "MPI plugin: cannot load FILE (...)", *out NULL;
 *  - VDEV_MPI_PLUGIN naming a library that is not the plugin (zlib's): the
 *    error names that file, not the plugin's usual name;
 *  - a malformed VDEV_MPI_TIMEOUT (or one below 0.1 s or above 10^9 s):
 *    VDEV_ERR_CONFIG naming the variable,
 *    before any plugin is loaded;
 *  - NULL or dead handles: every parameter-server call and
 *    vdev_strategy_num_local_replicas refuse them with their own message. */
#define _GNU_SOURCE
#include "check.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define MISSING "/nonexistent/libvdev-mpi.so"

static void test_missing_plugin(void)
{
    check_fresh("1x1GiB");
    setenv("VDEV_MPI_PLUGIN", MISSING, 1);
    const char *want = "MPI plugin: cannot load " MISSING " (" MISSING
                       ": cannot open shared object file: No such file or directory)";
    const char *gpu[1] = {"GPU:0"};
    vdev_strategy_t *s = (vdev_strategy_t *)1;
    CHECK_ERR(vdev_multi_worker_mirrored_strategy_new(gpu, 1, &s), VDEV_ERR_UNSUPPORTED, want);
    CHECK(s == NULL);
    struct vdev_ps_options o = {.optimizer = VDEV_PS_SGD, .learning_rate = 0.1f};
    vdev_ps_strategy_t *p = (vdev_ps_strategy_t *)1;
    CHECK_ERR(vdev_ps_strategy_new(&o, &p), VDEV_ERR_UNSUPPORTED, want);
    CHECK(p == NULL);
    /* the failure is not cached: a second try says the same */
    CHECK_ERR(vdev_ps_strategy_new(&o, &p), VDEV_ERR_UNSUPPORTED, want);
    /* the runtime goes on */
    CHECK_OK(vdev_device_push("GPU:0"));
    CHECK_OK(vdev_device_pop());
    unsetenv("VDEV_MPI_PLUGIN");
}

static void test_not_the_plugin(void)
{
    Dl_info info;
    const char *(*fn)(void) = zlibVersion;
    void *addr;
    memcpy(&addr, &fn, sizeof addr); /* a function's address as data (POSIX allows it) */
    CHECK(dladdr(addr, &info) != 0 && info.dli_fname);
    check_fresh("1x1GiB");
    setenv("VDEV_MPI_PLUGIN", info.dli_fname, 1);
    char want[512];
    snprintf(want, sizeof want, "MPI plugin: %s lacks the symbol vdev_mpi_plugin_open",
             info.dli_fname);
    const char *gpu[1] = {"GPU:0"};
    vdev_strategy_t *s = (vdev_strategy_t *)1;
    CHECK_ERR(vdev_multi_worker_mirrored_strategy_new(gpu, 1, &s), VDEV_ERR_BACKEND, want);
    CHECK(s == NULL);
    unsetenv("VDEV_MPI_PLUGIN");
}

static void test_bad_timeout(void)
{
    const char *bad[] = {"0", "-1", "abc", "1e3", "2.5.1", "", "0.0000000001", "0.09",
                         "1000000001"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        check_fresh("1x1GiB");
        setenv("VDEV_MPI_PLUGIN", MISSING, 1); /* never reached */
        setenv("VDEV_MPI_TIMEOUT", bad[i], 1);
        char want[256];
        snprintf(want, sizeof want,
                 "VDEV_MPI_TIMEOUT=\"%s\": expected the seconds a process waits for another, a "
                 "decimal number from 0.1 to 1000000000 (such as 30 or 2.5)",
                 bad[i]);
        const char *gpu[1] = {"GPU:0"};
        vdev_strategy_t *s;
        CHECK_ERR(vdev_multi_worker_mirrored_strategy_new(gpu, 1, &s), VDEV_ERR_CONFIG, want);
        CHECK(s == NULL);
        unsetenv("VDEV_MPI_TIMEOUT");
        unsetenv("VDEV_MPI_PLUGIN");
    }
}

static void test_handles(void)
{
    check_fresh("1x1GiB");
    vdev_ps_strategy_t *bogus = (vdev_ps_strategy_t *)(uintptr_t)0x12345678;
    int64_t id = 7;
    float v;
    struct vdev_ps_shard_info info;
    CHECK_ERR(vdev_ps_strategy_new(NULL, NULL), VDEV_ERR_INVALID_ARG,
              "vdev_ps_strategy_new: out is NULL");
    CHECK_ERR(vdev_ps_schedule(NULL, 0, &id), VDEV_ERR_INVALID_ARG,
              "vdev_ps_schedule: strategy is NULL");
    CHECK(id == 7);
    CHECK_ERR(vdev_ps_schedule(bogus, 0, &id), VDEV_ERR_INVALID_ARG,
              "vdev_ps_schedule: not a live parameter-server strategy (freed already, or not one)");
    CHECK_ERR(vdev_ps_join(NULL), VDEV_ERR_INVALID_ARG, "vdev_ps_join: strategy is NULL");
    CHECK_ERR(vdev_ps_fetch(NULL, 0, &v), VDEV_ERR_INVALID_ARG, "vdev_ps_fetch: strategy is NULL");
    CHECK_ERR(vdev_ps_pull(NULL), VDEV_ERR_INVALID_ARG, "vdev_ps_pull: strategy is NULL");
    CHECK_ERR(vdev_ps_shard_info(NULL, 0, &info), VDEV_ERR_INVALID_ARG,
              "vdev_ps_shard_info: strategy is NULL");
    CHECK_ERR(vdev_ps_strategy_add_variables(NULL, NULL, 0), VDEV_ERR_INVALID_ARG,
              "vdev_ps_strategy_add_variables: strategy is NULL");
    CHECK_ERR(vdev_ps_strategy_serve(bogus, NULL, NULL), VDEV_ERR_INVALID_ARG,
              "vdev_ps_strategy_serve: not a live parameter-server strategy (freed already, or "
              "not one)");
    CHECK(vdev_ps_balance(NULL) == -1.0);
    CHECK_MSG("vdev_ps_balance: strategy is NULL");
    vdev_ps_strategy_free(NULL); /* a no-op */
    vdev_ps_strategy_free(bogus);
    CHECK_MSG("vdev_ps_strategy_free: not a live parameter-server strategy");
    vdev_tensor_t *g[1] = {NULL};
    CHECK_ERR(vdev_ps_worker_push(NULL, g, 1), VDEV_ERR_INVALID_ARG,
              "vdev_ps_worker_push: the worker context is NULL");
    CHECK_ERR(vdev_ps_worker_return(NULL, 1.0f), VDEV_ERR_INVALID_ARG,
              "vdev_ps_worker_return: the worker context is NULL");
    CHECK(vdev_ps_worker_index(NULL) == -1);
    CHECK_MSG("vdev_ps_worker_index: the worker context is NULL");
    CHECK(vdev_strategy_num_local_replicas(NULL) == -1);
}

int main(void)
{
    test_missing_plugin();
    test_not_the_plugin();
    test_bad_timeout();
    test_handles();
    vdev_shutdown();
    return check_done();
}
