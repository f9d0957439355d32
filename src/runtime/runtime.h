/* runtime.h — logical devices: what the layers above see of the machine.
 *
 * At start-up the runtime turns the configuration's plan into logical
 * devices: the logical CPUs first (CPU:0, and CPU:1.. when the host is split,
 * each over host memory), then GPU:0..N-1 numbered over the visible physical
 * GPUs and then their logical devices, each device with its own allocator
 * whose regions come from its physical device's backend. The logical
 * devices of one card (and the logical CPUs, over host memory) share the
 * card's budget through a pool (src/alloc/govern.h): floors, ceilings,
 * priorities, lending, limits changed at run time. After start-up the
 * device table is immutable, so lookups take no lock. Code that walks the
 * devices must not take id 0 for the only CPU: ids 0..n_cpus-1 are CPUs. */
#ifndef VDEV_RUNTIME_H
#define VDEV_RUNTIME_H

#include "alloc/alloc.h"
#include "alloc/govern.h"
#include "backend/backend.h"
#include "config/config.h"

struct vdev_ldev {
    int id;                        /* position in the device table: CPUs first */
    char name[64];                 /* "/device:GPU:0" */
    char long_name[96];            /* "/job:localhost/replica:0/task:0/device:GPU:0" */
    enum vdev_device_type type;
    int index;                     /* N in /device:GPU:N */
    int physical;                  /* physical device index */
    struct vdev_backend *backend;
    int bdev;                      /* device index inside the backend: its own stream's
                                      (backend.h), or its card's */
    int own_stream;                /* bdev is a stream opened for it (closed at shutdown) */
    vdev_alloc_t *alloc;
    enum vdev_memory_policy policy;
    uint64_t limit_bytes;          /* the ceiling at start-up (the allocator has the current one) */
    int is_split;
    vdev_pool_t *pool;             /* its card's shared memory (logical CPUs: the host's) */
    int member;                    /* its index in the pool */
};

#define VDEV_MAX_LDEVS VDEV_MAX_LOGICAL_DEVICES

/* Starts the runtime if it has not started (vdev_init). */
enum vdev_status vdev_runtime_ensure(void);
/* After start-up: number of logical devices (CPU included) and each one. */
int vdev_runtime_n_devices(void);
struct vdev_ldev *vdev_runtime_device(int id);
/* Number of logical CPUs (ids 0..n-1), at least 1 after start-up. */
int vdev_runtime_n_cpus(void);
/* Finds a logical device by any accepted name with an index (starts the
 * runtime), as TensorFlow's memory queries do: VDEV_ERR_INVALID_ARG "Failed
 * parsing device name: ..." for a malformed name or one without an index,
 * VDEV_ERR_NOT_FOUND "No matching devices found for '<name>': ... unknown
 * device" for a missing one. */
enum vdev_status vdev_runtime_find(const char *name, struct vdev_ldev **out);
/* The device of a type and index after start-up, or NULL. */
struct vdev_ldev *vdev_runtime_lookup(enum vdev_device_type type, int index);
/* Sets VDEV_ERR_NOT_FOUND "/job:localhost/replica:0/task:0/device:GPU:7
 * unknown device (there are 3 logical GPUs)" and returns it. */
enum vdev_status vdev_runtime_unknown_device(enum vdev_device_type type, int index);
/* GPU:0, or CPU:0 where there is no GPU. */
struct vdev_ldev *vdev_runtime_default_device(void);
/* Counts start-ups: a tensor made under another generation outlived its
 * runtime (vdev_shutdown) and owns no memory any more. */
uint32_t vdev_runtime_generation(void);
/* In a child that fork() made from a process whose runtime was running: the
 * parent's pid (that runtime's streams and worker threads stayed there, so
 * the child may neither use it nor start another); 0 elsewhere. */
long vdev_runtime_forked_from(void);
/* vdev_shutdown's first step: VDEV_ERR_INVALID_ARG (message set) while a
 * holder (vdev_mem_holder_add) has live blocks; else tells every holder to
 * forget this runtime's blocks, and VDEV_OK. */
enum vdev_status vdev_runtime_holders_release(void);
/* Sets VDEV_ERR_UNSUPPORTED "<fn>: vdev was started in process N, from
 * which this process was forked; ..." (what to do instead) and returns it. */
enum vdev_status vdev_runtime_forked_error(const char *fn);
/* For calls that return a handle or a count: in a forked child, sets the
 * fork error naming fn and returns 1 (the caller returns its failure: NULL,
 * -1); 0 elsewhere. */
int vdev_runtime_refuse_forked(const char *fn);
/* Moves the floor of card gpu's share for a collective library (NCCL's
 * buffers) by delta bytes, so they come out of the card's budget: lending
 * the others' cached memory if it must. VDEV_ERR_UNSUPPORTED for a card
 * without that share (more than one logical device, or a backend without
 * such a library), VDEV_ERR_OOM or VDEV_ERR_CONFIG (message set, nothing
 * changed) when the budget cannot make room. Thread-safe. */
enum vdev_status vdev_runtime_card_charge(int gpu, int64_t delta);
/* VDEV_OOM_REPORT=1: print the allocator's state after an out-of-memory
 * failure (the tensor layer tags blocks with the ops that made them). */
int vdev_runtime_oom_report(void);
/* An allocation of `bytes` on d failed out of memory, its message set: an
 * OOM event in the profiler trace and, under VDEV_OOM_REPORT, the message
 * and the allocator's state (each live block tagged by tag_of, may be NULL)
 * on stderr. */
void vdev_runtime_oom_seen(struct vdev_ldev *d, uint64_t bytes,
                           const char *(*tag_of)(void *user, uint32_t handle), void *user);
/* The out-of-memory report's record of what made each live block of a
 * device, by allocator handle (runtime_memory.c): a tensor's block gets the
 * op that made it, vdev_mem_alloc's its name (so a handle a freed tensor
 * left is not reported as that tensor's); vdev_runtime_block_tag reads one
 * back, as the allocator's dump asks (user: the device). */
void vdev_runtime_tag_block(const struct vdev_ldev *dev, uint32_t handle, const char *tag);
const char *vdev_runtime_block_tag(void *user, uint32_t handle);
/* Frees the record (teardown: the allocators are gone). */
void vdev_runtime_tags_forget(void);

/* ---- between runtime.c and runtime_memory.c ---- */

/* Forgets every card's collective library member (start-up, teardown, after
 * the pools are destroyed). */
void vdev_runtime_lib_forget(void);
/* Adds the collective library's member to the pool of card gpu, which has
 * one logical device (start-up, runtime's lock held): a floor of 0 until a
 * communicator charges it (vdev_runtime_card_charge). */
enum vdev_status vdev_runtime_lib_add(int gpu, vdev_pool_t *pool);

#endif /* VDEV_RUNTIME_H */
