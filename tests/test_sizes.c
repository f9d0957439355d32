/* test_sizes.c — vdev_format_bytes() and vdev_parse_bytes() at their edges.
 *
 * Formatting: every unit from bytes to EiB, the largest value (UINT64_MAX is
 * 16.00 EiB, not a count of PiB), values that round up into the next unit,
 * and buffers too small for the text (truncated, always terminated, never
 * written past `cap`; cap 0 and a NULL buffer write nothing). Parsing: what
 * formatting prints reads back within its rounding, and sizes that do not fit
 * in 64 bits (whole part or fraction) are errors that name the text.
 */
#include "check.h"

#include <stdint.h>
#include <string.h>

/* Formats into a buffer with guard bytes around it and checks the guards. */
static void expect_format(uint64_t bytes, size_t cap, const char *want)
{
    char area[64];
    memset(area, '#', sizeof area);
    char *buf = area + 8;
    CHECK(cap <= sizeof area - 16);
    char *r = vdev_format_bytes(bytes, buf, cap);
    CHECK(r == buf);
    if (cap)
        CHECK_STR(buf, want);
    for (size_t i = 0; i < 8; i++)
        CHECK(area[i] == '#');
    for (size_t i = 8 + cap; i < sizeof area; i++)
        CHECK(area[i] == '#');
}

static void test_format(void)
{
    expect_format(0, 32, "0 B");
    expect_format(1023, 32, "1023 B");
    expect_format(1024, 32, "1.00 KiB");
    expect_format(1536, 32, "1.50 KiB");
    expect_format(3ull << 20, 32, "3.00 MiB");
    expect_format(4ull << 30, 32, "4.00 GiB");
    expect_format(5ull << 40, 32, "5.00 TiB");
    expect_format(6ull << 50, 32, "6.00 PiB");
    expect_format(1ull << 60, 32, "1.00 EiB");
    expect_format(15ull << 60, 32, "15.00 EiB");
    expect_format(UINT64_MAX, 32, "16.00 EiB");
    expect_format(UINT64_MAX - 255, 32, "16.00 EiB");
    /* Rounding that reaches 1024 moves to the next unit. */
    expect_format((1ull << 20) - 1, 32, "1.00 MiB");
    expect_format((1ull << 30) - 1, 32, "1.00 GiB");
    expect_format((1ull << 60) - 1, 32, "1.00 EiB");
    expect_format(1023ull << 10, 32, "1023.00 KiB");
    /* Small buffers: truncated and terminated, nothing written past cap. */
    expect_format(UINT64_MAX, 10, "16.00 EiB");
    expect_format(UINT64_MAX, 9, "16.00 Ei");
    expect_format(UINT64_MAX, 5, "16.0");
    expect_format(UINT64_MAX, 2, "1");
    expect_format(UINT64_MAX, 1, "");
    expect_format(512, 1, "");
    expect_format(UINT64_MAX, 0, "");
    CHECK(vdev_format_bytes(1, NULL, 16) == NULL);
}

static void test_parse(void)
{
    uint64_t v = 0;
    CHECK_OK(vdev_parse_bytes("4GiB", &v));
    CHECK_EQ_U64(v, 4ull << 30);
    CHECK_OK(vdev_parse_bytes("18446744073709551615", &v));
    CHECK_EQ_U64(v, UINT64_MAX);
    CHECK_STATUS(vdev_parse_bytes("18446744073709551616", &v), VDEV_ERR_PARSE);
    CHECK_STR(vdev_last_error(), "'18446744073709551616' is too large");
    CHECK_STATUS(vdev_parse_bytes("16777216TiB", &v), VDEV_ERR_PARSE);
    CHECK_STR(vdev_last_error(), "'16777216TiB' is too large");
    CHECK_OK(vdev_parse_bytes("16777215TiB", &v));
    CHECK_EQ_U64(v, 16777215ull << 40);
    CHECK_STATUS(vdev_parse_bytes("17000000TiB", &v), VDEV_ERR_PARSE);
    CHECK_STR(vdev_last_error(), "'17000000TiB' is too large");
    CHECK_STATUS(vdev_parse_bytes("16777215.9999999TiB", &v), VDEV_OK);
    CHECK(v > (16777215ull << 40) + (1ull << 39)); /* .99...: most of a TiB more */
    CHECK_STATUS(vdev_parse_bytes("18446744073709551615.5", &v), VDEV_OK);
    CHECK_EQ_U64(v, UINT64_MAX);
    CHECK_STATUS(vdev_parse_bytes("99999999999999999999.5KB", &v), VDEV_ERR_PARSE);
    CHECK_STR(vdev_last_error(), "'99999999999999999999.5KB' is too large");
    CHECK_STATUS(vdev_parse_bytes("1e400", &v), VDEV_ERR_PARSE);
    CHECK_STR(vdev_last_error(), "'1e400' is not a size: no exponents (a whole number or a "
                                 "decimal, then a unit: e.g. 4GiB, 1.5GiB, 1000MiB)");
    /* What formatting prints reads back within its rounding (0.5%). */
    const uint64_t samples[] = {1000, 1536, 3ull << 20, 123456789, 5ull << 40};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        char b[32];
        vdev_format_bytes(samples[i], b, sizeof b);
        CHECK_OK(vdev_parse_bytes(b, &v));
        CHECK(v >= samples[i] - samples[i] / 200 && v <= samples[i] + samples[i] / 200);
    }
}

int main(void)
{
    test_format();
    test_parse();
    return check_done();
}
