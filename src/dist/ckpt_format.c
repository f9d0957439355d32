/* ckpt_format.c — the safetensors header: parsing and checking one read from
 * a file, and writing one for a save.
 *
 * Reading treats the header as hostile. Before yajl sees it, a scan refuses
 * an empty header, one that does not start with '{', NUL bytes, invalid
 * UTF-8, comments (yajl's tree parser allows them; JSON does not) and nesting
 * deeper than VDEV_CKPT_MAX_DEPTH (yajl frees its tree recursively). yajl's
 * tree API then parses it. Before the scan, the header's own CRC
 * ("vdev.header_crc32") is checked on the raw bytes, so any damage to a
 * header vdev wrote is data loss, not a parse error (ckpt_hcrc.c says how).
 * Every number must be a non-negative integer that fits 63 bits (yajl marks
 * larger ones, and non-integers, as not integers; JSON has no NaN or
 * infinity). Each entry's byte count must equal its shape's element count
 * times its dtype's size (with overflow checks), every range must lie inside
 * the data section the file really has, and, sorted by offset, the ranges
 * must tile the data exactly (no overlap, no gap, nothing after the last), as
 * the safetensors reference reader requires. Offsets need not be multiples
 * of the element size: the format does not ask for it, and the loader copies
 * each entry into an aligned buffer.
 *
 * Writing builds the JSON with "__metadata__" first (vdev's keys, then the
 * caller's), then the entries in the caller's order, padded with spaces to a
 * multiple of 8 bytes so the data that follows is aligned; sealing it
 * (ckpt_hcrc.c) fills in the data's CRC and then the header's.
 *
 * The dtypes' names and sizes in the file are here too, and the conversions
 * of "BOOL" (a byte, 0 or 1) from and to vdev's bool (a 32-bit word) that
 * save and load make in their staging buffers. */
#include "dist/checkpoint.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- fault injection ---- */

static _Thread_local int fault_countdown;

void vdev_dist_checkpoint_fail_at(int n) { fault_countdown = n > 0 ? n : 0; }

int vdev_dist_checkpoint_fault_pending(void) { return fault_countdown > 0; }

int vdev_dist_fault(void) { return fault_countdown > 0 && --fault_countdown == 0; }

/* Both set errno to ENOMEM when they return NULL, as malloc does: callers that
 * report through errno (ckpt_file.c's follow) tell no memory from a failed system
 * call by it, and a refusal of the host-memory door (a test's) sets none. */
void *vdev_dist_malloc(size_t n) {
    void *p = vdev_dist_fault() ? NULL : vdev_malloc(n ? n : 1);
    if (!p)
        errno = ENOMEM;
    return p;
}

void *vdev_dist_realloc(void *p, size_t n) {
    void *q = vdev_dist_fault() ? NULL : vdev_realloc(p, n ? n : 1);
    if (!q)
        errno = ENOMEM;
    return q;
}

/* ---- small helpers ---- */

/* "checkpoint '<path>'<sep><message>" as the thread's error, code returned. */
static VDEV_PRINTF(4, 0) enum vdev_status ckerr_v(const char *path, enum vdev_status code,
                                                   const char *sep, const char *fmt,
                                                   va_list ap) {
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return vdev_error(code, "checkpoint '" VDEV_CKPT_QUOTE "%s%s", path, sep, msg);
}

enum vdev_status vdev_dist_ckerr(const char *path, enum vdev_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    enum vdev_status st = ckerr_v(path, code, "': ", fmt, ap);
    va_end(ap);
    return st;
}

enum vdev_status vdev_dist_ckloss(const char *path, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    enum vdev_status st = ckerr_v(path, VDEV_ERR_IO, VDEV_CKPT_DAMAGED, fmt, ap);
    va_end(ap);
    return st;
}

int vdev_dist_utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return 0; /* a continuation byte first, an overlong C0/C1, or F5..FF */
        }
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char *vdev_dist_find_duplicate(const char *const *names, int n, int *oom) {
    *oom = 0;
    if (n < 2)
        return NULL;
    const char **s = vdev_dist_malloc((size_t)n * sizeof *s);
    if (!s) {
        *oom = 1;
        return NULL;
    }
    memcpy(s, names, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_str);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (strcmp(s[i - 1], s[i]) == 0)
            dup = s[i];
    free(s);
    return dup;
}

/* ---- dtypes: every one the safetensors format names with a whole-byte size ---- */

static const struct {
    const char *name;
    unsigned bytes;
    int dtype; /* enum vdev_dtype, VDEV_DTYPE_COUNT for none */
} DTYPES[] = {
    {"F32", 4, VDEV_F32},
    {"I32", 4, VDEV_I32},
    {"BOOL", 1, VDEV_BOOL}, /* a byte, 0 or 1, for vdev's 32-bit word (checkpoint.c) */
    {"U8", 1, VDEV_DTYPE_COUNT},
    {"I8", 1, VDEV_DTYPE_COUNT},
    {"F8_E5M2", 1, VDEV_DTYPE_COUNT},
    {"F8_E4M3", 1, VDEV_DTYPE_COUNT},
    {"I16", 2, VDEV_DTYPE_COUNT},
    {"U16", 2, VDEV_DTYPE_COUNT},
    {"F16", 2, VDEV_DTYPE_COUNT},
    {"BF16", 2, VDEV_DTYPE_COUNT},
    {"U32", 4, VDEV_DTYPE_COUNT},
    {"F64", 8, VDEV_DTYPE_COUNT},
    {"I64", 8, VDEV_DTYPE_COUNT},
    {"U64", 8, VDEV_DTYPE_COUNT},
};

/* The row of a vdev dtype (its name and size in the file), -1 for none. */
static int dtype_row(enum vdev_dtype dt) {
    for (size_t d = 0; d < VDEV_ARRAY_LEN(DTYPES); d++)
        if (DTYPES[d].dtype != VDEV_DTYPE_COUNT && DTYPES[d].dtype == (int)dt)
            return (int)d;
    return -1;
}

const char *vdev_dist_ckpt_dtype_name(enum vdev_dtype dt) {
    int d = dtype_row(dt);
    return d < 0 ? "no dtype" : DTYPES[d].name;
}

unsigned vdev_dist_ckpt_elem_bytes(enum vdev_dtype dt) {
    int d = dtype_row(dt);
    return d < 0 ? 4 : DTYPES[d].bytes;
}

/* ---- BOOL: a byte in the file, a 32-bit word in memory ---- */

void vdev_dist_ckpt_pack_bools(void *p, uint64_t n) {
    unsigned char *b = p;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, b + 4 * i, 4);
        b[i] = w != 0; /* i <= 4 i: word i was read before byte i is written */
    }
}

void vdev_dist_ckpt_unpack_bools(void *p, uint64_t n) {
    unsigned char *b = p;
    for (uint64_t i = n; i-- > 0;) {
        uint32_t w = b[i]; /* read before word i (bytes 4 i..4 i + 3, all >= i) is written */
        memcpy(b + 4 * i, &w, 4);
    }
}

uint64_t vdev_dist_ckpt_first_bad_bool(const void *p, uint64_t n) {
    const unsigned char *b = p;
    uint64_t i = 0;
    while (i < n && b[i] <= 1)
        i++;
    return i;
}

/* ---- reading ---- */

/* What yajl must not see; see the file comment. */
static enum vdev_status prescan(const char *path, const char *t, uint64_t n) {
    if (n == 0)
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE, "the header is empty");
    if (t[0] != '{')
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE, "the header does not start with '{'");
    if (!vdev_dist_utf8_valid(t, n))
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE, "the header is not valid UTF-8");
    int in_str = 0, esc = 0, depth = 0;
    for (uint64_t i = 0; i < n; i++) {
        char c = t[i];
        if (c == '\0')
            return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                                   "the header holds a NUL byte at offset %llu",
                                   (unsigned long long)i);
        if (in_str) {
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            if (++depth > VDEV_CKPT_MAX_DEPTH)
                return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                                       "the header nests deeper than %d levels",
                                       VDEV_CKPT_MAX_DEPTH);
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == '/') {
            return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                                   "the header is not valid JSON: a comment at offset %llu",
                                   (unsigned long long)i);
        }
    }
    return VDEV_OK;
}

/* A JSON number that is a non-negative integer of at most 63 bits. */
static int get_u64(yajl_val v, uint64_t *out) {
    if (!YAJL_IS_INTEGER(v) || v->u.number.i < 0)
        return 0;
    for (const char *p = v->u.number.r; *p; p++)
        if (*p < '0' || *p > '9') /* "-0" */
            return 0;
    *out = (uint64_t)v->u.number.i;
    return 1;
}

/* How a value that should be a number looks, for messages. */
static const char *shown(yajl_val v) {
    if (YAJL_IS_NUMBER(v))
        return v->u.number.r;
    if (YAJL_IS_STRING(v))
        return "a string";
    if (YAJL_IS_OBJECT(v))
        return "an object";
    if (YAJL_IS_ARRAY(v))
        return "an array";
    return "true, false or null";
}

/* Checks one entry object and fills e (not its offsets' relation to others). */
static enum vdev_status parse_entry(struct vdev_checkpoint *ck, const char *name, yajl_val v,
                                    struct vdev_ckpt_entry *e, int64_t *dims) {
    const char *path = ck->path;
    if (!YAJL_IS_OBJECT(v))
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                               "entry '" VDEV_CKPT_QUOTE "' is not a JSON object", name);
    yajl_val dtype = NULL, shape = NULL, offs = NULL;
    for (size_t k = 0; k < v->u.object.len; k++) {
        const char *key = v->u.object.keys[k];
        yajl_val *slot = !strcmp(key, "dtype")          ? &dtype
                         : !strcmp(key, "shape")        ? &shape
                         : !strcmp(key, "data_offsets") ? &offs
                                                        : NULL;
        if (!slot)
            continue; /* unknown fields are ignored, as the reference reader does */
        if (*slot)
            return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                                   "entry '" VDEV_CKPT_QUOTE "' has \"%s\" twice", name, key);
        *slot = v->u.object.values[k];
    }
    const char *missing = !dtype ? "dtype" : !shape ? "shape" : !offs ? "data_offsets" : NULL;
    if (missing)
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE, "entry '" VDEV_CKPT_QUOTE "' has no \"%s\"",
                               name, missing);

    e->name = name;
    if (!YAJL_IS_STRING(dtype))
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                               "entry '" VDEV_CKPT_QUOTE "': dtype is not a string", name);
    size_t d;
    for (d = 0; d < VDEV_ARRAY_LEN(DTYPES); d++)
        if (!strcmp(dtype->u.string, DTYPES[d].name))
            break;
    if (d == VDEV_ARRAY_LEN(DTYPES))
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                               "entry '" VDEV_CKPT_QUOTE "': unknown dtype \"%.20s\"", name,
                               dtype->u.string);
    e->dtype_name = DTYPES[d].name;
    e->elem_bytes = DTYPES[d].bytes;
    e->dtype = DTYPES[d].dtype;

    if (!YAJL_IS_ARRAY(shape))
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                               "entry '" VDEV_CKPT_QUOTE "': shape is not an array", name);
    e->ndim = (int)shape->u.array.len;
    e->shape = dims;
    uint64_t numel = 1;
    int overflow = 0;
    for (int i = 0; i < e->ndim; i++) {
        uint64_t s;
        if (!get_u64(shape->u.array.values[i], &s))
            return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                                   "entry '" VDEV_CKPT_QUOTE "': shape holds %.40s, not a size",
                                   name, shown(shape->u.array.values[i]));
        dims[i] = (int64_t)s;
        overflow |= __builtin_mul_overflow(numel, s, &numel);
    }
    uint64_t bytes = 0;
    overflow |= __builtin_mul_overflow(numel, (uint64_t)e->elem_bytes, &bytes);

    if (!YAJL_IS_ARRAY(offs) || offs->u.array.len != 2)
        return vdev_dist_ckerr(
            path, VDEV_ERR_PARSE,
            "entry '" VDEV_CKPT_QUOTE "': data_offsets is not an array of two numbers", name);
    for (int i = 0; i < 2; i++)
        if (!get_u64(offs->u.array.values[i], i ? &e->end : &e->begin))
            return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                                   "entry '" VDEV_CKPT_QUOTE
                                   "': data_offsets holds %.40s, not an offset",
                                   name, shown(offs->u.array.values[i]));
    if (e->begin > e->end)
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                               "entry '" VDEV_CKPT_QUOTE
                               "': data_offsets [%llu, %llu] end before they begin",
                               name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > ck->data_bytes)
        return vdev_dist_ckloss(
            path,
            "entry '" VDEV_CKPT_QUOTE "' ends at byte %llu of the data, but the file "
            "holds %llu bytes of data (truncated?)",
            name, (unsigned long long)e->end, (unsigned long long)ck->data_bytes);
    if (overflow || e->end - e->begin != bytes)
        return vdev_dist_ckerr(
            path, VDEV_ERR_PARSE,
            "entry '" VDEV_CKPT_QUOTE "': data_offsets [%llu, %llu] hold %llu bytes, "
            "but its shape and dtype %s need %s%llu",
            name, (unsigned long long)e->begin, (unsigned long long)e->end,
            (unsigned long long)(e->end - e->begin), e->dtype_name, overflow ? "more than " : "",
            overflow ? (unsigned long long)UINT64_MAX : (unsigned long long)bytes);
    return VDEV_OK;
}

static enum vdev_status parse_metadata(struct vdev_checkpoint *ck, yajl_val v) {
    const char *path = ck->path;
    if (!YAJL_IS_OBJECT(v))
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE, "__metadata__ is not a JSON object");
    size_t n = v->u.object.len;
    if (n > INT32_MAX)
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE, "__metadata__ has too many keys");
    ck->n_meta = (int)n;
    ck->meta_keys = vdev_dist_malloc(n * sizeof *ck->meta_keys);
    ck->meta_values = vdev_dist_malloc(n * sizeof *ck->meta_values);
    if (!ck->meta_keys || !ck->meta_values)
        return vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for %zu metadata keys", n);
    const char *format = NULL, *crc = NULL;
    for (size_t k = 0; k < n; k++) {
        const char *key = v->u.object.keys[k];
        yajl_val val = v->u.object.values[k];
        if (!YAJL_IS_STRING(val))
            return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                                   "metadata value of '" VDEV_CKPT_QUOTE "' is not a string", key);
        ck->meta_keys[k] = key;
        ck->meta_values[k] = val->u.string;
        if (!strcmp(key, "vdev.format"))
            format = val->u.string;
        else if (!strcmp(key, "vdev.crc32"))
            crc = val->u.string;
    }
    int oom;
    const char *dup = vdev_dist_find_duplicate(ck->meta_keys, ck->n_meta, &oom);
    if (oom)
        return vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory to check %d metadata keys",
                               ck->n_meta);
    if (dup)
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                               "metadata key '" VDEV_CKPT_QUOTE "' appears twice", dup);
    /* A file of another program has neither key, and no checksum. Either key
     * alone means damage to the other one's name: the CRC is still checked. */
    if (format && strcmp(format, VDEV_CKPT_FORMAT) != 0)
        return vdev_dist_ckerr(path, VDEV_ERR_UNSUPPORTED,
                               "vdev.format is \"%.20s\"; this vdev reads format " VDEV_CKPT_FORMAT,
                               format);
    if (format && !crc)
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                               "vdev.format is set but vdev.crc32 is missing");
    if (!crc)
        return VDEV_OK;
    uint32_t x;
    if (!vdev_dist_parse_hex8(crc, &x))
        return vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                               "vdev.crc32 is \"%.20s\", not 8 lowercase hex digits", crc);
    ck->has_crc = 1;
    ck->crc = x;
    return VDEV_OK;
}

/* Orders by (begin, end, name): empty entries sit where they point. */
static int cmp_entry(const void *a, const void *b) {
    const struct vdev_ckpt_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const struct vdev_ckpt_name *)a)->name,
                  ((const struct vdev_ckpt_name *)b)->name);
}

/* The ranges, sorted, must tile [0, data_bytes). */
static enum vdev_status check_tiling(const struct vdev_checkpoint *ck) {
    uint64_t at = 0;
    const char *prev = NULL;
    for (int i = 0; i < ck->n_entries; i++) {
        const struct vdev_ckpt_entry *e = &ck->entries[i];
        if (e->begin < at)
            return vdev_dist_ckerr(
                ck->path, VDEV_ERR_PARSE,
                "entries '" VDEV_CKPT_QUOTE "' and '" VDEV_CKPT_QUOTE "' overlap", prev, e->name);
        if (e->begin > at)
            return vdev_dist_ckerr(
                ck->path, VDEV_ERR_PARSE,
                "a gap of %llu byte%s in the data before entry '" VDEV_CKPT_QUOTE "'",
                (unsigned long long)(e->begin - at), e->begin - at == 1 ? "" : "s", e->name);
        if (e->end > e->begin) {
            at = e->end;
            prev = e->name;
        }
    }
    if (at == ck->data_bytes)
        return VDEV_OK;
    unsigned long long extra = ck->data_bytes - at;
    const char *s = extra == 1 ? "" : "s";
    /* Bytes after a file vdev wrote (it has vdev.crc32) are damage, as a
     * truncation is; another program's file may just be laid out wrongly. */
    if (ck->has_crc)
        return vdev_dist_ckloss(ck->path, "%llu byte%s of data after the last entry", extra, s);
    return vdev_dist_ckerr(ck->path, VDEV_ERR_PARSE, "%llu byte%s of data after the last entry",
                           extra, s);
}

enum vdev_status vdev_dist_ckpt_parse(const char *path, const char *text, uint64_t n,
                                      uint64_t file_bytes, struct vdev_checkpoint **out) {
    *out = NULL;
    /* The header's own CRC first, on the raw bytes (ckpt_hcrc.c): damage to
     * a header vdev wrote is data loss, whatever else it breaks. */
    int verified = 0;
    enum vdev_status st = vdev_dist_ckpt_check_raw_hcrc(path, text, n, &verified);
    if (st != VDEV_OK)
        return st;
    if ((st = prescan(path, text, n)) != VDEV_OK)
        return st;
    struct vdev_checkpoint *ck = vdev_dist_malloc(sizeof *ck);
    if (!ck)
        return vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory to read the header");
    memset(ck, 0, sizeof *ck);
    size_t plen = strlen(path);
    ck->path = vdev_dist_malloc(plen + 1);
    if (!ck->path) {
        st = vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory to read the header");
        goto fail;
    }
    memcpy(ck->path, path, plen + 1);
    ck->file_bytes = file_bytes;
    ck->header_bytes = n;
    ck->data_bytes = file_bytes - 8 - n;

    char yerr[256] = "";
    ck->root = yajl_tree_parse(text, yerr, sizeof yerr);
    if (!ck->root) {
        yerr[strcspn(yerr, "\n")] = '\0';
        st = vdev_dist_ckerr(path, strstr(yerr, "memory") ? VDEV_ERR_OOM : VDEV_ERR_PARSE,
                             "the header is not valid JSON: %s", yerr);
        goto fail;
    }
    yajl_val root = ck->root;
    if (!YAJL_IS_OBJECT(root)) { /* unreachable after prescan, kept for safety */
        st = vdev_dist_ckerr(path, VDEV_ERR_PARSE, "the header is not a JSON object");
        goto fail;
    }
    if (!verified && (st = vdev_dist_ckpt_check_hcrc(path, root, text, n)) != VDEV_OK)
        goto fail;

    /* Count entries and their dimensions, then fill. */
    size_t n_entries = 0, n_dims = 0, n_meta_objs = 0;
    for (size_t k = 0; k < root->u.object.len; k++) {
        if (!strcmp(root->u.object.keys[k], "__metadata__")) {
            n_meta_objs++;
            continue;
        }
        n_entries++;
        yajl_val v = root->u.object.values[k];
        for (size_t f = 0; YAJL_IS_OBJECT(v) && f < v->u.object.len; f++)
            if (!strcmp(v->u.object.keys[f], "shape") && YAJL_IS_ARRAY(v->u.object.values[f]))
                n_dims += v->u.object.values[f]->u.array.len;
    }
    if (n_meta_objs > 1) {
        st = vdev_dist_ckerr(path, VDEV_ERR_PARSE, "key '__metadata__' appears twice");
        goto fail;
    }
    if (n_entries > INT32_MAX) {
        st = vdev_dist_ckerr(path, VDEV_ERR_PARSE, "the header has too many entries");
        goto fail;
    }
    ck->entries = vdev_dist_malloc(n_entries * sizeof *ck->entries);
    ck->by_name = vdev_dist_malloc(n_entries * sizeof *ck->by_name);
    ck->dims = vdev_dist_malloc(n_dims * sizeof *ck->dims);
    if (!ck->entries || !ck->by_name || !ck->dims) {
        st = vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for %zu entries", n_entries);
        goto fail;
    }
    size_t at_dim = 0;
    for (size_t k = 0; k < root->u.object.len; k++) {
        const char *key = root->u.object.keys[k];
        yajl_val v = root->u.object.values[k];
        if (!strcmp(key, "__metadata__")) {
            st = parse_metadata(ck, v);
        } else {
            struct vdev_ckpt_entry *e = &ck->entries[ck->n_entries];
            st = parse_entry(ck, key, v, e, ck->dims + at_dim);
            if (st == VDEV_OK) {
                at_dim += (size_t)e->ndim;
                ck->n_entries++;
            }
        }
        if (st != VDEV_OK)
            goto fail;
    }

    /* Sorted by offset; then unique names (checked before the tiling: a
     * repeated name usually overlaps too). */
    qsort(ck->entries, (size_t)ck->n_entries, sizeof *ck->entries, cmp_entry);
    for (int i = 0; i < ck->n_entries; i++)
        ck->by_name[i] = (struct vdev_ckpt_name){ck->entries[i].name, i};
    qsort(ck->by_name, (size_t)ck->n_entries, sizeof *ck->by_name, cmp_name);
    for (int i = 1; i < ck->n_entries; i++)
        if (!strcmp(ck->by_name[i - 1].name, ck->by_name[i].name)) {
            st = vdev_dist_ckerr(path, VDEV_ERR_PARSE, "entry '" VDEV_CKPT_QUOTE "' appears twice",
                                 ck->by_name[i].name);
            goto fail;
        }
    st = check_tiling(ck);
    if (st != VDEV_OK)
        goto fail;
    *out = ck;
    return VDEV_OK;
fail:
    vdev_dist_ckpt_free(ck);
    return st;
}

void vdev_dist_ckpt_free(struct vdev_checkpoint *ck) {
    if (!ck)
        return;
    if (ck->root)
        yajl_tree_free(ck->root);
    free(ck->entries);
    free(ck->by_name);
    free(ck->dims);
    free(ck->meta_keys);
    free(ck->meta_values);
    free(ck->path);
    free(ck);
}

int vdev_dist_ckpt_find(const struct vdev_checkpoint *ck, const char *name) {
    struct vdev_ckpt_name key = {name, -1};
    const struct vdev_ckpt_name *hit =
        bsearch(&key, ck->by_name, (size_t)ck->n_entries, sizeof key, cmp_name);
    return hit ? hit->entry : -1;
}

/* ---- writing ---- */

/* A growing string that remembers its first failure. */
struct sbuf {
    char *p;
    size_t n, cap;
    enum vdev_status st; /* VDEV_OK, VDEV_ERR_OOM or VDEV_ERR_INVALID_ARG (too long) */
};

static void add(struct sbuf *b, const char *s, size_t n) {
    if (b->st != VDEV_OK)
        return;
    if (n > VDEV_CKPT_HEADER_MAX - b->n) {
        b->st = VDEV_ERR_INVALID_ARG;
        return;
    }
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n)
            cap *= 2;
        char *p = vdev_dist_realloc(b->p, cap);
        if (!p) {
            b->st = VDEV_ERR_OOM;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void adds(struct sbuf *b, const char *s) { add(b, s, strlen(s)); }

/* A JSON string: quotes, backslashes and control characters escaped; the
 * rest (valid UTF-8, checked by the caller) as it is. */
static void add_json_string(struct sbuf *b, const char *s) {
    add(b, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        add(b, run, (size_t)(s - run));
        char esc[8];
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else
            snprintf(esc, sizeof esc, "\\u%04x", c);
        adds(b, esc);
        run = s + 1;
    }
    add(b, run, (size_t)(s - run));
    add(b, "\"", 1);
}

enum vdev_status vdev_dist_ckpt_build_header(const struct vdev_ckpt_out_entry *e, int n,
                                             const char *const *meta, int n_meta, char **out,
                                             size_t *n_out) {
    struct sbuf b = {0};
    char num[64];
    *out = NULL;
    adds(&b, VDEV_CKPT_HEAD1 "00000000" VDEV_CKPT_HEAD2 "00000000\"");
    for (int i = 0; i < n_meta; i++) {
        adds(&b, ",");
        add_json_string(&b, meta[2 * i]);
        adds(&b, ":");
        add_json_string(&b, meta[2 * i + 1]);
    }
    adds(&b, "}");
    for (int i = 0; i < n; i++) {
        adds(&b, ",");
        add_json_string(&b, e[i].name);
        adds(&b, ":{\"dtype\":\"");
        adds(&b, vdev_dist_ckpt_dtype_name(e[i].dtype));
        adds(&b, "\",\"shape\":[");
        for (int d = 0; d < e[i].ndim; d++) {
            snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)e[i].shape[d]);
            adds(&b, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)e[i].begin,
                 (unsigned long long)e[i].end);
        adds(&b, num);
    }
    adds(&b, "}");
    while (b.st == VDEV_OK && b.n % 8)
        adds(&b, " ");
    if (b.st != VDEV_OK) {
        free(b.p);
        return b.st == VDEV_ERR_OOM
                   ? vdev_error(VDEV_ERR_OOM, "no host memory for the header")
                   : vdev_error(VDEV_ERR_INVALID_ARG,
                                "the header would be larger than the format's limit of %llu "
                                "bytes (too many or too long names and metadata)",
                                VDEV_CKPT_HEADER_MAX);
    }
    *out = b.p;
    *n_out = b.n;
    return VDEV_OK;
}
