/* test_checkpoint_numpy.c — vdev's checkpoints read by Python without vdev,
 * and Python's files read by vdev.
 *
 * The test saves tensors from the CPU and two simulated GPUs (random values,
 * float specials such as NaN with a payload, -0, denormals and infinities,
 * i32 extremes, a 0-dimensional tensor, an empty one, a 4-D one, a non-ASCII
 * name) and writes what it expects as JSON: each name's dtype, shape and the
 * bit pattern of every element. A Python script then parses the header with
 * the json module, checks the metadata (format, the CRC-32 with zlib.crc32,
 * the caller's step), reads each tensor with numpy.frombuffer and compares
 * the bits exactly, and checks the header's own CRC-32 the same way. The
 * script also writes a safetensors file of its own from numpy arrays, the way
 * the format's reference writer lays it out (an F16 entry of 10 bytes puts
 * the next ones at offsets that are not multiples of 4), and the test loads
 * it and compares the values exactly.
 *
 * It uses the first of `python3` (on PATH) and /usr/bin/python3 that imports
 * numpy, and exits 77 (skipped), saying why, when neither does. */
#define _GNU_SOURCE
#include "ckpt_testlib.h"

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char SCRIPT[] =
    "import json, struct, sys, zlib\n"
    "import numpy as np\n"
    "ckpt, expect_path, out = sys.argv[1:4]\n"
    "raw = open(ckpt, 'rb').read()\n"
    "(n,) = struct.unpack('<Q', raw[:8])\n"
    "assert n % 8 == 0, n\n"
    "header = json.loads(raw[8:8 + n].decode('utf-8'))\n"
    "data = raw[8 + n:]\n"
    "meta = header.pop('__metadata__')\n"
    "assert meta['vdev.format'] == '1', meta\n"
    "assert meta['vdev.crc32'] == '%08x' % zlib.crc32(data), meta\n"
    "# The header's own CRC: over its n bytes, with its 8 digits read as zeros.\n"
    "lead = (b'{\"__metadata__\":{\"vdev.format\":\"1\",\"vdev.crc32\":\"' +\n"
    "        meta['vdev.crc32'].encode() + b'\",\"vdev.header_crc32\":\"')\n"
    "assert raw[8:8 + len(lead)] == lead, raw[:120]\n"
    "blank = lead + b'00000000' + raw[8 + len(lead) + 8:8 + n]\n"
    "assert meta['vdev.header_crc32'] == '%08x' % zlib.crc32(blank), meta\n"
    "assert meta['step'] == '300', meta\n"
    "expect = json.load(open(expect_path, encoding='utf-8'))\n"
    "assert list(header) == list(expect), (list(header), list(expect))\n"
    "at = 0\n"
    "for name, e in expect.items():\n"
    "    h = header[name]\n"
    "    assert h['dtype'] == e['dtype'] and h['shape'] == e['shape'], (name, h, e)\n"
    "    b, end = h['data_offsets']\n"
    "    assert b == at, (name, b, at)\n"
    "    at = end\n"
    "    arr = np.frombuffer(data[b:end], dtype={'F32': '<f4', 'I32': '<i4'}[h['dtype']])\n"
    "    arr = arr.reshape(h['shape'])\n"
    "    assert arr.shape == tuple(e['shape'])\n"
    "    bits = arr.view('<u4').ravel().tolist()\n"
    "    assert bits == e['bits'], name\n"
    "assert at == len(data)\n"
    "w = np.frombuffer(data[slice(*header['dense/w']['data_offsets'])], '<f4')\n"
    "print('numpy read %d entries, %d bytes of data; dense/w mean %.6f' % (len(header), len(data), "
    "w.mean()))\n"
    "# A file of Python's own, laid out as the reference writer does: an F16\n"
    "# entry of 10 bytes leaves 'b' and 's' at offsets that are not multiples of 4.\n"
    "arrays = {'a': (np.arange(12, dtype='<f4').reshape(3, 4) * np.float32(0.5) - np.float32(1)),\n"
    "          'a2': np.arange(5, dtype='<f2'),\n"
    "          'b': np.array([-2**31, 7, 2**31 - 1], dtype='<i4'),\n"
    "          's': np.array(2.5, dtype='<f4')}\n"
    "hdr, blob = {'__metadata__': {'format': 'np'}}, b''\n"
    "for name in sorted(arrays):\n"
    "    a = arrays[name]\n"
    "    dt = {'float32': 'F32', 'int32': 'I32', 'float16': 'F16'}[a.dtype.name]\n"
    "    hdr[name] = {'dtype': dt, 'shape': list(a.shape),\n"
    "                 'data_offsets': [len(blob), len(blob) + a.nbytes]}\n"
    "    blob += a.tobytes()\n"
    "text = json.dumps(hdr, separators=(',', ':')).encode('utf-8')\n"
    "text += b' ' * ((8 - len(text) % 8) % 8)\n"
    "open(out, 'wb').write(struct.pack('<Q', len(text)) + text + blob)\n";

/* The first interpreter that imports numpy, or NULL; *why says what is missing. */
static const char *find_python(const char **why) {
    static const char *candidates[] = {"python3", "/usr/bin/python3"};
    int any = 0;
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s -c 'import sys' >/dev/null 2>&1", candidates[i]);
        int rc = system(cmd);
        if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
            continue;
        any = 1;
        snprintf(cmd, sizeof cmd, "%s -c 'import numpy' >/dev/null 2>&1", candidates[i]);
        rc = system(cmd);
        if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0)
            return candidates[i];
    }
    *why = any ? "python3 has no numpy" : "no python3";
    return NULL;
}

struct item {
    const char *name;
    vdev_tensor_t *t;
};

/* One entry of the expected JSON: dtype, shape and every element's bits. */
static void expect_entry(FILE *f, const struct item *it, int first) {
    int64_t n = vdev_tensor_numel(it->t);
    uint32_t *bits = malloc((size_t)(n ? n : 1) * 4);
    CHECK(bits && vdev_tensor_to_host(it->t, bits, (size_t)n * 4) == VDEV_OK);
    fprintf(f, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", first ? "" : ",", it->name,
            vdev_tensor_dtype(it->t) == VDEV_I32 ? "I32" : "F32");
    for (int d = 0; d < vdev_tensor_ndim(it->t); d++)
        fprintf(f, "%s%lld", d ? "," : "", (long long)vdev_tensor_dim(it->t, d));
    fprintf(f, "],\"bits\":[");
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%s%u", i ? "," : "", bits[i]);
    fprintf(f, "]}");
    free(bits);
}

static vdev_tensor_t *
on(const char *dev, vdev_tensor_t *(*make)(const void *, const int64_t *, int, enum vdev_dtype),
   const void *data, const int64_t *shape, int ndim, enum vdev_dtype dt) {
    CHECK_OK(vdev_device_push(dev));
    vdev_tensor_t *t = make(data, shape, ndim, dt);
    vdev_device_pop();
    CHECK(t != NULL);
    return t;
}

int main(void) {
    const char *why = NULL, *py = find_python(&why);
    if (!py) {
        printf("skipped: %s\n", why);
        return 77;
    }
    if (ckpt_dir_make() != 0)
        return 1;
    check_fresh("2x1GiB");

    uint32_t special_bits[10] = {0x7fc00001u, 0xffa00000u, 0x7f800000u, 0xff800000u, 0x80000000u,
                                 0x00000001u, 0x807fffffu, 0x7f7fffffu, 0x00800000u, 0x3eaaaaabu};
    int32_t labels[5] = {INT32_MIN, -1, 0, 1, INT32_MAX};
    int32_t iters = 300;
    float scale = -0.125f, conv[24];
    for (int i = 0; i < 24; i++)
        conv[i] = (float)(i - 12) / 7.0f;
    int64_t s10[1] = {10}, s5[1] = {5}, s04[2] = {0, 4}, s4d[4] = {2, 3, 2, 2};
    int64_t sw[2] = {64, 33};
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *w = vdev_tensor_normal(sw, 2, 0.0f, 0.5f, 5);
    vdev_device_pop();
    struct item items[] = {
        {"dense/w", w},
        {"specials", on("GPU:1", vdev_tensor_from_host, special_bits, s10, 1, VDEV_F32)},
        {"labels", on("GPU:1", vdev_tensor_from_host, labels, s5, 1, VDEV_I32)},
        {"optimizer/iterations", on("CPU:0", vdev_tensor_from_host, &iters, NULL, 0, VDEV_I32)},
        {"scale", on("GPU:0", vdev_tensor_from_host, &scale, NULL, 0, VDEV_F32)},
        {"empty", on("GPU:1", vdev_tensor_from_host, NULL, s04, 2, VDEV_F32)},
        {"conv/\xc3\xbc", on("CPU:0", vdev_tensor_from_host, conv, s4d, 4, VDEV_F32)},
    };
    enum { N = sizeof items / sizeof *items };
    const char *names[N];
    vdev_tensor_t *tensors[N];
    for (int i = 0; i < N; i++) {
        names[i] = items[i].name;
        tensors[i] = items[i].t;
    }
    const char *meta[2] = {"step", "300"};
    CHECK_OK(vdev_checkpoint_save(P("vdev.safetensors"), names, tensors, N, meta, 1));

    FILE *f = fopen(P("expect.json"), "w");
    CHECK(f != NULL);
    fputc('{', f);
    for (int i = 0; i < N; i++)
        expect_entry(f, &items[i], i == 0);
    fputs("}\n", f);
    fclose(f);
    f = fopen(P("check.py"), "w");
    CHECK(f != NULL);
    fputs(SCRIPT, f);
    fclose(f);

    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s '%s' '%s' '%s' '%s'", py, P("check.py"), P("vdev.safetensors"),
             P("expect.json"), P("numpy.safetensors"));
    int rc = system(cmd);
    CHECK(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0);

    /* Python's file, into vdev tensors on the GPUs. */
    int64_t s34[2] = {3, 4}, s3[1] = {3};
    vdev_tensor_t *a = on("GPU:1", vdev_tensor_from_host, conv, s34, 2, VDEV_F32);
    vdev_tensor_t *b = on("GPU:0", vdev_tensor_from_host, labels, s3, 1, VDEV_I32);
    vdev_tensor_t *s = on("GPU:0", vdev_tensor_from_host, &scale, NULL, 0, VDEV_F32);
    const char *pn[3] = {"a", "b", "s"};
    vdev_tensor_t *pt[3] = {a, b, s};
    CHECK_OK(vdev_checkpoint_load(P("numpy.safetensors"), pn, pt, 3));
    float av[12], sv;
    int32_t bv[3];
    CHECK_OK(vdev_tensor_to_host(a, av, sizeof av));
    CHECK_OK(vdev_tensor_to_host(b, bv, sizeof bv));
    CHECK_OK(vdev_tensor_to_host(s, &sv, sizeof sv));
    for (int i = 0; i < 12; i++)
        CHECK(av[i] == (float)i * 0.5f - 1.0f);
    CHECK(bv[0] == INT32_MIN && bv[1] == 7 && bv[2] == INT32_MAX && sv == 2.5f);
    char fmt[8];
    CHECK_OK(vdev_checkpoint_metadata(P("numpy.safetensors"), "format", fmt, sizeof fmt));
    CHECK_STR(fmt, "np");

    for (int i = 0; i < N; i++)
        vdev_tensor_free(tensors[i]);
    for (int i = 0; i < 3; i++)
        vdev_tensor_free(pt[i]);
    vdev_shutdown();
    ckpt_dir_clear(1);
    free_paths();
    return check_done();
}
