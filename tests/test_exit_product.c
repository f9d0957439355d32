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
 * and wants exit status 0 from each. */
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

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "child"))
        return child();
    for (int run = 0; run < 12; run++) {
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], "child", (char *)NULL);
            _exit(127);
        }
        CHECK(pid > 0);
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            printf("  run %d: %s %d\n", run, WIFEXITED(status) ? "exit status" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    return check_done();
}
