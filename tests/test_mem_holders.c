/* test_mem_holders.c — holders of raw vdev blocks (vdev_mem_holder_add,
 * vdev_mem_holder_remove, vdev_mem_holders_live). vdev_shutdown() refuses
 * while a holder says its blocks are live (the runtime keeps running, the
 * holder's words in the error), tells every holder to forget when it goes
 * ahead (a shutdown with no runtime running asks none), and calls no holder
 * that was removed (a library's code may be gone by then). Adding twice keeps one; a ninth holder, NULL, and removing one
 * that is not there are refused with their exact messages. */
#include "check.h"

struct fake {
    int live;    /* blocks it says are live */
    int asked;   /* calls of live() */
    int forgot;  /* calls of forget() */
};

static int fake_live(void *ctx, char *msg, size_t cap)
{
    struct fake *f = ctx;
    f->asked++;
    if (f->live)
        snprintf(msg, cap, "%d blocks of the fake holder are live", f->live);
    return f->live;
}

static void fake_forget(void *ctx) { ((struct fake *)ctx)->forgot++; }

static void refusals(void)
{
    CHECK_ERR(vdev_mem_holder_add(NULL), VDEV_ERR_INVALID_ARG,
              "vdev_mem_holder_add: the holder or one of its functions is NULL");
    struct vdev_mem_holder no_forget = {fake_live, NULL, NULL};
    CHECK_ERR(vdev_mem_holder_add(&no_forget), VDEV_ERR_INVALID_ARG,
              "vdev_mem_holder_add: the holder or one of its functions is NULL");
    CHECK_ERR(vdev_mem_holder_remove(NULL), VDEV_ERR_INVALID_ARG,
              "vdev_mem_holder_remove: the holder is NULL");
    struct fake f = {0};
    struct vdev_mem_holder h = {fake_live, fake_forget, &f};
    CHECK_ERR(vdev_mem_holder_remove(&h), VDEV_ERR_NOT_FOUND,
              "vdev_mem_holder_remove: no such holder (not added, or removed already)");

    /* Eight fit (the same one added twice counts once), a ninth does not. */
    struct fake many[9] = {{0}};
    struct vdev_mem_holder hs[9];
    for (int i = 0; i < 9; i++)
        hs[i] = (struct vdev_mem_holder){fake_live, fake_forget, &many[i]};
    for (int i = 0; i < 8; i++)
        CHECK_OK(vdev_mem_holder_add(&hs[i]));
    CHECK_OK(vdev_mem_holder_add(&hs[3]));
    CHECK_ERR(vdev_mem_holder_add(&hs[8]), VDEV_ERR_INVALID_ARG,
              "vdev_mem_holder_add: more than 8 holders");
    CHECK_EQ_U64(vdev_mem_holders_live(NULL, 0), 0);
    for (int i = 0; i < 8; i++)
        CHECK_OK(vdev_mem_holder_remove(&hs[i]));
    CHECK_ERR(vdev_mem_holder_remove(&hs[3]), VDEV_ERR_NOT_FOUND,
              "vdev_mem_holder_remove: no such holder (not added, or removed already)");
    CHECK_EQ_U64(vdev_mem_holders_live(NULL, 0), 0);
    for (int i = 0; i < 9; i++) /* asked once each, the ninth never */
        CHECK_EQ_U64(many[i].asked, i < 8);
}

static void shutdown_asks(void)
{
    struct fake f = {.live = 2};
    struct vdev_mem_holder h = {fake_live, fake_forget, &f};
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_mem_holder_add(&h));
    char msg[64];
    CHECK_EQ_U64(vdev_mem_holders_live(msg, sizeof msg), 2);
    CHECK_STR(msg, "2 blocks of the fake holder are live");

    /* Refused: the runtime still runs, and nothing was forgotten. */
    vdev_clear_error();
    vdev_shutdown();
    CHECK_EQ_U64(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_shutdown: 2 blocks of the fake holder are live");
    CHECK(vdev_is_initialized());
    CHECK_EQ_U64(f.forgot, 0);

    /* Its blocks gone, shutdown goes ahead and tells it to forget. */
    f.live = 0;
    vdev_shutdown();
    CHECK(!vdev_is_initialized());
    CHECK_EQ_U64(f.forgot, 1);

    /* A shutdown with no runtime running asks no holder. */
    vdev_shutdown();
    CHECK_EQ_U64(f.forgot, 1);

    /* Removed, it is neither asked nor told any more. */
    check_fresh("1x1GiB");
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_mem_holder_remove(&h));
    f.live = 5;
    int asked = f.asked;
    vdev_shutdown();
    CHECK(!vdev_is_initialized());
    CHECK_EQ_U64(f.asked, asked);
    CHECK_EQ_U64(f.forgot, 1);
}

int main(void)
{
    check_fresh("1x1GiB");
    refusals();
    shutdown_asks();
    return check_done();
}
