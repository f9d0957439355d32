/* mpi_world.h — the process's MPI, as the layers above see it: the MPI
 * plugin loaded on first use (libvdev-mpi.so, src/mpi/), MPI started once,
 * this process's rank in the job, communicators, and wrappers over the
 * plugin's table that turn its failures into vdev errors.
 *
 * Bounded waits. Whatever waits for another process ends by a deadline:
 * exchanges and point-to-point messages poll against it in the plugin, and
 * the blocking collectives (called only once every process has shown it
 * makes the same call) run under a watchdog: a thread that, when one of them
 * passes its deadline, prints what it waited for and ends the job
 * (MPI_Abort), since MPI gives no way back out of a blocking call. The
 * deadline is VDEV_MPI_TIMEOUT seconds (default VDEV_COMM_DEFAULT_TIMEOUT_S).
 *
 * Failure: a communicator that failed while messages were in flight (a
 * deadline passed, MPI returned an error) is spent, and so is MPI itself for
 * this job: vdev_mpi_world_failed() says so, and at exit the process ends the
 * job (MPI_Abort) instead of finalising, so that peers stuck in MPI end too.
 * So does an exit with a non-zero status (a process that leaves after a
 * local error: MPI_Finalize would wait for the others, and they for it), or,
 * where the status cannot be read (no glibc), with a communicator still in
 * use. Otherwise MPI is finalised at exit (never at vdev_shutdown: MPI
 * cannot start twice in one process, and a program may start vdev again). */
#ifndef VDEV_COLL_MPI_WORLD_H
#define VDEV_COLL_MPI_WORLD_H

#include "mpi/mpi_api.h"

#include "base/base.h"

#define VDEV_MPI_PLUGIN_NAME "libvdev-mpi.so"

/* Loads the plugin and starts MPI (once per process; thread-safe). The
 * errors: VDEV_ERR_UNSUPPORTED "MPI plugin: libvdev-mpi.so not built or not
 * found" (or "cannot load PATH (...)", the plugin's own error), or
 * VDEV_ERR_CONFIG for a malformed VDEV_MPI_TIMEOUT, or VDEV_ERR_BACKEND
 * when MPI does not start. A failure is not cached. */
enum vdev_status vdev_mpi_world_start(void);
/* After a successful start: this process's rank and the job's size. */
int vdev_mpi_world_rank(void);
int vdev_mpi_world_size(void);
/* "Open MPI v4.1.4" (after a start), else "". */
const char *vdev_mpi_world_library(void);
/* How long a process waits for another: VDEV_MPI_TIMEOUT, in ns. */
uint64_t vdev_mpi_timeout_ns(void);
/* now + the timeout, as an absolute deadline. */
uint64_t vdev_mpi_deadline(void);
/* Marks MPI spent for this job (see above), with a message for the exit. */
void vdev_mpi_world_fail(const char *why);
int vdev_mpi_world_failed(void);

/* ---- communicators and calls (each sets the error on failure) ---- */

enum vdev_status vdev_mpi_comm_new(vdev_mpi_comm_t **out);
void vdev_mpi_comm_free(vdev_mpi_comm_t *c, int spent);

/* The plugin's exchange; on a deadline, arrived[] says who did not come. */
enum vdev_status vdev_mpi_exchange(vdev_mpi_comm_t *c, int tag, const void *mine, void *all,
                                   size_t bytes, uint64_t deadline, unsigned char *arrived);
/* Blocking collectives under the watchdog; `what` names the call in the
 * watchdog's message ("all-reduce (call 12) of 4.00 MiB"). */
enum vdev_status vdev_mpi_allreduce(vdev_mpi_comm_t *c, void *buf, uint64_t count,
                                    enum vdev_mpi_type type, enum vdev_mpi_op op,
                                    const char *what);
enum vdev_status vdev_mpi_bcast(vdev_mpi_comm_t *c, void *buf, uint64_t bytes, int root,
                                const char *what);
enum vdev_status vdev_mpi_allgatherv(vdev_mpi_comm_t *c, const void *in, void *out,
                                     const uint64_t *bytes, const char *what);
enum vdev_status vdev_mpi_send(vdev_mpi_comm_t *c, const void *buf, uint64_t bytes, int dest,
                               int tag, uint64_t deadline);
enum vdev_status vdev_mpi_probe(vdev_mpi_comm_t *c, int src, int tag, uint64_t deadline,
                                int *src_out, int *tag_out, uint64_t *bytes_out);
enum vdev_status vdev_mpi_recv(vdev_mpi_comm_t *c, void *buf, uint64_t cap_bytes);

#endif /* VDEV_COLL_MPI_WORLD_H */
