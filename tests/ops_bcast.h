/* ops_bcast.h — the broadcasting forms that test_ops_broadcast.c (shapes and
 * values) and test_grad_broadcast.c (gradients) run through the binary ops:
 * pairs of shapes with the output shape NumPy's rule gives them, written out
 * here rather than computed, and a reference for the element of an input
 * that pairs with an output element. */
#ifndef VDEV_TESTS_OPS_BCAST_H
#define VDEV_TESTS_OPS_BCAST_H

#include <stdint.h>

/* Shapes of a, b and (by NumPy's rule, as TensorFlow's binary ops) a op b. */
struct bform {
    const char *name;
    int na;
    int64_t sa[4];
    int nb;
    int64_t sb[4];
    int no;
    int64_t so[4];
};

static const struct bform BFORMS[] = {
    {"[5] vs [1,5]", 1, {5}, 2, {1, 5}, 2, {1, 5}},
    {"[1,5] vs [5]", 2, {1, 5}, 1, {5}, 2, {1, 5}},
    {"[3,5] vs [5]", 2, {3, 5}, 1, {5}, 2, {3, 5}},
    {"[5] vs [3,5]", 1, {5}, 2, {3, 5}, 2, {3, 5}},
    {"[1,5] vs [5,1]", 2, {1, 5}, 2, {5, 1}, 2, {5, 5}},
    {"[5,1] vs [1,5]", 2, {5, 1}, 2, {1, 5}, 2, {5, 5}},
    {"[3,1,5] vs [4,5]", 3, {3, 1, 5}, 2, {4, 5}, 3, {3, 4, 5}},
    {"[4,5] vs [3,1,5]", 2, {4, 5}, 3, {3, 1, 5}, 3, {3, 4, 5}},
    {"[] vs [3,4]", 0, {0}, 2, {3, 4}, 2, {3, 4}},
    {"[3,4] vs []", 2, {3, 4}, 0, {0}, 2, {3, 4}},
    {"[] vs []", 0, {0}, 0, {0}, 0, {0}},
    {"[1] vs []", 1, {1}, 0, {0}, 1, {1}},
    {"[1] vs [2,3]", 1, {1}, 2, {2, 3}, 2, {2, 3}},
    {"[2,3] vs [2,1]", 2, {2, 3}, 2, {2, 1}, 2, {2, 3}},
    {"[2,1] vs [2,3]", 2, {2, 1}, 2, {2, 3}, 2, {2, 3}},
    {"[3,4] vs [1,4]", 2, {3, 4}, 2, {1, 4}, 2, {3, 4}},
    {"[1,1] vs [3]", 2, {1, 1}, 1, {3}, 2, {1, 3}},
    {"[2,1,4,1] vs [3,1,5]", 4, {2, 1, 4, 1}, 3, {3, 1, 5}, 4, {2, 3, 4, 5}},
    {"[2,3,4] vs [2,1,4]", 3, {2, 3, 4}, 3, {2, 1, 4}, 3, {2, 3, 4}},
    {"[1,3,1] vs [2,1,4]", 3, {1, 3, 1}, 3, {2, 1, 4}, 3, {2, 3, 4}},
    /* empty: dimensions of 0 broadcast with 1s as any other */
    {"[0,3] vs [3]", 2, {0, 3}, 1, {3}, 2, {0, 3}},
    {"[0,1] vs [1,4]", 2, {0, 1}, 2, {1, 4}, 2, {0, 4}},
    {"[2,1] vs [0]", 2, {2, 1}, 1, {0}, 2, {2, 0}},
};
#define N_BFORMS ((int)(sizeof BFORMS / sizeof BFORMS[0]))

static inline int64_t bshape_numel(const int64_t *s, int n)
{
    int64_t e = 1;
    for (int d = 0; d < n; d++)
        e *= s[d];
    return e;
}

/* The offset in an input of shape (s, n) of the element that broadcasts to
 * element i (row-major) of the output (so, no): i taken apart into indices
 * from the last dimension, the input's dimensions of 1 ignoring theirs. */
static inline int64_t bshape_offset(const int64_t *s, int n, const int64_t *so, int no, int64_t i)
{
    int64_t off = 0, stride = 1;
    for (int d = no - 1; d >= 0; d--) {
        int64_t id = i % so[d];
        i /= so[d];
        int k = d - (no - n);
        if (k >= 0) {
            if (s[k] != 1)
                off += id * stride;
            stride *= s[k];
        }
    }
    return off;
}

#endif
