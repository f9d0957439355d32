/* checkpoint.c — saving and restoring named tensors in the safetensors
 * format (see vdev/checkpoint.h for the file and the guarantees).
 *
 * Save checks every argument first, finds what it replaces (ckpt_file.c:
 * refused unless it is a regular file or nothing; symbolic links followed),
 * lays the entries out one after another in the caller's order, and builds
 * the header with placeholder CRCs. It then writes a temporary file beside
 * the target: the header, then each tensor as it comes off its device (one
 * tensor's bytes on the host at a time), folding the bytes into zlib's CRC-32
 * as they go; it patches the data's CRC and then the header's own CRC into
 * the header with pwrite, fsyncs, closes, renames over the target and fsyncs
 * the folder (the rename is the commit point: before it the old file is
 * untouched, after it the new one is complete). Any failure before the
 * rename removes the temporary file.
 *
 * Load reads and checks the header (ckpt_file.c, ckpt_format.c: the header's
 * CRC among the rest), matches every requested name, dtype and shape, then
 * reads the data in order, computing the CRC over all of it and staging each
 * requested entry in a CPU tensor from an aligned buffer (so entries at any
 * offset load). Only when the CRC matches does it copy the staged tensors
 * into the caller's tensors with vdev_assign, so a failure leaves them
 * unchanged; each tensor's old value is copied aside first, and put back
 * when a later copy fails (a tensor freed by another thread meanwhile, a
 * backend failure), so even a failure while the tensors are written leaves
 * every one as it was.
 *
 * Bool tensors, a 32-bit word an element in memory, are the format's "BOOL"
 * in the file, one byte an element (0 or 1): save packs the words into bytes
 * in its staging buffer, load checks every byte of a requested entry and
 * unpacks them into words (ckpt_format.c converts).
 *
 * Tensors are reached only through the public API (vdev_tensor_to_host,
 * vdev_tensor_from_host, vdev_assign and the accessors). Each system call and
 * allocation goes through the fault counter of checkpoint.h, so tests can
 * fail each one in turn. */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* files past 2 GiB on 32-bit hosts too */
#include "dist/checkpoint.h"
#include "tensor/tensor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define Q VDEV_CKPT_QUOTE

/* Data is little-endian in the file: big-endian hosts swap 4-byte words. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
static void to_from_le32(void *p, uint64_t bytes) {
    uint32_t *w = p;
    for (uint64_t i = 0; i < bytes / 4; i++)
        w[i] = __builtin_bswap32(w[i]);
}
#else
static void to_from_le32(void *p, uint64_t bytes) {
    VDEV_UNUSED(p);
    VDEV_UNUSED(bytes);
}
#endif

#define SYS VDEV_CKPT_SYS

/* ---- reading a header, for tools ---- */

VDEV_API enum vdev_status vdev_checkpoint_open(const char *path, vdev_checkpoint_t **out) {
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_checkpoint_open: out is NULL");
    *out = NULL;
    if (!path)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_checkpoint_open: path is NULL");
    int fd;
    enum vdev_status st = vdev_dist_ckpt_read_header(path, &fd, out);
    if (st == VDEV_OK)
        close(fd);
    return st;
}

VDEV_API void vdev_checkpoint_close(vdev_checkpoint_t *ck) { vdev_dist_ckpt_free(ck); }

VDEV_API int vdev_checkpoint_n_entries(const vdev_checkpoint_t *ck) {
    if (!ck) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_checkpoint_n_entries: checkpoint is NULL");
        return -1;
    }
    return ck->n_entries;
}

VDEV_API enum vdev_status vdev_checkpoint_entry(const vdev_checkpoint_t *ck, int i,
                                                struct vdev_checkpoint_entry *out) {
    if (!ck || !out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_checkpoint_entry: %s is NULL",
                          ck ? "out" : "checkpoint");
    if (i < 0 || i >= ck->n_entries)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_checkpoint_entry: index %d is outside 0..%d",
                          i, ck->n_entries - 1);
    const struct vdev_ckpt_entry *e = &ck->entries[i];
    *out = (struct vdev_checkpoint_entry){
        .name = e->name,
        .dtype_name = e->dtype_name,
        .dtype = (enum vdev_dtype)e->dtype,
        .ndim = e->ndim,
        .shape = e->shape,
        .offset_bytes = e->begin,
        .size_bytes = e->end - e->begin,
    };
    return VDEV_OK;
}

VDEV_API int vdev_checkpoint_n_metadata(const vdev_checkpoint_t *ck) {
    if (!ck) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_checkpoint_n_metadata: checkpoint is NULL");
        return -1;
    }
    return ck->n_meta;
}

VDEV_API enum vdev_status vdev_checkpoint_metadata_at(const vdev_checkpoint_t *ck, int i,
                                                      const char **key, const char **value) {
    if (!ck || !key || !value)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_checkpoint_metadata_at: %s is NULL",
                          !ck    ? "checkpoint"
                          : !key ? "key"
                                 : "value");
    if (i < 0 || i >= ck->n_meta)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "vdev_checkpoint_metadata_at: index %d is outside 0..%d", i,
                          ck->n_meta - 1);
    *key = ck->meta_keys[i];
    *value = ck->meta_values[i];
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_checkpoint_metadata(const char *path, const char *key, char *buf,
                                                   size_t cap) {
    if (!path || !key || (!buf && cap))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_checkpoint_metadata: %s is NULL",
                          !path  ? "path"
                          : !key ? "key"
                                 : "buf");
    vdev_checkpoint_t *ck;
    enum vdev_status st = vdev_checkpoint_open(path, &ck);
    if (st != VDEV_OK)
        return st;
    int i = 0;
    while (i < ck->n_meta && strcmp(ck->meta_keys[i], key) != 0)
        i++;
    if (i == ck->n_meta) { /* not NOT_FOUND, which means "no file": see checkpoint.h */
        st = vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG, "no metadata key '" Q "'", key);
    } else {
        size_t len = strlen(ck->meta_values[i]);
        if (len + 1 > cap)
            st = vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                                 "the value of '" Q "' needs %zu bytes, buf holds %zu", key,
                                 len + 1, cap);
        else
            memcpy(buf, ck->meta_values[i], len + 1);
    }
    vdev_dist_ckpt_free(ck);
    return st;
}

/* ---- shared checks ---- */

/* "[2, 3]" (at most 8 sizes, then ", ..."), for messages. */
static const char *shape_str(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t at = 0;
    at += (size_t)snprintf(buf + at, cap - at, "[");
    for (int i = 0; i < ndim && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, i == 8 ? ", ..." : "%s%lld", i ? ", " : "",
                               (long long)shape[i]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
    return buf;
}

/* A tensor name or metadata key: what = "names" or "metadata key"; i its index. */
static enum vdev_status check_name(const char *path, const char *what, int i, const char *s) {
    if (!s)
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG, "%s[%d] is NULL", what, i);
    size_t len = strlen(s);
    if (!len)
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG, "%s[%d] is empty", what, i);
    if (len > VDEV_CHECKPOINT_NAME_MAX)
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                               "%s[%d] '%.40s...' is %zu bytes long, more than %d", what, i, s, len,
                               VDEV_CHECKPOINT_NAME_MAX);
    if (!vdev_dist_utf8_valid(s, len))
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG, "%s[%d] is not valid UTF-8", what, i);
    if (!strcmp(s, "__metadata__"))
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                               "%s[%d] is '__metadata__', which the format reserves", what, i);
    return VDEV_OK;
}

/* A tensor argument: NULL or dead is an error naming it. */
static enum vdev_status check_tensor(const char *path, int i, const char *name,
                                     const vdev_tensor_t *t) {
    if (!t)
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG, "tensors[%d] ('" Q "') is NULL", i,
                               name);
    if (!vdev_tens_peek(t))
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                               "tensors[%d] ('" Q "') is not a live tensor", i, name);
    if (!vdev_tens_current(vdev_tens_peek(t)))
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                               "tensors[%d] ('" Q "') belongs to a runtime that was shut down "
                               "(made before vdev_shutdown)",
                               i, name);
    enum vdev_dtype dt = vdev_tensor_dtype(t);
    if (dt != VDEV_F32 && dt != VDEV_I32 && dt != VDEV_BOOL)
        return vdev_dist_ckerr(path, VDEV_ERR_UNSUPPORTED,
                               "tensors[%d] ('" Q "') has a dtype the format has no name for", i,
                               name);
    return VDEV_OK;
}

/* "entry" or "entries", after a count n. */
static const char *entries(int64_t n) { return n == 1 ? "entry" : "entries"; }

/* ---- save ---- */

/* Every argument of a save, before anything is written. */
static enum vdev_status check_save_args(const char *path, const char *const *names,
                                        vdev_tensor_t *const *tensors, int n,
                                        const char *const *metadata, int n_metadata) {
    if (n < 0 || n_metadata < 0)
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                               "n = %d, n_metadata = %d: counts cannot be negative", n, n_metadata);
    if (n > 0 && (!names || !tensors))
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG, "%s is NULL",
                               !names ? "names" : "tensors");
    if (n_metadata > 0 && !metadata)
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG, "metadata is NULL");
    enum vdev_status st;
    for (int i = 0; i < n; i++) {
        if ((st = check_name(path, "names", i, names[i])) != VDEV_OK ||
            (st = check_tensor(path, i, names[i], tensors[i])) != VDEV_OK)
            return st;
    }
    for (int i = 0; i < n_metadata; i++) {
        const char *key = metadata[2 * i], *value = metadata[2 * i + 1];
        if ((st = check_name(path, "metadata", 2 * i, key)) != VDEV_OK)
            return st;
        if (!strncmp(key, "vdev.", 5))
            return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                                   "metadata key '" Q "' starts with \"vdev.\", which vdev "
                                   "reserves",
                                   key);
        if (!value)
            return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                                   "metadata[%d], the value of '" Q "', is NULL", 2 * i + 1, key);
        if (!vdev_dist_utf8_valid(value, strlen(value)))
            return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                                   "metadata[%d], the value of '" Q "', is not valid UTF-8",
                                   2 * i + 1, key);
    }
    int oom = 0;
    const char *dup = vdev_dist_find_duplicate(names, n, &oom);
    if (dup)
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG, "the name '" Q "' is given twice", dup);
    const char **keys = oom ? NULL : vdev_dist_malloc((size_t)n_metadata * sizeof *keys);
    if (!keys)
        return vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory to check the names");
    for (int i = 0; i < n_metadata; i++)
        keys[i] = metadata[2 * i];
    dup = vdev_dist_find_duplicate(keys, n_metadata, &oom);
    st = oom   ? vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory to check the names")
         : dup ? vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                                 "the metadata key '" Q "' is given twice", dup)
               : VDEV_OK;
    free(keys);
    return st;
}

static _Thread_local struct {
    void (*fn)(void *);
    void *arg;
} save_hook; /* vdev_dist_checkpoint_save_hook */

void vdev_dist_checkpoint_save_hook(void (*fn)(void *), void *arg) {
    save_hook.fn = fn;
    save_hook.arg = arg;
}

VDEV_API enum vdev_status vdev_checkpoint_save(const char *path, const char *const *names,
                                               vdev_tensor_t *const *tensors, int n,
                                               const char *const *metadata, int n_metadata) {
    if (vdev_runtime_forked_from()) /* the tensors' values are on the parent's devices */
        return vdev_runtime_forked_error("vdev_checkpoint_save");
    if (!path || !*path)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_checkpoint_save: path is %s",
                          path ? "empty" : "NULL");
    enum vdev_status st = check_save_args(path, names, tensors, n, metadata, n_metadata);
    if (st != VDEV_OK)
        return st;

    /* What the save replaces: refused unless it is a regular file or nothing. */
    struct vdev_ckpt_target target;
    if ((st = vdev_dist_ckpt_target(path, &target)) != VDEV_OK)
        return st;
    struct vdev_ckpt_out_entry *oe = NULL;
    char *header = NULL, *tmp = NULL;
    void *buf = NULL;
    int fd = -1;

    if (save_hook.fn) /* tests: something happens after the checks */
        save_hook.fn(save_hook.arg);

    /* Lay the entries out one after another, in the caller's order. */
    oe = vdev_dist_malloc((size_t)n * sizeof *oe);
    if (!oe) {
        st = vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for %d %s", n, entries(n));
        goto fail;
    }
    uint64_t at = 0, max_bytes = 0;
    for (int i = 0; i < n; i++) {
        /* Each accessor gives the tensor's own value or, once another thread
         * freed it (the caller's race), -1 (VDEV_DTYPE_COUNT): read as a
         * size, that -1 was 2^64 - 4 bytes, an absurd out-of-memory error. */
        const vdev_tensor_t *t = tensors[i];
        int64_t numel = vdev_tensor_numel(t);
        oe[i].name = names[i];
        oe[i].dtype = vdev_tensor_dtype(t);
        oe[i].ndim = vdev_tensor_ndim(t);
        int dead = numel < 0 || oe[i].ndim < 0 || oe[i].dtype == VDEV_DTYPE_COUNT;
        for (int d = 0; d < oe[i].ndim; d++)
            dead |= (oe[i].shape[d] = vdev_tensor_dim(t, d)) < 0;
        if (dead) {
            st = vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                                 "tensors[%d] ('" Q "') is not a live tensor (freed by another "
                                 "thread during the save)",
                                 i, names[i]);
            goto fail;
        }
        /* in the file: a bool's word is one byte (vdev_dist_ckpt_pack_bools) */
        uint64_t bytes = (uint64_t)numel * vdev_dist_ckpt_elem_bytes(oe[i].dtype);
        oe[i].begin = at;
        at += bytes;
        oe[i].end = at;
        if ((uint64_t)numel * 4 > max_bytes) /* on the host, 4 bytes an element */
            max_bytes = (uint64_t)numel * 4;
    }
    size_t header_len;
    st = vdev_dist_ckpt_build_header(oe, n, metadata, n_metadata, &header, &header_len);
    if (st != VDEV_OK) {
        vdev_error_prefix("checkpoint '" Q "'", path);
        goto fail;
    }
    /* one tensor's bytes at a time (none when every tensor is empty) */
    buf = max_bytes ? vdev_dist_malloc((size_t)max_bytes) : NULL;
    if (max_bytes && !buf) {
        st = vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for a tensor of %llu bytes",
                             (unsigned long long)max_bytes);
        goto fail;
    }

    /* The temporary file, in the target's folder so the rename stays there. */
    if ((st = vdev_dist_ckpt_create_temp(path, &target, &tmp, &fd)) != VDEV_OK)
        goto fail; /* nothing to remove */

    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
    if (vdev_dist_write_all(fd, len8, 8, -1) != 0 ||
        vdev_dist_write_all(fd, header, header_len, -1) != 0)
        goto write_error;
    uLong crc = crc32_z(0L, Z_NULL, 0);
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)(oe[i].end - oe[i].begin);
        if (!bytes)
            continue;
        int is_bool = oe[i].dtype == VDEV_BOOL;
        size_t host_bytes = is_bool ? bytes * 4 : bytes;
        st = vdev_dist_fault() ? vdev_error(VDEV_ERR_BACKEND, "copy failed (injected fault)")
                               : vdev_tensor_to_host(tensors[i], buf, host_bytes);
        if (st != VDEV_OK) {
            vdev_error_prefix("checkpoint '" Q "': copying tensors[%d] ('" Q "') to the host", path,
                              i, names[i]);
            goto fail;
        }
        if (is_bool)
            vdev_dist_ckpt_pack_bools(buf, bytes);
        else
            to_from_le32(buf, bytes);
        crc = crc32_z(crc, buf, bytes);
        if (vdev_dist_write_all(fd, buf, bytes, -1) != 0)
            goto write_error;
    }
    /* Both CRCs, which sit next to each other at the header's start. */
    vdev_dist_ckpt_seal_header(header, header_len, (uint32_t)(crc & 0xffffffffu));
    if (vdev_dist_write_all(fd, header + VDEV_CKPT_CRC_AT, VDEV_CKPT_HCRC_AT + 8 - VDEV_CKPT_CRC_AT,
                            (long long)(8 + VDEV_CKPT_CRC_AT)) != 0)
        goto write_error;
    if (SYS(fsync(fd)) != 0) {
        st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot sync '" Q "': %s", tmp, strerror(errno));
        goto fail;
    }
    int rc = close(fd); /* closed even when it reports an error */
    fd = -1;
    if (vdev_dist_fault())
        rc = -1, errno = EIO;
    if (rc != 0) {
        st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot close '" Q "': %s", tmp, strerror(errno));
        goto fail;
    }
    if (SYS(rename(tmp, target.path)) != 0) {
        st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot rename '" Q "' over '" Q "': %s", tmp,
                             target.path, strerror(errno));
        goto fail;
    }
    free(tmp);
    tmp = NULL; /* renamed: nothing to remove from here on */

    /* Make the rename durable. A folder that cannot be synced (EINVAL: the
     * file system does not sync folders) is not an error. */
    int dfd = SYS(open(target.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    int synced = dfd >= 0 && (SYS(fsync(dfd)) == 0 || errno == EINVAL);
    int e = errno;
    if (dfd >= 0)
        close(dfd);
    if (!synced)
        st = vdev_dist_ckerr(path, VDEV_ERR_IO,
                             "the new checkpoint is in place, but its folder '" Q "' could not "
                             "be synced: %s",
                             target.dir, strerror(e));
    goto done;

write_error:
    st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot write '" Q "': %s", tmp, strerror(errno));
fail:
    if (fd >= 0)
        close(fd);
    if (tmp)
        unlink(tmp);
done:
    vdev_dist_ckpt_target_free(&target);
    free(tmp);
    free(buf);
    free(header);
    free(oe);
    return st;
}

/* ---- load ---- */

struct tensor_ix {
    const vdev_tensor_t *t;
    int i;
};

static int cmp_tensor_ix(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const struct tensor_ix *)a)->t;
    uintptr_t y = (uintptr_t)((const struct tensor_ix *)b)->t;
    return x < y ? -1 : x > y;
}

/* Every argument of a load, before the file is opened. */
static enum vdev_status check_load_args(const char *path, const char *const *names,
                                        vdev_tensor_t *const *tensors, int n) {
    if (n < 0)
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG, "n = %d cannot be negative", n);
    if (n > 0 && (!names || !tensors))
        return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG, "%s is NULL",
                               !names ? "names" : "tensors");
    for (int i = 0; i < n; i++) {
        if (!names[i])
            return vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG, "names[%d] is NULL", i);
        enum vdev_status st = check_tensor(path, i, names[i], tensors[i]);
        if (st != VDEV_OK)
            return st;
    }
    if (n < 2)
        return VDEV_OK;
    /* One tensor under two names would get whichever came last. */
    struct tensor_ix *p = vdev_dist_malloc((size_t)n * sizeof *p);
    if (!p)
        return vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory to check the tensors");
    for (int i = 0; i < n; i++)
        p[i] = (struct tensor_ix){tensors[i], i};
    qsort(p, (size_t)n, sizeof *p, cmp_tensor_ix);
    enum vdev_status st = VDEV_OK;
    for (int k = 1; k < n && st == VDEV_OK; k++) {
        int a = p[k - 1].i < p[k].i ? p[k - 1].i : p[k].i;
        int b = p[k - 1].i < p[k].i ? p[k].i : p[k - 1].i;
        if (p[k - 1].t == p[k].t && strcmp(names[a], names[b]) != 0)
            st = vdev_dist_ckerr(path, VDEV_ERR_INVALID_ARG,
                                 "tensors[%d] and tensors[%d] are one tensor under two names, '" Q
                                 "' and '" Q "'",
                                 a, b, names[a], names[b]);
    }
    free(p);
    return st;
}

/* The entry for tensors[i], or an error saying what differs. */
static enum vdev_status match_entry(const struct vdev_checkpoint *ck, int i, const char *name,
                                    const vdev_tensor_t *t, int *entry) {
    int k = vdev_dist_ckpt_find(ck, name);
    if (k < 0) /* not NOT_FOUND, which means "no file": see checkpoint.h */
        return vdev_dist_ckerr(ck->path, VDEV_ERR_INVALID_ARG,
                               "no entry '" Q "' (asked for by names[%d]; the file has %d "
                               "entries)",
                               name, i, ck->n_entries);
    const struct vdev_ckpt_entry *e = &ck->entries[k];
    int ndim = vdev_tensor_ndim(t);
    int64_t shape[VDEV_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        shape[d] = vdev_tensor_dim(t, d);
    int same = e->dtype == (int)vdev_tensor_dtype(t) && e->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = e->shape[d] == shape[d];
    if (!same) {
        char s1[96], s2[96];
        return vdev_dist_ckerr(ck->path, VDEV_ERR_SHAPE,
                               "entry '" Q "' is %s %s in the file, but tensors[%d] is %s %s", name,
                               e->dtype_name, shape_str(e->shape, e->ndim, s1, sizeof s1), i,
                               vdev_dist_ckpt_dtype_name(vdev_tensor_dtype(t)),
                               shape_str(shape, ndim, s2, sizeof s2));
    }
    *entry = k;
    return VDEV_OK;
}

static _Thread_local int restore_fault; /* vdev_dist_checkpoint_fail_restore */
static _Thread_local struct {
    int n;
    void (*fn)(void *);
    void *arg;
} restore_hook; /* vdev_dist_checkpoint_restore_hook */

void vdev_dist_checkpoint_fail_restore(int n) { restore_fault = n > 0 ? n : 0; }

void vdev_dist_checkpoint_restore_hook(int n, void (*fn)(void *), void *arg) {
    restore_hook.n = n > 0 && fn ? n : 0;
    restore_hook.fn = fn;
    restore_hook.arg = arg;
}

/* vdev_assign(dst, src), or the injected failure of the restore's next copy. */
static enum vdev_status restore_copy(vdev_tensor_t *dst, const vdev_tensor_t *src) {
    if (restore_hook.n > 0 && --restore_hook.n == 0)
        restore_hook.fn(restore_hook.arg);
    if (restore_fault > 0 && --restore_fault == 0)
        return vdev_error(VDEV_ERR_BACKEND, "copy failed (injected fault)");
    return vdev_assign(dst, src);
}

/* Copies each staged entry into tensors[i], all or nothing: each tensor's
 * value is first copied aside (a CPU tensor: the placement is CPU:0 here),
 * and when a copy fails (the tensor was freed by another thread, a backend
 * failure), the tensors restored before it are put back. A staged entry is
 * freed once its last tensor has it, so the host holds about one copy of
 * the data at a time, not two. */
static enum vdev_status restore(const struct vdev_checkpoint *ck, const char *path,
                                const char *const *names, vdev_tensor_t *const *tensors, int n,
                                const int *entry_of, vdev_tensor_t **stage) {
    vdev_tensor_t **old = vdev_dist_malloc((size_t)n * sizeof *old + 1);
    int *uses = vdev_dist_malloc((size_t)ck->n_entries * sizeof *uses + 1);
    if (!old || !uses) {
        free(old);
        free(uses);
        return vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for %d tensor%s", n,
                               n == 1 ? "" : "s");
    }
    memset(old, 0, (size_t)n * sizeof *old);
    memset(uses, 0, (size_t)ck->n_entries * sizeof *uses);
    for (int i = 0; i < n; i++)
        uses[entry_of[i]]++;
    enum vdev_status st = VDEV_OK;
    int i = 0;
    for (; i < n; i++) {
        int k = entry_of[i];
        const struct vdev_ckpt_entry *e = &ck->entries[k];
        old[i] = vdev_tensor_zeros(e->shape, e->ndim, (enum vdev_dtype)e->dtype);
        if (!old[i] || (st = restore_copy(old[i], tensors[i])) != VDEV_OK) {
            st = vdev_last_status();
            vdev_error_prefix("checkpoint '" Q "': copying tensors[%d] ('" Q "') aside before "
                              "restoring it",
                              path, i, names[i]);
            vdev_tensor_free(old[i]);
            old[i] = NULL;
            break;
        }
        if ((st = restore_copy(tensors[i], stage[k])) != VDEV_OK) {
            vdev_error_prefix("checkpoint '" Q "': restoring tensors[%d] ('" Q "')", path, i,
                              names[i]);
            if (vdev_tens_peek(tensors[i]))
                i++; /* its value is put back too: the copy may have begun */
            break;
        }
        if (--uses[k] == 0) {
            vdev_tensor_free(stage[k]);
            stage[k] = NULL;
        }
    }
    if (st != VDEV_OK) {
        /* Put back, last first, what was restored. The error stays the
         * first failure's, with any failure to put a value back added. */
        char msg[512], why[512];
        vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
        int lost = -1;
        while (i-- > 0)
            if (restore_copy(tensors[i], old[i]) != VDEV_OK && lost < 0) {
                lost = i;
                vdev_strlcpy(why, vdev_last_error(), sizeof why);
            }
        if (lost >= 0)
            vdev_error(st, "%s; and putting tensors[%d] ('" Q "') back failed too, so it may "
                           "hold part of the checkpoint's value: %s",
                       msg, lost, names[lost], why);
        else
            vdev_error(st, "%s", msg);
    }
    for (int j = 0; j < n; j++)
        vdev_tensor_free(old[j]);
    free(old);
    free(uses);
    return st;
}

VDEV_API enum vdev_status vdev_checkpoint_load(const char *path, const char *const *names,
                                               vdev_tensor_t *const *tensors, int n) {
    if (vdev_runtime_forked_from()) /* the tensors' values are on the parent's devices */
        return vdev_runtime_forked_error("vdev_checkpoint_load");
    if (!path)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_checkpoint_load: path is NULL");
    enum vdev_status st = check_load_args(path, names, tensors, n);
    if (st != VDEV_OK)
        return st;
    struct vdev_checkpoint *ck = NULL;
    int fd = -1, pushed = 0;
    int *entry_of = NULL;
    vdev_tensor_t **stage = NULL;
    unsigned char *wanted = NULL;
    void *buf = NULL;
    st = vdev_dist_ckpt_read_header(path, &fd, &ck);
    if (st != VDEV_OK)
        return st;

    /* Names, dtypes and shapes. */
    entry_of = vdev_dist_malloc((size_t)n * sizeof *entry_of);
    stage = vdev_dist_malloc((size_t)ck->n_entries * sizeof *stage);
    if (stage) /* before anything can fail: the clean-up frees what it holds */
        memset(stage, 0, (size_t)ck->n_entries * sizeof *stage);
    if (!entry_of || !stage) {
        st = vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for %d %s", ck->n_entries,
                             entries(ck->n_entries));
        goto done;
    }
    for (int i = 0; i < n; i++)
        if ((st = match_entry(ck, i, names[i], tensors[i], &entry_of[i])) != VDEV_OK)
            goto done;

    /* One buffer holds any requested entry whole, as the host's words (a
     * BOOL entry's bytes are unpacked into 4 times as many); others pass
     * through in chunks. */
    uint64_t buf_bytes = ck->data_bytes < (1u << 20) ? ck->data_bytes : (1u << 20);
    for (int i = 0; i < n; i++) {
        const struct vdev_ckpt_entry *e = &ck->entries[entry_of[i]];
        uint64_t host = (e->end - e->begin) * (e->dtype == VDEV_BOOL ? 4 : 1);
        if (host > buf_bytes) /* no overflow: the entry lies within the file */
            buf_bytes = host;
    }
    buf = buf_bytes <= SIZE_MAX ? vdev_dist_malloc((size_t)buf_bytes) : NULL;
    if (!buf) {
        st = vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for %llu bytes of data",
                             (unsigned long long)buf_bytes);
        goto done;
    }
    wanted = vdev_dist_malloc((size_t)ck->n_entries);
    if (!wanted) {
        st = vdev_dist_ckerr(path, VDEV_ERR_OOM, "no host memory for %d %s", ck->n_entries,
                             entries(ck->n_entries));
        goto done;
    }
    memset(wanted, 0, (size_t)ck->n_entries);
    for (int i = 0; i < n; i++)
        wanted[entry_of[i]] = 1;
    if ((st = vdev_device_push("CPU:0")) != VDEV_OK) {
        vdev_error_prefix("checkpoint '" Q "': staging on CPU:0", path);
        goto done;
    }
    pushed = 1;

    /* The data, in order: the CRC over all of it, requested entries staged.
     * A requested BOOL entry holding a byte other than 0 or 1 is not staged;
     * the first such byte is reported once the CRC is known, so that damage
     * the CRC finds is called so. */
    uLong crc = crc32_z(0L, Z_NULL, 0);
    int bad_entry = -1;
    uint64_t bad_at = 0;
    unsigned bad_byte = 0;
    for (int k = 0; k < ck->n_entries; k++) {
        const struct vdev_ckpt_entry *e = &ck->entries[k];
        uint64_t left = e->end - e->begin;
        while (left) {
            size_t chunk = (size_t)(wanted[k] || left < buf_bytes ? left : buf_bytes);
            int64_t got = vdev_dist_read_all(fd, buf, chunk);
            if (got < 0) {
                st = vdev_dist_ckerr(path, VDEV_ERR_IO, "cannot read: %s", strerror(errno));
                goto done;
            }
            if ((uint64_t)got < chunk) { /* the file shrank after it was opened */
                st = vdev_dist_ckloss(path, "the file ends inside entry '" Q "' (truncated?)",
                                      e->name);
                goto done;
            }
            crc = crc32_z(crc, buf, chunk);
            left -= chunk;
        }
        if (!wanted[k] || bad_entry >= 0)
            continue;
        if (e->dtype == VDEV_BOOL) {
            uint64_t nb = e->end - e->begin, at = vdev_dist_ckpt_first_bad_bool(buf, nb);
            if (at < nb) {
                bad_entry = k;
                bad_at = at;
                bad_byte = ((const unsigned char *)buf)[at];
                continue;
            }
            vdev_dist_ckpt_unpack_bools(buf, nb);
        } else {
            to_from_le32(buf, e->end - e->begin);
        }
        if (vdev_dist_fault())
            vdev_error(VDEV_ERR_OOM, "no memory (injected fault)");
        else
            stage[k] = vdev_tensor_from_host(buf, e->shape, e->ndim, (enum vdev_dtype)e->dtype);
        if (!stage[k]) {
            vdev_error_prefix("checkpoint '" Q "': staging entry '" Q "' on CPU:0", path, e->name);
            st = vdev_last_status();
            goto done;
        }
    }
    if (ck->has_crc && (crc & 0xffffffffu) != ck->crc) {
        st = vdev_dist_ckloss(path,
                              "checksum mismatch: the data's CRC-32 is %08lx, the header says "
                              "%08lx",
                              (unsigned long)(crc & 0xffffffffu), (unsigned long)ck->crc);
        goto done;
    }
    if (bad_entry >= 0) {
        /* never written by vdev: damage in a file vdev wrote (one with a
         * CRC), else a file that breaks the format's rule for BOOL */
        const char *name = ck->entries[bad_entry].name;
        if (ck->has_crc)
            st = vdev_dist_ckloss(path, "entry '" Q "' is BOOL, but its element %llu is %u, "
                                        "not 0 or 1",
                                  name, (unsigned long long)bad_at, bad_byte);
        else
            st = vdev_dist_ckerr(path, VDEV_ERR_PARSE,
                                 "entry '" Q "' is BOOL, but its element %llu is %u, not 0 or 1",
                                 name, (unsigned long long)bad_at, bad_byte);
        goto done;
    }

    /* Everything checked: now, and only now, the tensors change. */
    st = restore(ck, path, names, tensors, n, entry_of, stage);
done:
    if (pushed)
        vdev_device_pop();
    for (int k = 0; stage && k < ck->n_entries; k++)
        vdev_tensor_free(stage[k]);
    free(stage);
    free(wanted);
    free(buf);
    free(entry_of);
    vdev_dist_ckpt_free(ck);
    close(fd);
    return st;
}
