/* test_cuda_demo.c — the demo's choice of devices on the real CUDA plugin
 * (libvdev-cuda.so) against the stand-in driver. On CUDA each logical device
 * of a card has a stream that holds a scratch buffer and a cuBLAS workspace,
 * taken out of the card's budget before the logical devices' limits: a card
 * split n ways shares less than its one logical device reports. The demo
 * once split the card three ways from that one device's limit, and start-up
 * refused its own split on the first real GPU ("its logical devices' floors
 * sum to 137.75 GiB, more than its budget of 137.69 GiB"); simulated GPUs
 * hold nothing per stream, so no test saw it. Here every split the demo makes
 * of one card starts, and uses the budget the split leaves, less 64 MiB for
 * the driver (whose own memory grows after the probe: 2 MiB on the H200),
 * to the MiB. */
#define _GNU_SOURCE
#include "check.h"
#include "vdev.h"

#include "../../examples/demo.h"
#include "stub_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static void run_demo(enum demo_scenario sc, uint64_t card, int want_n)
{
    stub_setup_ctx(1, card, 300 * MiB);
    check_fresh(NULL);
    struct demo_opts o = {.prog = "demo", .epochs = 1, .steps = 1, .batch = 64, .seed = 1};
    struct demo_devices d;
    memset(&d, 0, sizeof d);
    int rc = demo_start(&o, sc, &d);
    CHECK(rc == 0);
    if (rc != 0) {
        fprintf(stderr, "demo_start: %s\n", vdev_last_error());
        check_fresh(NULL);
        return;
    }
    CHECK(d.n == want_n);
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    uint64_t sum = 0;
    for (int k = 0; k < d.n && k < 3; k++) {
        char want[32];
        snprintf(want, sizeof want, "/device:GPU:%d", k);
        CHECK(strcmp(d.name[k], want) == 0);
        sum += d.limit_bytes[k];
    }
    /* the split fits what its streams left, and takes all of it but the
     * driver's margin of 64 MiB, down to the MiB (the three-way split: three
     * equal parts of it) */
    uint64_t room = l.card_budget_bytes - 64 * MiB;
    CHECK(sum <= room);
    if (sc != DEMO_SPLIT)
        CHECK(sum + (uint64_t)want_n * MiB > room);
    if (sc == DEMO_SPLIT && card < 6 * GiB)
        CHECK(sum + 2 * MiB > room / 3 * 3);
    check_fresh(NULL);
    expect_clean("after the demo's devices", 1);
}

int main(void)
{
    check_fresh(NULL);
    if (stub_load() != 0) {
        check_fail(__FILE__, __LINE__, "cannot load the stand-in driver %s", VDEV_STUB_CUDA_PATH);
        return check_done();
    }
    unsetenv("VDEV_SIM_GPUS");
    run_demo(DEMO_CHAIN3, 8 * GiB, 3);
    run_demo(DEMO_TF_PLACEMENT, 8 * GiB, 3);
    run_demo(DEMO_SPLIT, 4 * GiB, 2); /* a small card: two thirds and one third */
    run_demo(DEMO_SPLIT, 16 * GiB, 2); /* 4 GiB and 2 GiB */
    S.setup(NULL);
    return check_done();
}
