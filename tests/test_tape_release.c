/* test_tape_release.c — vdev_tape_release, for an owner that lets go of a
 * tape from any thread (Python's garbage collector): the handle is dead at
 * once (vdev_tape_end on it is the exact "not a live tape" error, a second
 * release too); a tape recording on another thread is freed by that thread at
 * its next op, so it records no more and gives back every tensor its records
 * held, and may begin a new tape; one paused there is freed by its next
 * vdev_tape_begin or its exit; one released on its own thread goes at once.
 * A last part releases tapes while their threads record ops, many times, for
 * the thread sanitizer. On a simulated GPU. */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

static vdev_tape_t *tape;
static atomic_int begun, released;
static int began_again, paused_mode, race_mode;
static uint64_t in_use_after_op; /* GPU:0's bytes in use after the op that follows the release */

static vdev_tensor_t *filled(float v)
{
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = v;
    int64_t s[1] = {64};
    return vdev_tensor_from_host(x, s, 1, VDEV_F32);
}

/* Begins a tape, records an op on a variable, waits for the release, records
 * another: the tape must be gone after it, so a new tape begins. */
static void *recorder(void *arg)
{
    (void)arg;
    vdev_tensor_t *w = vdev_variable(filled(2.0f));
    tape = vdev_tape_begin();
    vdev_tensor_t *y = vdev_mul(w, w);
    if (paused_mode)
        vdev_tape_pause(tape);
    atomic_store(&begun, 1);
    if (race_mode) { /* record on while the release lands */
        for (int i = 0; i < 20; i++)
            vdev_tensor_free(vdev_mul(w, w));
        check_wait_flag(&released); /* then vdev_tape_begin drops it, if no op did */
    } else {
        check_wait_flag(&released);
        vdev_tensor_free(vdev_mul(w, w)); /* the op that drops a released recording tape */
        struct vdev_memory_info mi;
        in_use_after_op = vdev_memory_info("GPU:0", &mi) == VDEV_OK ? mi.bytes_in_use : 1;
    }
    if (!paused_mode) {
        vdev_tape_t *t = vdev_tape_begin();
        began_again = t != NULL;
        vdev_tape_end(t);
    }
    vdev_tensor_free(y);
    vdev_tensor_free(w);
    return NULL;
}

static void run(int paused, int race)
{
    pthread_t th;
    paused_mode = paused;
    race_mode = race;
    began_again = 0;
    atomic_store(&begun, 0);
    atomic_store(&released, 0);
    CHECK(pthread_create(&th, NULL, recorder, NULL) == 0);
    CHECK(check_wait_flag(&begun));
    vdev_clear_error();
    vdev_tape_release(tape);
    CHECK(vdev_last_status() == VDEV_OK);
    if (!race) {
        vdev_tape_end(tape);
        CHECK_STR(vdev_last_error(), "vdev_tape_end: not a live tape (ended already, or not a "
                                     "tape)");
        vdev_tape_release(tape);
        CHECK_STR(vdev_last_error(), "vdev_tape_release: not a live tape (ended already, or not "
                                     "a tape)");
    }
    atomic_store(&released, 1);
    pthread_join(th, NULL);
    if (!paused)
        CHECK(began_again);
    if (!paused && !race) /* w and y alone: the tape no longer holds the op's output */
        CHECK_EQ_U64(in_use_after_op, 2 * 256);
    CHECK_NO_LEAK("GPU:0"); /* the records' tensors went with the tape */
}

static void test_same_thread(void)
{
    vdev_tensor_t *w = vdev_variable(filled(3.0f));
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *y = vdev_mul(w, w);
    vdev_clear_error();
    vdev_tape_release(t);
    CHECK(vdev_last_status() == VDEV_OK);
    vdev_tensor_free(y);
    vdev_tensor_free(w);
    CHECK_NO_LEAK("GPU:0");
    t = vdev_tape_begin(); /* none records here any more */
    CHECK(t != NULL);
    vdev_tape_end(t);
    vdev_tape_release(NULL); /* a no-op */
    CHECK(vdev_last_status() == VDEV_OK);
}

int main(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("GPU:0"));
    run(0, 0); /* recording on another thread: freed at its next op */
    run(1, 0); /* paused there: freed at its exit */
    test_same_thread();
    for (int i = 0; i < 50; i++)
        run(0, 1);
    vdev_device_pop();
    vdev_shutdown();
    return check_done();
}
