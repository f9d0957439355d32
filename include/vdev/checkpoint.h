/* vdev/checkpoint.h — checkpoints: named tensors saved to one safetensors
 * file, written atomically, and restored into existing tensors after every
 * name, dtype, shape and both checksums (header and data) were checked. Part
 * of the public API: vdev.h includes it, and it may be included alone (it
 * includes the parts it builds on).
 * Same conventions as vdev.h: every fallible call returns enum vdev_status
 * and leaves a message in vdev_last_error(). */
#ifndef VDEV_VDEV_CHECKPOINT_H
#define VDEV_VDEV_CHECKPOINT_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== checkpoints =========================================================
 *
 * Saves named tensors (variables, optimizer slots, anything) to a file in the
 * safetensors format and restores them into existing tensors, so a job that
 * stops can resume where it was. Python reads the files without vdev (the
 * header is JSON; numpy.frombuffer reads the data), and vdev reads files that
 * others write in that format when their dtypes are F32, I32 or BOOL.
 *
 * The file (the public safetensors format, little-endian throughout):
 *   - 8 bytes: N, the header's length in bytes, an unsigned 64-bit integer;
 *   - N bytes: a JSON object (UTF-8, at most 100,000,000 bytes, padded with
 *     spaces so that the data starts on a multiple of 8 bytes):
 *       {"__metadata__": {"vdev.format": "1", "vdev.crc32": "9a3c4f01",
 *                         "vdev.header_crc32": "5be0a3d2", "step": "1200"},
 *        "dense0/w": {"dtype": "F32", "shape": [784, 128],
 *                     "data_offsets": [0, 401408]},
 *        ...}
 *     one entry per tensor, in the order given to vdev_checkpoint_save; dtype
 *     "F32", "I32" or "BOOL" (a bool tensor: one byte an element, 0 or 1,
 *     where vdev's memory holds a 32-bit word; converted both ways);
 *     shape [] for a 0-dimensional tensor; data_offsets [begin, end) in
 *     bytes from the start of the data;
 *   - the data: each tensor's elements, row-major, packed one after another
 *     in the entries' order, with no gaps.
 * "__metadata__" holds strings only: the caller's key/value pairs, plus
 * "vdev.format" (the version of these rules, "1"), "vdev.crc32" (zlib's
 * CRC-32 of the whole data section, 8 lowercase hex digits) and
 * "vdev.header_crc32" (the CRC-32 of the header's N bytes as written, its
 * own 8 digits counted as "00000000"; vdev writes these three keys first,
 * in this order, at the very start of the header, and expects the last one
 * there). Keys starting with "vdev." are vdev's. Files written before
 * "vdev.header_crc32" existed (and files of other programs) have no header
 * checksum and still load; but a key in its place, after vdev's first two,
 * that is its name with a few bytes changed (at most 4 of 17), holding 8 hex
 * digits, is that key damaged, and the file is refused as damaged. A file of
 * a newer "vdev.format" is refused for its version (VDEV_ERR_UNSUPPORTED),
 * not as damaged. Offsets need not be multiples of the element
 * size (vdev writes aligned data; other writers' files may not be).
 *
 * Names: a tensor's name (and a metadata key) is non-empty valid UTF-8 of at
 * most VDEV_CHECKPOINT_NAME_MAX bytes, unique within the file, and not
 * "__metadata__". The convention, so that tools and restarted jobs agree:
 *   - variables by layer and role: "dense0/w", "dense0/b";
 *   - optimizer slots after their variable: "dense0/w/adam_m",
 *     "dense0/w/adam_v", "dense0/w/momentum";
 *   - optimizer scalars under "optimizer/": "optimizer/iterations" (a
 *     0-dimensional I32 tensor, as Keras counts Adam's steps); the
 *     hyperparameters in force in metadata, as decimal text:
 *     "optimizer/learning_rate", "optimizer/beta_1", "optimizer/beta_2",
 *     "optimizer/epsilon", "optimizer/momentum" (Python writes these);
 *   - the training position in metadata, as decimal text: "step", "epoch".
 *
 * Atomicity: vdev_checkpoint_save writes a temporary file next to the target
 * (same folder, ".vdev-<pid>-<n>.tmp"), fsyncs it, renames it over the
 * target and fsyncs the folder. A crash or a failure at any point leaves
 * either the old checkpoint or the new one at `path`, complete, never a mix;
 * a failed save removes its temporary file (a crash can leave one behind;
 * nothing reads it). The target is `path`, or, when `path` is a symbolic
 * link, the file it leads to (the link stays, its target is replaced). A
 * target that exists must be a regular file: a directory, device, FIFO or
 * socket is refused before anything is written. The new file keeps the
 * replaced file's permission bits (and, when saving as root, its owner and
 * group); a new file gets 0666 less the umask.
 *
 * Integrity: vdev_checkpoint_load checks everything before it changes any
 * tensor: the header (its checksum, every size bounded by the file's size),
 * that each name asked for is there with the tensor's dtype and shape, and
 * the checksum of the data. So a failed load leaves every tensor as it was.
 * vdev_checkpoint_open and vdev_checkpoint_metadata check the header's
 * checksum too, so an edited "step" is refused, not believed. (A file without
 * "vdev.crc32", written by another program, carries no checksum; its sizes
 * and offsets are still checked. The CRCs catch damage, not deliberate
 * edits: whoever removes the checksum keys can change the file.) A path
 * that is not a regular file (a FIFO, a device) is refused at once, without
 * opening it. VDEV_ERR_NOT_FOUND means only "no file at path": a job tells
 * "no checkpoint yet" from a file it cannot use (VDEV_ERR_IO, PARSE, SHAPE,
 * or INVALID_ARG for a name or metadata key the file lacks).
 *
 * Thread-safety: every call may run on any thread. Saves and loads of
 * different files run side by side; two saves to one path each leave a
 * complete file (the last rename wins). A tensor must not be updated by
 * another thread while it is being saved or loaded. A vdev_checkpoint_t is
 * read-only after vdev_checkpoint_open and may be read from several threads.
 *
 * Example: save every 100 steps; a restarted job resumes from the last save.
 *
 *     const char *names[] = {"dense0/w", "dense0/b", "dense1/w", "dense1/b"};
 *     vdev_tensor_t *vars[4];
 *     vdev_mlp_variables(model, vars, 4);
 *     const char *ckpt = "run/ckpt.safetensors";
 *     long step = 0;
 *     char buf[32];
 *     enum vdev_status st = vdev_checkpoint_metadata(ckpt, "step", buf, sizeof buf);
 *     if (st == VDEV_OK) {                          // resume after the saved step
 *         if (vdev_checkpoint_load(ckpt, names, vars, 4) != VDEV_OK)
 *             die(vdev_last_error());
 *         step = strtol(buf, NULL, 10);
 *     } else if (st != VDEV_ERR_NOT_FOUND) {
 *         // A file is there but cannot be read, or lacks "step": never start
 *         // over, or the first save would replace it.
 *         die(vdev_last_error());
 *     }                                             // NOT_FOUND: no file, start at step 0
 *     for (; step < n_steps; step++) {
 *         ... one training step ...
 *         if ((step + 1) % 100 == 0) {
 *             snprintf(buf, sizeof buf, "%ld", step + 1);
 *             const char *meta[] = {"step", buf};
 *             if (vdev_checkpoint_save(ckpt, names, vars, 4, meta, 1) != VDEV_OK)
 *                 fprintf(stderr, "%s\n", vdev_last_error()); // the last save stays in place
 *         }
 *     }
 */

#define VDEV_CHECKPOINT_NAME_MAX 1024 /* bytes of a tensor name or a metadata key */

/* Writes tensors[i] under names[i] (n of each; n may be 0) and the metadata:
 * n_metadata key/value pairs in metadata[0..2*n_metadata), key first, e.g.
 * {"step", "1200", "loss", "0.0371"}. The tensors may live on any devices;
 * the call waits for the work that makes them. Replaces `path` atomically
 * (see above); its folder must exist.
 * Errors (path unchanged, no temporary file left): VDEV_ERR_INVALID_ARG (a
 * NULL, freed or unnamed tensor, a name or key that is empty, too long, not
 * UTF-8, reserved or repeated: the message names the entry), VDEV_ERR_IO (the
 * target is, or links to, something other than a regular file; or the file
 * cannot be created, given the old file's mode, written, synced or renamed:
 * the message names it and the system's reason), VDEV_ERR_OOM (no host
 * memory for one tensor's bytes), or what copying a tensor to the host
 * returns. One exception: when
 * only the final fsync of the folder fails, the new checkpoint is in place
 * and the call returns VDEV_ERR_IO saying so. */
VDEV_API enum vdev_status vdev_checkpoint_save(const char *path, const char *const *names,
                                               vdev_tensor_t *const *tensors, int n,
                                               const char *const *metadata, int n_metadata);

/* Restores tensors[i] from the entry names[i] (n of each) of the file at
 * `path`, into the tensors as they are, on their own devices. Each entry's
 * dtype and shape must equal its tensor's. A name may be given more than once
 * (to restore one entry into several replicas); entries not asked for are
 * read (for the checksum) but not used, so n == 0 verifies a file. The data
 * passes through host memory: at most the bytes of the entries asked for,
 * plus the largest entry (a BOOL entry's bytes count 4 times there, as the
 * words it becomes). A restore counts as bytes copied from CPU:0 to each
 * tensor's device in the placement statistics.
 * Errors, each with a message naming the file and the problem, every tensor
 * unchanged: VDEV_ERR_INVALID_ARG (NULL arguments, a NULL or freed tensor, one
 * tensor under two names, a name the file lacks), VDEV_ERR_NOT_FOUND (no file
 * at path, and only that), VDEV_ERR_SHAPE (dtype or shape differ: the message
 * gives both), VDEV_ERR_IO (not a regular file, cannot open or read,
 * truncated, bytes after the last entry of a file vdev wrote, a checksum
 * mismatch in the header or the data; a truncated or
 * damaged file, and nothing else, reads "checkpoint '<path>' is damaged:
 * ..."), VDEV_ERR_PARSE
 * (not a safetensors file, a header that is not JSON, or not a valid
 * safetensors header: bad types, unknown dtype, offsets that overlap, leave
 * gaps or disagree with the shape; or a BOOL entry asked for that holds a
 * byte other than 0 or 1: "entry 'mask' is BOOL, but its element 3 is 7, not
 * 0 or 1", which in a file vdev wrote, its checksums matching, is damage
 * instead: VDEV_ERR_IO, "checkpoint '<path>' is damaged: entry ..."),
 * VDEV_ERR_UNSUPPORTED (a "vdev.format" this
 * version does not read), VDEV_ERR_OOM (host or CPU memory for staging).
 * One exception: when the final host-to-device copy itself fails (the
 * backend's error, e.g. a CUDA fault), tensors restored before it keep their
 * new values. */
VDEV_API enum vdev_status vdev_checkpoint_load(const char *path, const char *const *names,
                                               vdev_tensor_t *const *tensors, int n);

/* Copies the metadata value of `key` (with its terminating NUL) into buf.
 * Reads and checks only the header (its checksum included).
 * VDEV_ERR_NOT_FOUND only when there is no file at path; VDEV_ERR_INVALID_ARG
 * when the file has no such key ("no metadata key 'step'") or cap is too
 * small (the message says how many bytes it needs); else the errors of
 * vdev_checkpoint_open. */
VDEV_API enum vdev_status vdev_checkpoint_metadata(const char *path, const char *key, char *buf,
                                                   size_t cap);

/* ---- reading a checkpoint's header, for tools ---- */

typedef struct vdev_checkpoint vdev_checkpoint_t;

struct vdev_checkpoint_entry {
    const char *name;          /* valid until vdev_checkpoint_close */
    const char *dtype_name;    /* as in the file: "F32", "I32", "BOOL", "F16", ... */
    enum vdev_dtype dtype;     /* VDEV_F32, VDEV_I32, VDEV_BOOL ("BOOL": 1 byte an
                                  element); VDEV_DTYPE_COUNT for a dtype vdev has no
                                  tensors of */
    int ndim;                  /* 0 for a scalar */
    const int64_t *shape;      /* ndim sizes; valid until vdev_checkpoint_close */
    uint64_t offset_bytes;     /* from the start of the data section */
    uint64_t size_bytes;
};

/* Reads and checks the header of the file at `path` (its checksum included;
 * not the data, so not the data's checksum): *out is yours, to free with
 * vdev_checkpoint_close. Errors as vdev_checkpoint_load's for the file itself
 * (NOT_FOUND for no file, IO, PARSE, UNSUPPORTED, OOM); *out is NULL then.
 * Does not start the runtime. */
VDEV_API enum vdev_status vdev_checkpoint_open(const char *path, vdev_checkpoint_t **out);
/* NULL is a no-op. */
VDEV_API void vdev_checkpoint_close(vdev_checkpoint_t *ck);
/* The number of tensor entries (-1 for a NULL handle). */
VDEV_API int vdev_checkpoint_n_entries(const vdev_checkpoint_t *ck);
/* Entry i in 0..n_entries-1, in the order of their data. VDEV_ERR_INVALID_ARG
 * for a NULL argument or an index out of range. */
VDEV_API enum vdev_status vdev_checkpoint_entry(const vdev_checkpoint_t *ck, int i,
                                                struct vdev_checkpoint_entry *out);
/* The number of metadata pairs, vdev's included (-1 for a NULL handle). */
VDEV_API int vdev_checkpoint_n_metadata(const vdev_checkpoint_t *ck);
/* Metadata pair i, in the header's order; the strings are valid until
 * vdev_checkpoint_close. VDEV_ERR_INVALID_ARG as for vdev_checkpoint_entry. */
VDEV_API enum vdev_status vdev_checkpoint_metadata_at(const vdev_checkpoint_t *ck, int i,
                                                      const char **key, const char **value);

#ifdef __cplusplus
}
#endif
#endif /* VDEV_VDEV_CHECKPOINT_H */
