/* test_fork_exit.c — a child forked while another thread of the parent runs
 * a matrix product (inside the product gate, src/ops/threads.c) must end
 * when it calls exit(), its exit handlers run, and must be able to run
 * products of its own: the product in flight is the parent's work, which
 * the child has no thread to finish.
 *
 *  - forked while the parent's runtime runs: the child's exit() returns
 *    to the system (vdev's exit handler used to wait for the parent's
 *    product for ever);
 *  - forked while no runtime runs: the child starts its own runtime, runs a
 *    product (a new start-up remakes the thread plan, which used to wait
 *    for the parent's product to finish), and exits.
 *
 * The parent's product is held inside the gate until each child has ended.
 * Each child runs under alarm(), so a hang ends in SIGALRM and fails the
 * test; its exit status is its number of failed checks. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/threads.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int entered, release_it;

/* The parent's product: it stays in the gate until released. */
static void held_product(void *arg)
{
    (void)arg;
    atomic_store(&entered, 1);
    while (!atomic_load(&release_it))
        check_sleep_ms(1);
}

static void *run_held(void *arg)
{
    (void)arg;
    vdev_threads_product_run(0, held_product, NULL);
    return NULL;
}

/* Forks while a product of another thread is in the gate; the child runs
 * child() under a 120 s alarm and then exit()s with its failure count.
 * Returns the child's exit status, -1 when it died of a signal. */
static int fork_during_product(void (*child)(void))
{
    atomic_store(&entered, 0);
    atomic_store(&release_it, 0);
    pthread_t th;
    if (pthread_create(&th, NULL, run_held, NULL) != 0)
        return -1;
    int ok = check_wait_flag(&entered);
    fflush(stdout);
    pid_t pid = ok ? fork() : -1;
    if (pid == 0) {
        alarm(120);
        check_passed = check_failed = 0;
        child();
        int failed = check_done() != 0;
        fflush(stdout);
        exit(failed); /* exit(), not _exit(): the exit handlers run */
    }
    int status = 0;
    int waited = pid > 0 && waitpid(pid, &status, 0) == pid;
    atomic_store(&release_it, 1);
    pthread_join(th, NULL);
    if (!waited)
        return -1;
    return check_child_status(status);
}

/* A child of a running runtime: refused everything, it just exits. */
static void child_exits(void) { CHECK(!vdev_is_initialized()); }

/* A child forked while no runtime ran: its own runtime and product. */
static void child_works(void) { check_own_product("CPU:0", 32); }

int main(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    CHECK(fork_during_product(child_exits) == 0);
    CHECK(vdev_is_initialized()); /* the parent goes on */
    vdev_shutdown();

    CHECK(fork_during_product(child_works) == 0);
    return check_done();
}
