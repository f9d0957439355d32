/* mpi_api.h — the table the MPI plugin (libvdev-mpi.so, src/mpi/mpi_plugin.c)
 * hands to the core, and the one symbol that returns it. Shared by the
 * plugin and the core's loader (src/coll/mpi_world.c); nothing else includes
 * it.
 *
 * The plugin is a thin transport over MPI: it knows nothing of devices,
 * tensors or strategies, and it links only MPI (never the core), so the core
 * runs on machines without MPI and the plugin loads into any build of it.
 * Every buffer it is given is host memory: Debian's Open MPI is not
 * CUDA-aware, so the core stages device memory through the host itself (or
 * hands over simulated GPUs' memory, which is host memory).
 *
 * Threads: the core calls the table from any thread but never from two at
 * once (its loader holds one lock around every call), which is what
 * MPI_THREAD_SERIALIZED asks; the plugin initialises MPI at that level.
 *
 * Errors: every fallible entry returns a vdev status and writes one line
 * into why[cap] (MPI's own error string where MPI failed). A wait with a
 * deadline that passes returns VDEV_ERR_BACKEND with why saying what was
 * waited for; the communicator is spent then (a request it could not finish
 * stays posted), and the core never uses it again.
 *
 * Deadlines are absolute times on CLOCK_MONOTONIC in nanoseconds;
 * VDEV_MPI_NO_DEADLINE waits for ever. */
#ifndef VDEV_MPI_API_H
#define VDEV_MPI_API_H

#include "vdev.h"

#include <stddef.h>
#include <stdint.h>

#define VDEV_MPI_API_VERSION 2
#define VDEV_MPI_PLUGIN_SYMBOL "vdev_mpi_plugin_open"
#define VDEV_MPI_NO_DEADLINE UINT64_MAX

/* Element types and reductions of the collectives. */
enum vdev_mpi_type { VDEV_MPI_F32 = 0, VDEV_MPI_I64, VDEV_MPI_TYPE_COUNT };
enum vdev_mpi_op { VDEV_MPI_SUM = 0, VDEV_MPI_MIN, VDEV_MPI_MAX, VDEV_MPI_OP_COUNT };

/* One communicator of the plugin: a duplicate of MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN, so a failure comes back as a code instead of ending the
 * process where MPI decides. Opaque to the core. */
typedef struct vdev_mpi_comm vdev_mpi_comm_t;

struct vdev_mpi_ops {
    int api_version;                /* VDEV_MPI_API_VERSION */
    /* "Open MPI v4.1.4" (the first line of MPI_Get_library_version). */
    const char *(*library)(void);
    /* Initialises MPI (MPI_Init_thread, MPI_THREAD_SERIALIZED) unless the
     * program already has; *rank and *size of MPI_COMM_WORLD. */
    enum vdev_status (*init)(int *rank, int *size, char *why, size_t cap);
    /* Tells the other processes that this one leaves (see exchange), then
     * MPI_Finalize, when init initialised MPI and it is not finalised yet. */
    void (*finalize)(void);
    /* MPI_Abort(MPI_COMM_WORLD, code): ends every process of the job. */
    void (*abort)(int code);

    /* A new communicator over every process (collective: every process calls
     * it, in the same order). */
    enum vdev_status (*comm_dup)(vdev_mpi_comm_t **out, char *why, size_t cap);
    /* Frees it: MPI_Comm_free when spent is 0, else only the plugin's memory
     * (a spent communicator may hold requests that never finish). */
    void (*comm_free)(vdev_mpi_comm_t *c, int spent);

    /* Every process sends `bytes` bytes (mine) to every other and receives
     * theirs into all[p * bytes] (its own copied too), with point-to-point
     * messages of tag `tag`, until the deadline. arrived[p] is set to 1 for
     * each process whose record came, 2 for one whose record did not come
     * and that has left the job (ended cleanly: then the exchange fails a
     * second after the news, before its deadline), 0 for the others (size
     * entries). */
    enum vdev_status (*exchange)(vdev_mpi_comm_t *c, int tag, const void *mine, void *all,
                                 size_t bytes, uint64_t deadline_ns, unsigned char *arrived,
                                 char *why, size_t cap);
    /* Blocking collectives on host memory (MPI_Allreduce in place,
     * MPI_Bcast, MPI_Allgatherv): the core calls them only once every
     * process has shown, through `exchange`, that it is making the same
     * call. Counts above INT_MAX are cut into several calls. */
    enum vdev_status (*allreduce)(vdev_mpi_comm_t *c, void *buf, uint64_t count,
                                  enum vdev_mpi_type type, enum vdev_mpi_op op, char *why,
                                  size_t cap);
    enum vdev_status (*bcast)(vdev_mpi_comm_t *c, void *buf, uint64_t bytes, int root, char *why,
                              size_t cap);
    /* Process p's in (bytes[p] bytes) lands at out + the sum of bytes[0..p). */
    enum vdev_status (*allgatherv)(vdev_mpi_comm_t *c, const void *in, void *out,
                                   const uint64_t *bytes, char *why, size_t cap);

    /* Point to point, until the deadline. send: MPI_Isend, waited for.
     * probe: waits for a message from src (-1: any) with tag (-1: any) and
     * matches it (MPI_Improbe), giving its source, tag and size; recv then
     * takes that message (MPI_Mrecv) into buf (cap_bytes at least its size).
     * One probed message per communicator at a time; a second probe before
     * its recv is VDEV_ERR_INVALID_ARG. */
    enum vdev_status (*send)(vdev_mpi_comm_t *c, const void *buf, uint64_t bytes, int dest,
                             int tag, uint64_t deadline_ns, char *why, size_t cap);
    enum vdev_status (*probe)(vdev_mpi_comm_t *c, int src, int tag, uint64_t deadline_ns,
                              int *src_out, int *tag_out, uint64_t *bytes_out, char *why,
                              size_t cap);
    enum vdev_status (*recv)(vdev_mpi_comm_t *c, void *buf, uint64_t cap_bytes, char *why,
                             size_t cap);
};

/* The plugin's one exported symbol: *out is its static table when
 * api_version is one it serves (VDEV_OK), else VDEV_ERR_UNSUPPORTED with why
 * saying which versions it serves. */
typedef enum vdev_status (*vdev_mpi_plugin_open_fn)(int api_version,
                                                    const struct vdev_mpi_ops **out, char *why,
                                                    size_t cap);

#endif /* VDEV_MPI_API_H */
