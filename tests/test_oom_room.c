/* test_oom_room.c — the VDEV_OOM_REPORT dump's "room left to grow" is what
 * the device may still reserve: under its limit and under what its card's
 * other devices leave it, so it agrees with the OOM message printed above
 * it and with vdev_memory_get_limits' available_bytes. When the card leaves
 * less than the limit does, the dump names the room under the limit too;
 * when the limit is what stops the device, the line is as before; an empty
 * preallocated region counts, as it does in available_bytes; with nothing
 * live, the list of biggest live blocks says "none".
 *
 * Cards are simulated with no driver reserve, so a 1 GiB card has a budget
 * of exactly 1 GiB and the figures are round. */
#define _GNU_SOURCE
#include "govern_check.h"

#include <stdlib.h>

/* The line of report r that starts with `prefix`, without its newline, into
 * out (cap bytes); "" when there is none. */
static const char *line_of(const char *r, const char *prefix, char *out, size_t cap)
{
    out[0] = '\0';
    const char *p = r;
    while (p && *p) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (!strncmp(p, prefix, strlen(prefix))) {
            if (n >= cap)
                n = cap - 1;
            memcpy(out, p, n);
            out[n] = '\0';
            break;
        }
        p = end ? end + 1 : NULL;
    }
    return out;
}

/* GPU:0 (a 100 MiB floor, critical) holds 256 MiB, 200 MiB of it in use;
 * GPU:1 (low) holds 384 MiB, 128 MiB of it live. The card leaves GPU:0 1024
 * - 384 - 256 = 384 MiB, less than the 768 MiB under its limit (the card's
 * budget): a 750 MiB request, more than those 384 MiB, GPU:0's 56 MiB free
 * and the 256 MiB GPU:1 could lend together, fails, and the dump says 384
 * MiB as the message does. */
static void test_card_leaves_less(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_OOM_REPORT", "1", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:100MiB..@critical,..@low", 1);
    CHECK_OK(vdev_init());
    void *b0, *b1, *a, *x;
    CHECK_OK(vdev_mem_alloc("GPU:1", 128 * MIB, &b0));
    CHECK_OK(vdev_mem_alloc("GPU:1", 192 * MIB, &b1));
    CHECK_OK(vdev_mem_free("GPU:1", b1));
    CHECK_OK(vdev_mem_alloc("GPU:0", 200 * MIB, &a));
    CHECK_EQ_U64(reserved("GPU:1"), 384 * MIB);
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK_EQ_U64(l.ceiling_bytes, GIB);
    CHECK_EQ_U64(l.available_bytes, 384 * MIB);
    check_capture_begin();
    CHECK_STATUS(vdev_mem_alloc("GPU:0", 750 * MIB, &x), VDEV_ERR_OOM);
    free(check_capture_end());
    CHECK(strstr(vdev_last_error(), "/physical_device:GPU:0 has 384.00 MiB left for it") != NULL);
    char line[512];
    CHECK_STR(line_of(vdev_last_oom_report(), "Largest free block:", line, sizeof line),
              "Largest free block: 56.00 MiB; free in reserved regions: 56.00 MiB (fragmentation "
              "0.000); room left to grow: 384.00 MiB (768.00 MiB under the limit, less what the "
              "card's other devices claim)");
    CHECK_OK(vdev_mem_free("GPU:0", a));
    CHECK_OK(vdev_mem_free("GPU:1", b0));
}

/* The limit stops the device first (a ceiling of 256 MiB on a card with
 * room to spare; 100 MiB in use in a 128 MiB region): the room left to grow
 * is the room under the limit, said once, and equal to available_bytes. */
static void test_limit_leaves_less(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_OOM_REPORT", "1", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:..256MiB,..", 1);
    CHECK_OK(vdev_init());
    void *a, *x;
    CHECK_OK(vdev_mem_alloc("GPU:0", 100 * MIB, &a));
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:0", &l));
    CHECK_EQ_U64(l.available_bytes, 128 * MIB);
    check_capture_begin();
    CHECK_STATUS(vdev_mem_alloc("GPU:0", 200 * MIB, &x), VDEV_ERR_OOM);
    free(check_capture_end());
    char line[512];
    CHECK_STR(line_of(vdev_last_oom_report(), "Largest free block:", line, sizeof line),
              "Largest free block: 28.00 MiB; free in reserved regions: 28.00 MiB (fragmentation "
              "0.000); room left to grow: 128.00 MiB");
    CHECK_OK(vdev_mem_free("GPU:0", a));
}

/* Preallocation: GPU:1's empty 100 MiB floor region makes way for a request
 * that needs its room, so it counts as room (available_bytes 424 MiB: the
 * card's 324 MiB unclaimed and that region); a 500 MiB request fails and the
 * dump says the same 424 MiB as the message (it said 324 MiB). */
static void test_prealloc_spare_counts(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_OOM_REPORT", "1", 1);
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:300MiB..600MiB@critical,100MiB..800MiB@low", 1);
    CHECK_OK(vdev_init());
    void *a, *x;
    CHECK_OK(vdev_mem_alloc("GPU:0", 600 * MIB, &a));
    struct vdev_memory_limits l;
    CHECK_OK(vdev_memory_get_limits("GPU:1", &l));
    CHECK_EQ_U64(l.available_bytes, 424 * MIB);
    check_capture_begin();
    CHECK_STATUS(vdev_mem_alloc("GPU:1", 500 * MIB, &x), VDEV_ERR_OOM);
    free(check_capture_end());
    CHECK(strstr(vdev_last_error(), "/physical_device:GPU:0 has 424.00 MiB left for it") != NULL);
    char line[512];
    CHECK_STR(line_of(vdev_last_oom_report(), "Largest free block:", line, sizeof line),
              "Largest free block: 100.00 MiB; free in reserved regions: 100.00 MiB "
              "(fragmentation 0.000); room left to grow: 424.00 MiB (800.00 MiB under the "
              "limit, less what the card's other devices claim)");
    /* nothing live on GPU:1: the list says so rather than ending bare */
    const char *r = vdev_last_oom_report(), *blocks = r ? strstr(r, "Biggest live blocks:") : NULL;
    CHECK_STR(blocks, "Biggest live blocks:\n  none\n");
    CHECK_OK(vdev_mem_free("GPU:0", a));
    unsetenv("VDEV_MEMORY_GROWTH");
}

/* The report's "made by": a tensor's block names its op, a vdev_mem_alloc
 * block says so, also on a handle a freed tensor left (it named the tensor's
 * op), and an OOM of vdev_mem_alloc tags the blocks too (it said "(unknown)"
 * for every one). */
static void test_block_tags(void)
{
    fresh_card("1x1GiB");
    setenv("VDEV_OOM_REPORT", "1", 1);
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("GPU:0"));
    int64_t n = 3 * MIB; /* 12 MiB of floats */
    vdev_tensor_t *gone = vdev_tensor_ones(&n, 1, VDEV_F32);
    vdev_tensor_free(gone); /* its handle is the next block's */
    void *raw, *x;
    CHECK_OK(vdev_mem_alloc("GPU:0", 12 * MIB, &raw));
    n = 2 * MIB;
    vdev_tensor_t *kept = vdev_tensor_zeros(&n, 1, VDEV_F32);
    vdev_device_pop();
    check_capture_begin();
    CHECK_STATUS(vdev_mem_alloc("GPU:0", 4 * GIB, &x), VDEV_ERR_OOM);
    free(check_capture_end());
    /* the 12 MiB block, then the 8 MiB tensor (addresses vary) */
    const char *r = vdev_last_oom_report(), *b = r ? strstr(r, "Biggest live blocks:\n") : NULL;
    const char *m1 = b ? strstr(b, "     12.00 MiB at 0x") : NULL;
    const char *m2 = m1 ? strstr(m1, "  made by vdev_mem_alloc\n      8.00 MiB at 0x") : NULL;
    const char *m3 = m2 ? strstr(m2 + 30, "  made by Fill\n") : NULL;
    CHECK(m1 && m2 && m3);
    CHECK(r && strstr(r, "(unknown)") == NULL);
    vdev_tensor_free(kept);
    CHECK_OK(vdev_mem_free("GPU:0", raw));
}

int main(void)
{
    test_card_leaves_less();
    test_limit_leaves_less();
    test_prealloc_spare_counts();
    test_block_tags();
    check_fresh(NULL);
    return check_done();
}
