/* op_cases_shaped.h — the second half of op_cases.h's list: the cases of
 * the ops whose inputs have shapes of their own (slices and strided slices,
 * concat and stack, gathers, permuted transposes, 2-D convolution and
 * pooling), including grids of more elements than a GPU has threads.
 * Included by op_cases.h after its CASE macro and helpers; op_cases() calls
 * op_cases_shaped() last. */
#ifndef VDEV_OP_CASES_SHAPED_H
#define VDEV_OP_CASES_SHAPED_H

static void op_cases_shaped(void)
{
    struct vdev_op_params none = P(0, 0, 0, 0);

    /* SLICE, SLICE_GRAD: device copies of a range of rows (and zeros) */
    CASE("rows 3..10 of [17,33]", VDEV_OP_SLICE, P(0, 0, 3, 7), 0, TF(G_UNIFORM, 2, 17, 33));
    CASE("row 2 of [4,3,5]", VDEV_OP_SLICE, P(0, 0, 2, 1), 0, TF(G_UNIFORM, 3, 4, 3, 5));
    CASE("i32", VDEV_OP_SLICE, P(0, 0, 1, 8), 1000, TI(G_LABEL, 1, 10));
    CASE("no row", VDEV_OP_SLICE, P(0, 0, 5, 0), 0, TF(G_UNIFORM, 2, 5, 3));
    CASE("[7,33] at row 3 of [17,33]", VDEV_OP_SLICE_GRAD, P(0, 0, 3, 0), 0,
         TF(G_UNIFORM, 2, 7, 33), TF(G_UNIFORM, 2, 17, 33));
    CASE("no row: zeros", VDEV_OP_SLICE_GRAD, P(0, 0, 2, 0), 0, TF(G_UNIFORM, 2, 0, 33),
         TF(G_UNIFORM, 2, 17, 33));
    /* STRIDED_SLICE, STRIDED_SLICE_GRAD (cuda_slice.cu): a range on every
     * axis, backwards on some, int32 words, an empty slice, a scalar */
    {
        struct vdev_op_params p = strided(4, (int64_t[]){1, 0, 2, 10}, (int64_t[]){-1, 3, -2, -2},
                                          (int64_t[]){2, 3, 2, 6});
        CASE("[2,7,3,11] every axis", VDEV_OP_STRIDED_SLICE, p, 0,
             TF(G_UNIFORM, 4, 2, 7, 3, 11));
        CASE("its gradient", VDEV_OP_STRIDED_SLICE_GRAD, p, 0, TF(G_UNIFORM, 4, 2, 3, 2, 6),
             TF(G_UNIFORM, 4, 2, 7, 3, 11));
        p = strided(2, (int64_t[]){BIG(4999, 499), 0}, (int64_t[]){-2, 1},
                    (int64_t[]){BIG(2500, 250), 3});
        CASE("[5000,3] odd rows backwards", VDEV_OP_STRIDED_SLICE, p, 0,
             TF(G_UNIFORM, 2, BIG(5000, 500), 3));
        CASE("its gradient", VDEV_OP_STRIDED_SLICE_GRAD, p, 0,
             TF(G_UNIFORM, 2, BIG(2500, 250), 3), TF(G_UNIFORM, 2, BIG(5000, 500), 3));
        p = strided(1, (int64_t[]){9}, (int64_t[]){-4}, (int64_t[]){3});
        CASE("i32 words", VDEV_OP_STRIDED_SLICE, p, 1000, TI(G_LABEL, 1, 10));
        p = strided(2, (int64_t[]){0, 0}, (int64_t[]){1, 1}, (int64_t[]){5, 0});
        CASE("empty", VDEV_OP_STRIDED_SLICE, p, 0, TF(G_UNIFORM, 2, 5, 3));
        CASE("empty dy: zeros", VDEV_OP_STRIDED_SLICE_GRAD, p, 0, TF(G_UNIFORM, 2, 5, 0),
             TF(G_UNIFORM, 2, 5, 3));
        p = strided(0, NULL, NULL, NULL);
        CASE("a scalar", VDEV_OP_STRIDED_SLICE, p, 0, TF(G_UNIFORM, 0, 1));
        CASE("a scalar's gradient", VDEV_OP_STRIDED_SLICE_GRAD, p, 0, TF(G_UNIFORM, 0, 1),
             TF(G_UNIFORM, 0, 1));
        /* more elements than the grid has threads (2112 blocks of 256 on an
         * H100, 32 in the emulation): each thread takes several */
        int64_t d0 = BIG(40, 4), d1 = BIG(64, 16), d2 = BIG(33, 9), d3 = BIG(130, 130);
        p = strided(4, (int64_t[]){1, d1 - 1, 0, 1}, (int64_t[]){1, -2, 1, 2},
                    (int64_t[]){d0 - 1, d1 / 2, d2, d3 / 2});
        CASE("large, every other on two axes", VDEV_OP_STRIDED_SLICE, p, 0,
             TF(G_UNIFORM, 4, d0, d1, d2, d3));
        CASE("its gradient", VDEV_OP_STRIDED_SLICE_GRAD, p, 0,
             TF(G_UNIFORM, 4, d0 - 1, d1 / 2, d2, d3 / 2), TF(G_UNIFORM, 4, d0, d1, d2, d3));
        CASE("its gradient added", VDEV_OP_STRIDED_SLICE_GRAD_ADD, p, 0,
             TF(G_UNIFORM, 4, d0, d1, d2, d3), TF(G_UNIFORM, 4, d0 - 1, d1 / 2, d2, d3 / 2));
        p = strided(3, (int64_t[]){0, 7, 0}, (int64_t[]){1, 1, 1}, (int64_t[]){32, 1, 256});
        CASE("one step of [32,20,256] added", VDEV_OP_STRIDED_SLICE_GRAD_ADD, p, 0,
             TF(G_UNIFORM, 3, 32, 20, 256), TF(G_SPECIAL, 3, 32, 1, 256));
        p = strided(2, (int64_t[]){0, 0}, (int64_t[]){1, 1}, (int64_t[]){5, 0});
        CASE("nothing added", VDEV_OP_STRIDED_SLICE_GRAD_ADD, p, 0, TF(G_UNIFORM, 2, 5, 3),
             TF(G_UNIFORM, 2, 5, 0));
    }
    /* CONCAT, PACK (cuda_concat.cu): i[0] the axis, i[1] the inputs used
     * (the rest repeat input 0 and are not read); ragged widths, int32
     * words, an empty input 0 with a non-empty output, an empty output,
     * scalars stacked into a vector */
    {
        int64_t rows = BIG(1000, 100);
        CASE("[33,65] [33,7] axis 1", VDEV_OP_CONCAT, P(0, 0, 1, 2), 0, TF(G_UNIFORM, 2, 33, 65),
             TF(G_UNIFORM, 2, 33, 7), TF(G_UNIFORM, 2, 33, 65), TF(G_UNIFORM, 2, 33, 65));
        CASE("i32 four along axis 0", VDEV_OP_CONCAT, P(0, 0, 0, 4), 1000, TI(G_LABEL, 2, 3, 5),
             TI(G_LABEL, 2, 1, 5), TI(G_LABEL, 2, 7, 5), TI(G_LABEL, 2, 0, 5));
        CASE("empty input 0, 4-D axis 2", VDEV_OP_CONCAT, P(0, 0, 2, 3), 0,
             TF(G_UNIFORM, 4, 2, 3, 0, 5), TF(G_UNIFORM, 4, 2, 3, 4, 5),
             TF(G_UNIFORM, 4, 2, 3, 1, 5), TF(G_UNIFORM, 4, 2, 3, 0, 5));
        CASE("large, axis 1", VDEV_OP_CONCAT, P(0, 0, 1, 3), 0, TF(G_UNIFORM, 2, rows, 300),
             TF(G_UNIFORM, 2, rows, 1), TF(G_UNIFORM, 2, rows, 129), TF(G_UNIFORM, 2, rows, 300));
        CASE("empty output", VDEV_OP_CONCAT, P(0, 0, 1, 2), 0, TF(G_UNIFORM, 2, 0, 5),
             TF(G_UNIFORM, 2, 0, 3), TF(G_UNIFORM, 2, 0, 5), TF(G_UNIFORM, 2, 0, 5));
        CASE("one input", VDEV_OP_CONCAT, P(0, 0, 0, 1), 0, TF(G_UNIFORM, 1, 17),
             TF(G_UNIFORM, 1, 17), TF(G_UNIFORM, 1, 17), TF(G_UNIFORM, 1, 17));
        CASE("four [17,33] at axis 1", VDEV_OP_PACK, P(0, 0, 1, 4), 0, TF(G_UNIFORM, 2, 17, 33),
             TF(G_UNIFORM, 2, 17, 33), TF(G_UNIFORM, 2, 17, 33), TF(G_UNIFORM, 2, 17, 33));
        CASE("i32 [5,7] at axis 2", VDEV_OP_PACK, P(0, 0, 2, 2), 1000, TI(G_LABEL, 2, 5, 7),
             TI(G_LABEL, 2, 5, 7), TI(G_LABEL, 2, 5, 7), TI(G_LABEL, 2, 5, 7));
        CASE("three scalars", VDEV_OP_PACK, P(0, 0, 0, 3), 0, TF(G_UNIFORM, 0, 1),
             TF(G_UNIFORM, 0, 1), TF(G_UNIFORM, 0, 1), TF(G_UNIFORM, 0, 1));
        CASE("large at axis 0", VDEV_OP_PACK, P(0, 0, 0, 2), 0, TF(G_UNIFORM, 2, rows, 65),
             TF(G_UNIFORM, 2, rows, 65), TF(G_UNIFORM, 2, rows, 65), TF(G_UNIFORM, 2, rows, 65));
        CASE("empty", VDEV_OP_PACK, P(0, 0, 1, 2), 0, TF(G_UNIFORM, 2, 0, 3),
             TF(G_UNIFORM, 2, 0, 3), TF(G_UNIFORM, 2, 0, 3), TF(G_UNIFORM, 2, 0, 3));
    }
    /* GATHER, GATHER_GRAD (cuda_gather.cu): indices drawn as labels in [0,
     * classes) (classes the params' rows: repeats), int32 words, a
     * 0-dimensional index, 2-D indices, indices outside the rows (zeros;
     * their gradient dropped), params without rows or without columns, no
     * index; the gradient with fewer sets of rows than rows (rows dealt
     * round), and rows wider than the threads it aims for (one set) */
    {
        int64_t v = BIG(1000, 300), n = BIG(3000, 500);
        CASE("[1000,64] by [3000]", VDEV_OP_GATHER, none, v, TF(G_UNIFORM, 2, v, 64),
             TI(G_LABEL, 1, n));
        CASE("i32 words [50] by [7,9]", VDEV_OP_GATHER, none, 50, TI(G_LABEL, 1, 50),
             TI(G_LABEL, 2, 7, 9));
        CASE("[30,2,5] by a scalar", VDEV_OP_GATHER, none, 30, TF(G_UNIFORM, 3, 30, 2, 5),
             TI(G_LABEL, 0, 1));
        CASE("an index outside: zeros", VDEV_OP_GATHER, none, 40, TF(G_UNIFORM, 2, 40, 33),
             TI(G_BADLABEL, 1, 41));
        CASE("no row, indices outside: zeros", VDEV_OP_GATHER, none, 0, TF(G_UNIFORM, 2, 0, 5),
             TI(G_LABEL, 1, 3));
        CASE("no column", VDEV_OP_GATHER, none, 5, TF(G_UNIFORM, 2, 5, 0), TI(G_LABEL, 1, 3));
        CASE("no index", VDEV_OP_GATHER, none, 5, TF(G_UNIFORM, 2, 5, 3), TI(G_LABEL, 1, 0));
        CASE("a scalar of [50] by a scalar", VDEV_OP_GATHER, none, 50, TF(G_UNIFORM, 1, 50),
             TI(G_LABEL, 0, 1));
        CASE("large: more words than threads", VDEV_OP_GATHER, none, BIG(20000, 300),
             TF(G_UNIFORM, 2, BIG(20000, 300), 64), TI(G_LABEL, 1, BIG(30000, 500)));
        int64_t r = BIG(5000, 3000), k = BIG(4000, 300);
        CASE("[5000,33]: rows dealt round", VDEV_OP_GATHER_GRAD, none, r,
             TF(G_UNIFORM, 2, k, 33), TI(G_LABEL, 1, k), TF(G_UNIFORM, 2, r, 33));
        CASE("[50,64], many repeats", VDEV_OP_GATHER_GRAD, none, 50, TF(G_UNIFORM, 2, n, 64),
             TI(G_LABEL, 1, n), TF(G_UNIFORM, 2, 50, 64));
        CASE("rows of 70000: one set", VDEV_OP_GATHER_GRAD, none, 3,
             TF(G_UNIFORM, 2, 9, BIG(70000, 70000)), TI(G_LABEL, 1, 9),
             TF(G_UNIFORM, 2, 3, BIG(70000, 70000)));
        CASE("[2,5] into [7,3,4]", VDEV_OP_GATHER_GRAD, none, 7, TF(G_UNIFORM, 4, 2, 5, 3, 4),
             TI(G_LABEL, 2, 2, 5), TF(G_UNIFORM, 3, 7, 3, 4));
        CASE("an index outside: dropped", VDEV_OP_GATHER_GRAD, none, 40,
             TF(G_UNIFORM, 2, 41, 33), TI(G_BADLABEL, 1, 41), TF(G_UNIFORM, 2, 40, 33));
        CASE("no index: zeros", VDEV_OP_GATHER_GRAD, none, 7, TF(G_UNIFORM, 2, 0, 5),
             TI(G_LABEL, 1, 0), TF(G_UNIFORM, 2, 7, 5));
        CASE("a scalar into [7]", VDEV_OP_GATHER_GRAD, none, 7, TF(G_UNIFORM, 0, 1),
             TI(G_LABEL, 0, 1), TF(G_UNIFORM, 1, 7));
        /* rows of one word: more rows than sets (65536), dealt round */
        int64_t v1 = BIG(200000, 70001);
        CASE("[70001] by [500]: rows of one word", VDEV_OP_GATHER_GRAD, none, v1,
             TF(G_UNIFORM, 1, BIG(3000, 500)), TI(G_LABEL, 1, BIG(3000, 500)),
             TF(G_UNIFORM, 1, v1));
    }
    /* TRANSPOSE by a permutation (cuda_concat.cu; {1, 0} of a 2-D tensor
     * takes the tiled kernel): every rank, int32 words, empty */
    CASE("[3,4,5,6] by {3,1,0,2}", VDEV_OP_TRANSPOSE, perm_params(4, (int64_t[]){3, 1, 0, 2}),
         0, TF(G_UNIFORM, 4, 3, 4, 5, 6));
    CASE("[33,2,65] by {2,0,1}", VDEV_OP_TRANSPOSE, perm_params(3, (int64_t[]){2, 0, 1}), 0,
         TF(G_UNIFORM, 3, 33, 2, 65));
    CASE("i32 [7,9,4] by {1,2,0}", VDEV_OP_TRANSPOSE, perm_params(3, (int64_t[]){1, 2, 0}),
         1000, TI(G_LABEL, 3, 7, 9, 4));
    CASE("[300,70] by {0,1}", VDEV_OP_TRANSPOSE, perm_params(2, (int64_t[]){0, 1}), 0,
         TF(G_UNIFORM, 2, 300, 70));
    CASE("[33,65] by {1,0}", VDEV_OP_TRANSPOSE, perm_params(2, (int64_t[]){1, 0}), 0,
         TF(G_UNIFORM, 2, 33, 65));
    CASE("[17] by {0}", VDEV_OP_TRANSPOSE, perm_params(1, (int64_t[]){0}), 0,
         TF(G_UNIFORM, 1, 17));
    CASE("a scalar", VDEV_OP_TRANSPOSE, perm_params(0, NULL), 0, TF(G_UNIFORM, 0, 1));
    CASE("[0,5,3] by {2,1,0}", VDEV_OP_TRANSPOSE, perm_params(3, (int64_t[]){2, 1, 0}), 0,
         TF(G_UNIFORM, 3, 0, 5, 3));
    CASE("large NHWC to NCHW", VDEV_OP_TRANSPOSE, perm_params(4, (int64_t[]){0, 3, 1, 2}), 0,
         TF(G_UNIFORM, 4, BIG(16, 2), BIG(64, 16), BIG(64, 16), BIG(32, 40)));
    /* 2-D convolution and pooling (cuda_conv.cu): strides 1 and 2, both
     * paddings, batches and channels above 1, a 1x1 window, an empty batch
     * and a window larger than the input (an empty output, the input's
     * gradients zeros) */
    for (int v = 0; v < 4; v++) {
        int64_t s = v & 1 ? 2 : 1, nb = BIG(8, 2), h = BIG(30, 9), w = BIG(27, 7);
        int64_t c = BIG(16, 3), o = BIG(24, 5);
        int same = (v & 2) != 0;
        struct vdev_op_params pc = conv_params(same, s, s, 0, 0);
        struct vdev_op_params pp = conv_params(same, 3, 2, s, s);
        int64_t oh = conv_dim(h, 3, s, same), ow = conv_dim(w, 2, s, same);
        const char *what = same ? "SAME" : "VALID";
        CASE(what, VDEV_OP_CONV2D, pc, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 2, c, o));
        CASE(what, VDEV_OP_CONV2D_BACKPROP_INPUT, pc, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 2, c, o), TF(G_UNIFORM, 4, nb, oh, ow, o));
        CASE(what, VDEV_OP_CONV2D_BACKPROP_FILTER, pc, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 2, c, o), TF(G_UNIFORM, 4, nb, oh, ow, o));
        CASE(what, VDEV_OP_MAX_POOL, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c));
        CASE("ties", VDEV_OP_MAX_POOL, pp, 0, TF(G_TIES, 4, nb, h, w, c));
        CASE(what, VDEV_OP_AVG_POOL, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c));
        CASE(what, VDEV_OP_MAX_POOL_GRAD, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, nb, oh, ow, c), TF(G_UNIFORM, 4, nb, oh, ow, c));
        CASE("ties", VDEV_OP_MAX_POOL_GRAD, pp, 0, TF(G_TIES, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, nb, oh, ow, c), TF(G_UNIFORM, 4, nb, oh, ow, c));
        CASE(what, VDEV_OP_AVG_POOL_GRAD, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, nb, oh, ow, c));
    }
    /* dilated convolutions (j[0], j[1]): 2x3 and 3x1, VALID and SAME, at
     * strides 1 and 2; the window's effective size sets the output's */
    for (int v = 0; v < 4; v++) {
        int64_t s = v & 1 ? 2 : 1, nb = BIG(4, 2), h = BIG(30, 11), w = BIG(27, 9);
        int64_t c = BIG(16, 3), o = BIG(24, 5), dh = v < 2 ? 2 : 3, dw = v < 2 ? 3 : 1;
        int same = (v & 2) != 0;
        struct vdev_op_params pc = conv_params(same, s, s, 0, 0);
        pc.j[0] = dh;
        pc.j[1] = dw;
        int64_t oh = conv_dim(h, 2 * dh + 1, s, same), ow = conv_dim(w, dw + 1, s, same);
        const char *what = same ? "dilated SAME" : "dilated VALID";
        CASE(what, VDEV_OP_CONV2D, pc, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 2, c, o));
        CASE(what, VDEV_OP_CONV2D_BACKPROP_INPUT, pc, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 2, c, o), TF(G_UNIFORM, 4, nb, oh, ow, o));
        CASE(what, VDEV_OP_CONV2D_BACKPROP_FILTER, pc, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 2, c, o), TF(G_UNIFORM, 4, nb, oh, ow, o));
    }
    struct vdev_op_params c1 = conv_params(0, 1, 1, 0, 0), c2 = conv_params(1, 2, 2, 0, 0);
    CASE("1x1", VDEV_OP_CONV2D, c1, 0, TF(G_UNIFORM, 4, 2, 5, 6, 7), TF(G_UNIFORM, 4, 1, 1, 7, 3));
    CASE("1x1 stride 2", VDEV_OP_CONV2D, c2, 0, TF(G_UNIFORM, 4, 2, 5, 6, 7),
         TF(G_UNIFORM, 4, 1, 1, 7, 3));
    CASE("empty batch", VDEV_OP_CONV2D, c1, 0, TF(G_UNIFORM, 4, 0, 5, 6, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 3));
    CASE("empty batch", VDEV_OP_CONV2D_BACKPROP_FILTER, c1, 0, TF(G_UNIFORM, 4, 0, 5, 6, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 3), TF(G_UNIFORM, 4, 0, 3, 4, 3));
    struct vdev_op_params c3 = conv_params(0, 2, 2, 0, 0), p3 = conv_params(0, 3, 3, 2, 2);
    CASE("empty output", VDEV_OP_CONV2D, c3, 0, TF(G_UNIFORM, 4, 2, 2, 2, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 3));
    CASE("empty output", VDEV_OP_CONV2D_BACKPROP_INPUT, c3, 0, TF(G_UNIFORM, 4, 2, 2, 2, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 3), TF(G_UNIFORM, 4, 2, 0, 0, 3));
    CASE("empty output", VDEV_OP_CONV2D_BACKPROP_FILTER, c3, 0, TF(G_UNIFORM, 4, 2, 2, 2, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 3), TF(G_UNIFORM, 4, 2, 0, 0, 3));
    CASE("empty output", VDEV_OP_MAX_POOL_GRAD, p3, 0, TF(G_UNIFORM, 4, 2, 2, 2, 2),
         TF(G_UNIFORM, 4, 2, 0, 0, 2), TF(G_UNIFORM, 4, 2, 0, 0, 2));
    CASE("empty output", VDEV_OP_AVG_POOL_GRAD, p3, 0, TF(G_UNIFORM, 4, 2, 2, 2, 2),
         TF(G_UNIFORM, 4, 2, 0, 0, 2));
    /* no output channels: an empty output (a launch with nothing to do), the
     * input's gradient zeros */
    CASE("no output channel", VDEV_OP_CONV2D, c1, 0, TF(G_UNIFORM, 4, 2, 5, 6, 2),
         TF(G_UNIFORM, 4, 3, 3, 2, 0));
    CASE("no output channel: zeros", VDEV_OP_CONV2D_BACKPROP_INPUT, c1, 0,
         TF(G_UNIFORM, 4, 2, 5, 6, 2), TF(G_UNIFORM, 4, 3, 3, 2, 0),
         TF(G_UNIFORM, 4, 2, 3, 4, 0));
    /* an empty batch of height 2^63 - 1 (a shape TensorFlow's rule allows):
     * the output's height, ceil(in / 2) for SAME and (in - 3) / 2 + 1 for
     * VALID, computed without passing INT64_MAX; the filter's gradient zeros */
    struct vdev_op_params s2 = conv_params(1, 2, 2, 0, 0), v2 = conv_params(0, 2, 2, 0, 0);
    CASE("empty batch, height 2^63-1, SAME", VDEV_OP_CONV2D_BACKPROP_FILTER, s2, 0,
         TF(G_UNIFORM, 4, 0, INT64_MAX, 5, 2), TF(G_UNIFORM, 4, 3, 3, 2, 3),
         TF(G_UNIFORM, 4, 0, INT64_MAX / 2 + 1, 3, 3));
    CASE("empty batch, height 2^63-1, VALID", VDEV_OP_CONV2D_BACKPROP_FILTER, v2, 0,
         TF(G_UNIFORM, 4, 0, INT64_MAX, 5, 2), TF(G_UNIFORM, 4, 3, 3, 2, 3),
         TF(G_UNIFORM, 4, 0, (INT64_MAX - 3) / 2 + 1, 2, 3));
    /* more elements than the grid has threads (2112 blocks of 256 on an
     * H100, 32 in the emulation): each thread takes several */
    {
        int64_t nb = BIG(16, 2), h = BIG(64, 24), w = BIG(64, 24), c = BIG(16, 8);
        struct vdev_op_params ps = conv_params(1, 1, 1, 0, 0);
        struct vdev_op_params pp = conv_params(1, 3, 3, 1, 1);
        CASE("large", VDEV_OP_CONV2D, ps, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 3, c, c));
        CASE("large", VDEV_OP_CONV2D_BACKPROP_INPUT, ps, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, 3, 3, c, c), TF(G_UNIFORM, 4, nb, h, w, c));
        CASE("large", VDEV_OP_MAX_POOL, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c));
        CASE("large", VDEV_OP_AVG_POOL, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c));
        CASE("large", VDEV_OP_MAX_POOL_GRAD, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, nb, h, w, c), TF(G_UNIFORM, 4, nb, h, w, c));
        CASE("large", VDEV_OP_AVG_POOL_GRAD, pp, 0, TF(G_UNIFORM, 4, nb, h, w, c),
             TF(G_UNIFORM, 4, nb, h, w, c));
        /* a filter of more elements than threads, a small image */
        int64_t cf = BIG(256, 32), hf = BIG(8, 6);
        struct vdev_op_params pv = conv_params(0, 1, 1, 0, 0);
        CASE("large filter", VDEV_OP_CONV2D_BACKPROP_FILTER, pv, 0,
             TF(G_UNIFORM, 4, 1, hf, hf, cf), TF(G_UNIFORM, 4, 3, 3, cf, cf),
             TF(G_UNIFORM, 4, 1, hf - 2, hf - 2, cf));
    }
    /* the transposed convolution (Conv2DBackpropInput's kernel on rewritten
     * arguments): strides 1 and 2, both paddings, dilated 2x3 taps, an
     * output larger than SAME's smallest one (8 rows from 4 at stride 2),
     * and an empty input under an output of zeros */
    for (int v = 0; v < 6; v++) {
        int64_t s = v & 1 ? 2 : 1, nb = BIG(4, 2), oh = BIG(30, 9), ow = BIG(27, 7);
        int64_t c = BIG(16, 3), o = BIG(24, 5), dh = v >= 4 ? 2 : 1, dw = v >= 4 ? 3 : 1;
        int same = (v & 2) != 0;
        struct vdev_op_params pt = conv_params(same, s, s, 0, 0);
        pt.j[0] = dh;
        pt.j[1] = dw;
        pt.i[2] = nb;
        pt.j[2] = oh;
        pt.j[3] = ow;
        pt.f[1] = (double)c;
        int64_t h = conv_dim(oh, 2 * dh + 1, s, same), w = conv_dim(ow, dw + 1, s, same);
        CASE(same ? "SAME" : "VALID", VDEV_OP_CONV2D_TRANSPOSE, pt, 0,
             TF(G_UNIFORM, 4, nb, h, w, o), TF(G_UNIFORM, 4, 3, 2, c, o));
    }
    struct vdev_op_params t8 = conv_params(1, 2, 2, 0, 0), t0 = conv_params(0, 2, 2, 0, 0);
    t8.i[2] = t0.i[2] = 2;
    t8.j[2] = 8, t8.j[3] = 7, t8.f[1] = 3;
    t0.j[2] = 1, t0.j[3] = 1, t0.f[1] = 3;
    CASE("SAME, 8 rows from 4", VDEV_OP_CONV2D_TRANSPOSE, t8, 0, TF(G_UNIFORM, 4, 2, 4, 4, 5),
         TF(G_UNIFORM, 4, 3, 3, 3, 5));
    CASE("empty input: zeros", VDEV_OP_CONV2D_TRANSPOSE, t0, 0, TF(G_UNIFORM, 4, 2, 0, 0, 5),
         TF(G_UNIFORM, 4, 3, 3, 3, 5));
    /* the fused LSTM cell (cuda_lstm.cu): gates [..., 4u], c [..., u];
     * saturated gates, NaN and infinities, 3-D, one unit, no row, more
     * elements than threads; the gradients (the cell's four parts) */
    {
        int64_t r = BIG(20000, 300);
        CASE("[64,4x48]", VDEV_OP_LSTM_GATES, none, 0, TF(G_UNIFORM, 2, 64, 192));
        CASE("saturated", VDEV_OP_LSTM_GATES, none, 0, TF(G_WIDE, 2, 33, 40));
        CASE("NaN, inf, -0", VDEV_OP_LSTM_GATES, none, 0, TF(G_SPECIAL, 2, 20, 28));
        CASE("3-D, one unit", VDEV_OP_LSTM_GATES, none, 0, TF(G_UNIFORM, 3, 2, 5, 4));
        CASE("no row", VDEV_OP_LSTM_GATES, none, 0, TF(G_UNIFORM, 2, 0, 8));
        CASE("more elements than threads", VDEV_OP_LSTM_GATES, none, 0,
             TF(G_UNIFORM, 2, r, 256));
        CASE("[64,4x48]", VDEV_OP_LSTM_GATES_GRAD, none, 0, TF(G_WIDE, 2, 64, 192),
             TF(G_UNIFORM, 2, 64, 192));
        CASE("3-D, NaN", VDEV_OP_LSTM_GATES_GRAD, none, 0, TF(G_SPECIAL, 3, 2, 5, 8),
             TF(G_UNIFORM, 3, 2, 5, 8));
        for (int op = VDEV_OP_LSTM_CELL_STATE; op <= VDEV_OP_LSTM_CELL_OUTPUT; op++) {
            CASE("[64,4x48]", op, none, 0, TF(G_UNIFORM, 2, 64, 192), TF(G_WIDE, 2, 64, 48));
            CASE("NaN, inf, -0", op, none, 0, TF(G_SPECIAL, 2, 20, 28), TF(G_SPECIAL, 2, 20, 7));
            CASE("3-D, one unit", op, none, 0, TF(G_UNIFORM, 3, 2, 5, 4), TF(G_UNIFORM, 3, 2, 5, 1));
            CASE("no row", op, none, 0, TF(G_UNIFORM, 2, 0, 8), TF(G_UNIFORM, 2, 0, 2));
            CASE("more elements than threads", op, none, 0, TF(G_UNIFORM, 2, r, 256),
                 TF(G_UNIFORM, 2, r, 64));
        }
        for (int part = 0; part < 4; part++) {
            struct vdev_op_params p = P(0, 0, part, 0);
            CASE("[32,4x24]", VDEV_OP_LSTM_CELL_GRAD, p, 0, TF(G_WIDE, 2, 32, 24),
                 TF(G_UNIFORM, 2, 32, 96), TF(G_UNIFORM, 2, 32, 24));
            CASE("3-D", VDEV_OP_LSTM_CELL_GRAD, p, 0, TF(G_UNIFORM, 3, 2, 3, 5),
                 TF(G_UNIFORM, 3, 2, 3, 20), TF(G_UNIFORM, 3, 2, 3, 5));
            CASE("no row", VDEV_OP_LSTM_CELL_GRAD, p, 0, TF(G_UNIFORM, 2, 0, 5),
                 TF(G_UNIFORM, 2, 0, 20), TF(G_UNIFORM, 2, 0, 5));
        }
    }
    /* SelectByMask and its gradient (cuda_select.cu): masks of the values'
     * shape, [r,1], [1,c], [2,1,c]; NaN, infinities and -0 in masks and
     * values; no element; more elements than threads */
    {
        int64_t r = BIG(20000, 300);
        for (int op = VDEV_OP_SELECT_MASK; op <= VDEV_OP_SELECT_MASK_GRAD; op++) {
            for (int part = 0; part < (op == VDEV_OP_SELECT_MASK ? 1 : 2); part++) {
                struct vdev_op_params p = P(0, 0, part, 0);
#define VALUES(...) TF(G_SPECIAL, __VA_ARGS__)
#define SEL(what, mask, ...)                                                                       \
    do {                                                                                           \
        if (op == VDEV_OP_SELECT_MASK)                                                             \
            CASE(what, op, p, 0, mask, VALUES(__VA_ARGS__), TF(G_UNIFORM, __VA_ARGS__));           \
        else                                                                                       \
            CASE(what, op, p, 0, mask, VALUES(__VA_ARGS__));                                       \
    } while (0)
                SEL("same shape", TF(G_SPECIAL, 2, 20, 30), 2, 20, 30);
                SEL("[r,1]", TF(G_SPECIAL, 2, 20, 1), 2, 20, 30);
                SEL("[1,c]", TF(G_SPECIAL, 2, 1, 30), 2, 20, 30);
                SEL("[2,1,c]", TF(G_SPECIAL, 3, 2, 1, 30), 3, 2, 20, 30);
                SEL("no element", TF(G_SPECIAL, 2, 0, 1), 2, 0, 30);
                SEL("more elements than threads", TF(G_SPECIAL, 2, r, 1), 2, r, 64);
#undef SEL
#undef VALUES
                /* a bool mask, of lower rank than the values; int32 values */
                if (op == VDEV_OP_SELECT_MASK)
                    CASE("bool [c], int32", op, p, 0, TB(1, 30), TI(G_INTS, 2, 20, 30),
                         TI(G_INTS, 2, 20, 30));
                else
                    CASE("bool [c]", op, p, 0, TB(1, 30), TF(G_SPECIAL, 2, 20, 30));
            }
        }
    }
    /* comparisons, logic, Cast, SelectV2 (cuda_compare.cu) */
    {
        int64_t r = BIG(20000, 300);
        for (int op = VDEV_OP_EQUAL; op <= VDEV_OP_LOGICAL_OR; op++) {
            if (op == VDEV_OP_LOGICAL_AND || op == VDEV_OP_LOGICAL_OR) {
                CASE("same shape", (enum vdev_op)op, none, 0, TB(2, 20, 30), TB(2, 20, 30));
                CASE("[r,1] and [1,c]", (enum vdev_op)op, none, 0, TB(2, 20, 1), TB(2, 1, 30));
                CASE("a row", (enum vdev_op)op, none, 0, TB(2, 20, 30), TB(1, 30));
                continue;
            }
            CASE("same shape", (enum vdev_op)op, none, 0, TF(G_CMP, 2, 20, 30),
                 TF(G_CMP, 2, 20, 30));
            CASE("a row", (enum vdev_op)op, none, 0, TF(G_CMP, 2, 20, 30), TF(G_CMP, 1, 30));
            CASE("a scalar", (enum vdev_op)op, none, 0, TF(G_CMP, 2, 20, 30), TF(G_CMP, 0, 1));
            CASE("[2,1,c] and [r,1]", (enum vdev_op)op, none, 0, TF(G_CMP, 3, 2, 1, 30),
                 TF(G_CMP, 2, 20, 1));
            CASE("int32, [c] and [r,c]", (enum vdev_op)op, none, 0, TI(G_INTS, 1, 30),
                 TI(G_INTS, 2, 20, 30));
            CASE("no element", (enum vdev_op)op, none, 0, TF(G_CMP, 2, 0, 30), TF(G_CMP, 1, 30));
            CASE("more elements than threads", (enum vdev_op)op, none, 0, TF(G_CMP, 2, r, 64),
                 TF(G_CMP, 2, r, 64));
            if (op == VDEV_OP_EQUAL || op == VDEV_OP_NOT_EQUAL)
                CASE("bool", (enum vdev_op)op, none, 0, TB(2, 20, 30), TB(2, 1, 30));
        }
        CASE("[2,r,c]", VDEV_OP_LOGICAL_NOT, none, 0, TB(3, 2, 20, 30));
        CASE("no element", VDEV_OP_LOGICAL_NOT, none, 0, TB(2, 0, 30));
        static const int gen_of[3] = {G_BIGF, G_BIGI, G_BOOL};
        for (int from = 0; from < 3; from++)
            for (int to = 0; to < 3; to++) {
                struct tin in = {gen_of[from], from, 2, {20, 30}};
                CASE("every pair of dtypes", VDEV_OP_CAST, P(0, 0, to, 0), 0, in);
            }
        CASE("more elements than threads", VDEV_OP_CAST, P(0, 0, VDEV_I32, 0), 0,
             TF(G_BIGF, 2, r, 64));
        CASE("all [r,c]", VDEV_OP_SELECT_V2, none, 0, TB(2, 20, 30), TF(G_SPECIAL, 2, 20, 30),
             TF(G_UNIFORM, 2, 20, 30));
        CASE("c [r,1], x [r,c], y a scalar", VDEV_OP_SELECT_V2, none, 0, TB(2, 20, 1),
             TF(G_SPECIAL, 2, 20, 30), TF(G_UNIFORM, 0, 1));
        CASE("c [c], x [r,1], y [1,c]", VDEV_OP_SELECT_V2, none, 0, TB(1, 30),
             TF(G_UNIFORM, 2, 20, 1), TF(G_SPECIAL, 2, 1, 30));
        CASE("int32 values, c [2,1,c]", VDEV_OP_SELECT_V2, none, 0, TB(3, 2, 1, 30),
             TI(G_INTS, 2, 20, 30), TI(G_INTS, 2, 20, 30));
        CASE("bool values", VDEV_OP_SELECT_V2, none, 0, TB(2, 20, 30), TB(2, 1, 30), TB(2, 20, 1));
        CASE("no element", VDEV_OP_SELECT_V2, none, 0, TB(2, 0, 30), TF(G_UNIFORM, 2, 0, 30),
             TF(G_UNIFORM, 1, 30));
        CASE("more elements than threads", VDEV_OP_SELECT_V2, none, 0, TB(2, r, 1),
             TF(G_UNIFORM, 2, r, 64), TF(G_UNIFORM, 2, r, 64));
    }
    /* Max, Min, Abs, Sign (cuda_extreme.cu) */
    {
        int64_t r = BIG(20000, 300);
        for (int op = VDEV_OP_MAX; op <= VDEV_OP_MIN; op++) {
            enum vdev_op o = (enum vdev_op)op;
            CASE("all, ties and NaN", o, P(0, 0, ALL, 0), 0, TF(G_CMP, 2, 20, 30));
            CASE("axis 0", o, P(0, 0, 0, 0), 0, TF(G_CMP, 2, 20, 30));
            CASE("axis 1, keepdims", o, P(0, 0, 1, 1), 0, TF(G_UNIFORM, 2, 20, 30));
            CASE("3-D middle axis", o, P(0, 0, 1, 0), 0, TF(G_WIDE, 3, 2, 20, 30));
            CASE("int32", o, P(0, 0, 1, 0), 0, TI(G_INTS, 2, 20, 30));
            CASE("int32 all", o, P(0, 0, ALL, 0), 0, TI(G_INTS, 2, 20, 30));
            CASE("an empty axis: the identity", o, P(0, 0, 0, 0), 0, TF(G_UNIFORM, 2, 0, 30));
            CASE("int32, an empty axis", o, P(0, 0, 1, 0), 0, TI(G_INTS, 2, 7, 0));
            CASE("no element at all", o, P(0, 0, ALL, 0), 0, TF(G_UNIFORM, 2, 0, 3));
            CASE("more rows than threads", o, P(0, 0, 1, 0), 0, TF(G_UNIFORM, 2, r, 64));
        }
        /* Sum of int32, wrapping (the float Sum's cases are op_cases.h's) */
        CASE("int32, axis 0", VDEV_OP_SUM, P(0, 0, 0, 0), 0, TI(G_INTS, 2, 20, 30));
        CASE("int32, all", VDEV_OP_SUM, P(0, 0, ALL, 0), 0, TI(G_INTS, 2, 20, 30));
        CASE("int32, an empty axis", VDEV_OP_SUM, P(0, 0, 1, 1), 0, TI(G_INTS, 2, 7, 0));
        CASE("int32, more rows than threads", VDEV_OP_SUM, P(0, 0, 1, 0), 0,
             TI(G_INTS, 2, r, 64));
        for (int op = VDEV_OP_FLOOR; op <= VDEV_OP_ROUND; op++) {
            enum vdev_op o = (enum vdev_op)op;
            CASE("halves", o, none, 0, TF(G_HALVES, 2, 20, 30));
            CASE("special", o, none, 0, TF(G_SPECIAL, 2, 20, 30));
            CASE("int32", o, none, 0, TI(G_INTS, 2, 20, 30));
            CASE("more elements than threads", o, none, 0, TF(G_WIDE, 2, r, 64));
        }
        for (int op = VDEV_OP_FLOOR_DIV; op <= VDEV_OP_FLOOR_MOD; op++) {
            enum vdev_op o = (enum vdev_op)op;
            CASE("same shape", o, none, 0, TF(G_HALVES, 2, 20, 30), TF(G_HALVES, 2, 20, 30));
            CASE("[r,1] by [1,c]", o, none, 0, TF(G_WIDE, 2, 20, 1), TF(G_HALVES, 2, 1, 30));
            CASE("int32, a zero divisor", o, none, 0, TI(G_INTS, 2, 20, 30),
                 TI(G_INTS, 2, 20, 30));
            CASE("int32 row", o, none, 0, TI(G_INTS, 2, 20, 30), TI(G_INTS, 1, 30));
            CASE("no element", o, none, 0, TF(G_HALVES, 2, 0, 30), TF(G_HALVES, 1, 30));
        }
        for (int op = VDEV_OP_ABS; op <= VDEV_OP_SIGN; op++) {
            enum vdev_op o = (enum vdev_op)op;
            CASE("special", o, none, 0, TF(G_CMP, 2, 20, 30));
            CASE("uniform", o, none, 0, TF(G_WIDE, 2, 20, 30));
            CASE("int32", o, none, 0, TI(G_INTS, 2, 20, 30));
            CASE("no element", o, none, 0, TF(G_UNIFORM, 2, 0, 30));
            CASE("more elements than threads", o, none, 0, TF(G_UNIFORM, 2, r, 64));
        }
    }
    /* the fused GRU cell (cuda_gru.cu): gates [..., 3u], h [..., u] */
    {
        int64_t r = BIG(20000, 300);
        CASE("[64,3x48]", VDEV_OP_GRU_GATES, none, 0, TF(G_UNIFORM, 2, 64, 144),
             TF(G_UNIFORM, 2, 64, 144));
        CASE("saturated", VDEV_OP_GRU_GATES, none, 0, TF(G_WIDE, 2, 33, 30), TF(G_WIDE, 2, 33, 30));
        CASE("NaN, inf, -0", VDEV_OP_GRU_GATES, none, 0, TF(G_SPECIAL, 2, 20, 21),
             TF(G_UNIFORM, 2, 20, 21));
        CASE("3-D, one unit", VDEV_OP_GRU_GATES, none, 0, TF(G_UNIFORM, 3, 2, 5, 3),
             TF(G_UNIFORM, 3, 2, 5, 3));
        CASE("no row", VDEV_OP_GRU_GATES, none, 0, TF(G_UNIFORM, 2, 0, 6), TF(G_UNIFORM, 2, 0, 6));
        CASE("more elements than threads", VDEV_OP_GRU_GATES, none, 0, TF(G_UNIFORM, 2, r, 192),
             TF(G_UNIFORM, 2, r, 192));
        CASE("[64,3x48]", VDEV_OP_GRU_CELL_OUTPUT, none, 0, TF(G_UNIFORM, 2, 64, 144),
             TF(G_WIDE, 2, 64, 48));
        CASE("NaN, inf, -0", VDEV_OP_GRU_CELL_OUTPUT, none, 0, TF(G_SPECIAL, 2, 20, 21),
             TF(G_SPECIAL, 2, 20, 7));
        CASE("3-D, no row", VDEV_OP_GRU_CELL_OUTPUT, none, 0, TF(G_UNIFORM, 3, 2, 0, 6),
             TF(G_UNIFORM, 3, 2, 0, 2));
        for (int part = 0; part < 2; part++) {
            struct vdev_op_params p = P(0, 0, part, 0);
            CASE("[32,3x24]", VDEV_OP_GRU_GATES_GRAD, p, 0, TF(G_WIDE, 2, 32, 72),
                 TF(G_UNIFORM, 2, 32, 72), TF(G_UNIFORM, 2, 32, 72));
            CASE("3-D, NaN", VDEV_OP_GRU_GATES_GRAD, p, 0, TF(G_SPECIAL, 3, 2, 3, 15),
                 TF(G_UNIFORM, 3, 2, 3, 15), TF(G_UNIFORM, 3, 2, 3, 15));
            CASE("[32,3x24]", VDEV_OP_GRU_CELL_GRAD, p, 0, TF(G_WIDE, 2, 32, 24),
                 TF(G_UNIFORM, 2, 32, 72), TF(G_UNIFORM, 2, 32, 24));
            CASE("no row", VDEV_OP_GRU_CELL_GRAD, p, 0, TF(G_UNIFORM, 2, 0, 5),
                 TF(G_UNIFORM, 2, 0, 15), TF(G_UNIFORM, 2, 0, 5));
        }
    }
}

#endif /* VDEV_OP_CASES_SHAPED_H */
