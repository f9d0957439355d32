/* checkpoint.h — private to src/dist/: the parsed header of a safetensors
 * file, shared by the public calls (checkpoint.c), the format code
 * (ckpt_format.c) and the file code (ckpt_file.c); the header writer; the
 * file helpers (reading a header from a path, the target and temporary file
 * of a save); and a fault-injection hook that the tests use to fail the Nth
 * system call or allocation of a checkpoint call.
 *
 * A parsed header keeps yajl's tree alive: entry names and metadata strings
 * point into it, so parsing copies no strings. */
#ifndef VDEV_DIST_CHECKPOINT_H
#define VDEV_DIST_CHECKPOINT_H

#include "base/base.h"

#include <yajl/yajl_tree.h>

/* The largest header accepted, as the safetensors reference implementation
 * limits it (100 MB), so a hostile file cannot make the parser eat memory. */
#define VDEV_CKPT_HEADER_MAX 100000000ull
/* JSON nesting deeper than this is refused before yajl sees it: a valid
 * header nests 3 levels, and yajl frees its tree recursively. */
#define VDEV_CKPT_MAX_DEPTH 64
/* The value of "vdev.format" this version writes and reads. */
#define VDEV_CKPT_FORMAT "1"
/* How every header vdev writes starts: these two strings, each followed by 8
 * hex digits, the data's CRC-32 ("vdev.crc32") and then the header's own
 * ("vdev.header_crc32", computed with its 8 digits as "00000000"). The reader
 * finds the header's CRC at this place, so it covers every other byte. HEAD1
 * is HEAD_FMT, the format's value, then HEAD_CRC: a reader looks for the CRC
 * after the value the file has, so that a newer format with the same layout
 * is told apart from damage. */
#define VDEV_CKPT_HEAD_FMT "{\"__metadata__\":{\"vdev.format\":\""
#define VDEV_CKPT_HEAD_CRC "\",\"vdev.crc32\":\""
#define VDEV_CKPT_HEAD1 VDEV_CKPT_HEAD_FMT VDEV_CKPT_FORMAT VDEV_CKPT_HEAD_CRC
#define VDEV_CKPT_HCRC_KEY "vdev.header_crc32"
#define VDEV_CKPT_HEAD2 "\",\"" VDEV_CKPT_HCRC_KEY "\":\""
#define VDEV_CKPT_CRC_AT (sizeof VDEV_CKPT_HEAD1 - 1)
#define VDEV_CKPT_HCRC_AT (VDEV_CKPT_CRC_AT + 8 + sizeof VDEV_CKPT_HEAD2 - 1)

/* Messages quote names and paths at most this long. */
#define VDEV_CKPT_QUOTE "%.120s"

struct vdev_ckpt_entry {
    const char *name;       /* into the yajl tree */
    const char *dtype_name; /* static: "F32", "BF16", ... */
    int dtype;              /* enum vdev_dtype, VDEV_DTYPE_COUNT when vdev has none */
    unsigned elem_bytes;    /* bytes per element */
    int ndim;
    int64_t *shape;      /* ndim sizes, into vdev_checkpoint.dims */
    uint64_t begin, end; /* byte range in the data section */
};

struct vdev_ckpt_name {
    const char *name;
    int entry; /* index into vdev_checkpoint.entries */
};

struct vdev_checkpoint {
    char *path;            /* a copy, for messages */
    uint64_t file_bytes;   /* the file's size when it was read */
    uint64_t header_bytes; /* N: the JSON's length */
    uint64_t data_bytes;   /* file_bytes - 8 - N */
    yajl_val root;         /* owns every string below */
    int n_entries;
    struct vdev_ckpt_entry *entries; /* sorted by data offset */
    struct vdev_ckpt_name *by_name;  /* n_entries, sorted by name */
    int64_t *dims;                   /* every entry's shape, one after another */
    int n_meta;
    const char **meta_keys; /* n_meta of each, in the header's order */
    const char **meta_values;
    int has_crc; /* the file is vdev's: crc holds vdev.crc32 (the header's own
                  * CRC, vdev.header_crc32, is checked while parsing) */
    uint32_t crc;
};

/* Sets the error, "checkpoint '<path>': <message>", and returns code. */
enum vdev_status vdev_dist_ckerr(const char *path, enum vdev_status code, const char *fmt, ...)
    VDEV_PRINTF(3, 4);
/* What follows the quoted path in the message of a truncated or damaged file
 * (and of nothing else). */
#define VDEV_CKPT_DAMAGED "' is damaged: "
/* Sets the error of a file that is truncated or damaged, VDEV_ERR_IO with
 * "checkpoint '<path>' is damaged: <message>", and returns VDEV_ERR_IO. Every
 * such error is made here, so a caller tells data loss from the other file
 * errors by that one marker (Python raises DataLossError for it). */
enum vdev_status vdev_dist_ckloss(const char *path, const char *fmt, ...) VDEV_PRINTF(2, 3);

/* Parses and checks a header: `text` holds its n bytes plus a terminating
 * NUL; file_bytes is the file's size (8 + n <= file_bytes). Checks the JSON,
 * the types, the dtypes, every offset against the data's size, that entries
 * neither overlap nor leave gaps, unique names, and vdev's metadata keys.
 * Does not read the data. Messages start with "checkpoint '<path>': ". */
enum vdev_status vdev_dist_ckpt_parse(const char *path, const char *text, uint64_t n,
                                      uint64_t file_bytes, struct vdev_checkpoint **out);
void vdev_dist_ckpt_free(struct vdev_checkpoint *ck);
/* The index (into entries) of the entry called name, -1 if none. */
int vdev_dist_ckpt_find(const struct vdev_checkpoint *ck, const char *name);

/* 1 when s[0..n) is valid UTF-8 (no overlong forms, surrogates or code
 * points past U+10FFFF). */
int vdev_dist_utf8_valid(const char *s, size_t n);
/* The first name that occurs twice among names[0..n), NULL if none. Sets
 * *oom (and returns NULL) when it cannot allocate its scratch copy. */
const char *vdev_dist_find_duplicate(const char *const *names, int n, int *oom);

/* The format's name of a vdev dtype ("F32", "I32", "BOOL"; "no dtype" for a
 * value that is none, such as a freed tensor's VDEV_DTYPE_COUNT) and the
 * bytes of one element in the file: 4, 4 and 1, as a bool, a 32-bit word
 * in memory, is one byte in the file, 0 or 1 (checkpoint.c converts both
 * ways); 4 for none. */
const char *vdev_dist_ckpt_dtype_name(enum vdev_dtype dt);
unsigned vdev_dist_ckpt_elem_bytes(enum vdev_dtype dt);
/* BOOL's conversions, in place in a staging buffer. Pack: n 32-bit words at
 * p become n bytes at its start, 1 for a nonzero word (no vdev op makes a
 * bool word other than 0 or 1; another would be saved as 1, as a cast to
 * bool), else 0. Unpack: n bytes at p, each 0 or 1 (checked first with
 * vdev_dist_ckpt_first_bad_bool), become n words; p holds 4 n bytes. */
void vdev_dist_ckpt_pack_bools(void *p, uint64_t n);
void vdev_dist_ckpt_unpack_bools(void *p, uint64_t n);
/* The index of the first of the n bytes at p that is neither 0 nor 1; n if
 * none. */
uint64_t vdev_dist_ckpt_first_bad_bool(const void *p, uint64_t n);

/* ---- writing a header ---- */

struct vdev_ckpt_out_entry {
    const char *name;
    enum vdev_dtype dtype;
    int ndim;
    int64_t shape[VDEV_MAX_DIMS];
    uint64_t begin, end;
};

/* Builds the JSON header, padded with spaces to a multiple of 8 bytes, with
 * "00000000" in place of both CRCs (at VDEV_CKPT_CRC_AT and
 * VDEV_CKPT_HCRC_AT). *out is malloc'ed (the caller frees it); *n_out is its
 * length. VDEV_ERR_OOM, or VDEV_ERR_INVALID_ARG past VDEV_CKPT_HEADER_MAX. */
enum vdev_status vdev_dist_ckpt_build_header(const struct vdev_ckpt_out_entry *e, int n,
                                             const char *const *meta, int n_meta, char **out,
                                             size_t *n_out);
/* ---- the header's own CRC (ckpt_hcrc.c) ---- */

/* Writes the data's CRC into a built header, then the header's CRC over
 * all of its bytes (its own 8 digits as "00000000"). */
void vdev_dist_ckpt_seal_header(char *header, size_t n, uint32_t data_crc);
/* 1 when s is 8 lowercase hex digits, their value in *out. */
int vdev_dist_parse_hex8(const char *s, uint32_t *out);
/* Checks a header's own CRC on its raw n bytes, before anything parses
 * them: VDEV_OK, with *verified 1 when the CRC was found and matches (the
 * parsed check is then not needed); or the data-loss error of
 * vdev_dist_ckloss() when the header is vdev's and damaged (see ckpt_hcrc.c). */
enum vdev_status vdev_dist_ckpt_check_raw_hcrc(const char *path, const char *text, uint64_t n,
                                               int *verified);
/* The check once parsed, for a header the raw check did not verify: a
 * vdev.header_crc32 in the metadata that is not where vdev writes it is
 * damage (VDEV_ERR_IO, as above); one that is not 8 hex digits, VDEV_ERR_PARSE. */
enum vdev_status vdev_dist_ckpt_check_hcrc(const char *path, yajl_val root, const char *text,
                                           uint64_t n);
/* 1 when head[0..n), the bytes after a file's length field, start as vdev
 * writes a header (at least the bytes that name vdev, a few damaged at
 * most): a length field past all reason is then damage, not another kind of
 * file. */
int vdev_dist_ckpt_looks_vdev(const char *head, size_t n);

/* ---- files (ckpt_file.c) ---- */

/* Opens path and reads and checks its header; on VDEV_OK *fd is open at the
 * start of the data and *out holds the header. A path that is not a regular
 * file is refused before it is opened. No file is VDEV_ERR_NOT_FOUND. */
enum vdev_status vdev_dist_ckpt_read_header(const char *path, int *fd,
                                            struct vdev_checkpoint **out);

/* What a save to `path` replaces: `path` itself, or the file its symbolic
 * links lead to. */
struct vdev_ckpt_target {
    char *path;    /* the file to replace (malloc'ed) */
    char *dir;     /* its folder, where the temporary file goes (malloc'ed) */
    int exists;    /* a regular file is there: mode, uid and gid are its */
    unsigned mode; /* its permission bits */
    unsigned uid, gid;
};
/* Fills *t, refusing (VDEV_ERR_IO, nothing written) a path that is, or
 * links to, anything but a regular file. */
enum vdev_status vdev_dist_ckpt_target(const char *path, struct vdev_ckpt_target *t);
void vdev_dist_ckpt_target_free(struct vdev_ckpt_target *t);
/* Creates the temporary file in t->dir, open for writing, with the mode (and,
 * for root, the owner) of the file it will replace. On failure nothing is
 * left behind. */
enum vdev_status vdev_dist_ckpt_create_temp(const char *path, const struct vdev_ckpt_target *t,
                                            char **tmp, int *fd);

/* Writes all n bytes (at `off` when off >= 0); 0, or -1 with errno set. */
int vdev_dist_write_all(int fd, const void *buf, size_t n, long long off);
/* Reads up to n bytes, stopping early only at the end of the file; the
 * number read, or -1 with errno set. */
int64_t vdev_dist_read_all(int fd, void *buf, size_t n);

/* ---- fault injection, for tests ---- */

/* Makes the nth (1-based) system call, allocation or tensor copy made by
 * the checkpoint code on the calling thread fail (with EIO for a system call,
 * ENOSPC for a write, VDEV_ERR_BACKEND for a copy off a device, VDEV_ERR_OOM
 * for a staging tensor), once; 0 disarms. */
void vdev_dist_checkpoint_fail_at(int n);
/* Makes the nth (1-based) copy of a load's restore on the calling thread
 * fail with VDEV_ERR_BACKEND ("copy failed (injected fault)"), once; 0
 * disarms. The restore copies each tensor's value aside, then the
 * checkpoint's into it, tensor after tensor: copies 2i+1 and 2i+2 (1-based)
 * are those of tensors[i]; a put-back counts as a copy too. */
void vdev_dist_checkpoint_fail_restore(int n);
/* Makes the nth (1-based, counted as above) copy of a load's restore on the
 * calling thread call fn(arg) first, once (n 0 or fn NULL: none): a test
 * frees a tensor there, as another thread could. */
void vdev_dist_checkpoint_restore_hook(int n, void (*fn)(void *), void *arg);
/* Makes vdev_checkpoint_save on the calling thread call fn(arg) once its
 * arguments are checked, before it reads the tensors' shapes (NULL: none):
 * a test frees a tensor there, as another thread could. */
void vdev_dist_checkpoint_save_hook(void (*fn)(void *), void *arg);
/* 1 while the armed fault has not fired yet. */
int vdev_dist_checkpoint_fault_pending(void);
/* Counts one call; 1 when this one must fail. */
int vdev_dist_fault(void);
/* A system call that may be made to fail: `call` is evaluated unless the
 * fault counter fires, in which case the result is -1 with errno EIO. */
#define VDEV_CKPT_SYS(call) (vdev_dist_fault() ? (errno = EIO, -1) : (call))
/* malloc and realloc through the fault counter; NULL, always with errno ENOMEM. */
void *vdev_dist_malloc(size_t n);
void *vdev_dist_realloc(void *p, size_t n);

#endif /* VDEV_DIST_CHECKPOINT_H */
