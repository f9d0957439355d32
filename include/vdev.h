/* vdev.h — the public API of vdev, a C11 runtime that runs several models on
 * several GPUs without them stepping on each other.
 *
 * vdev decides where every operation runs and owns every byte of device memory
 * the models use. Before start-up you configure the physical devices (which
 * GPUs are visible, memory growth, logical devices carved out of one GPU with
 * hard limits, a per-process memory fraction); start-up (vdev_init(), or the
 * first query of logical devices) freezes that configuration and creates the
 * logical devices, each with its own allocator.
 *
 * Conventions
 *  - Every fallible call returns enum vdev_status: VDEV_OK (0) or VDEV_ERR_*.
 *    On failure vdev_last_error() gives a message for the calling thread and
 *    nothing the call would have changed has changed.
 *  - Device names follow TensorFlow: "/device:GPU:1", "GPU:1", "gpu:1",
 *    "/gpu:1", "/job:localhost/replica:0/task:0/device:GPU:1", CPU likewise.
 *  - Sizes are in bytes (uint64_t), counts are int.
 *  - All calls are thread-safe unless said otherwise.
 *
 * Example: two models on one 8 GiB card, 4 GiB and 2 GiB
 *
 *     uint64_t limits[2] = { 4ull << 30, 2ull << 30 };
 *     vdev_config_set_logical_devices("GPU:0", limits, 2);
 *     if (vdev_init() != VDEV_OK) { fprintf(stderr, "%s\n", vdev_last_error()); exit(1); }
 *     struct vdev_memory_info mi;
 *     vdev_memory_info("GPU:1", &mi);   // bytes_limit == 2 GiB
 *
 * The parts. This header only includes the parts of the API, one topic each,
 * under vdev/; each part opens with what it holds. A program includes vdev.h
 * (or <vdev.h> installed). A part may also be included alone: it includes
 * the parts it builds on (every part includes vdev/status.h), so it compiles
 * by itself and declares its own names and theirs, not the whole API. Parts
 * include each other by file name ("tensor.h"), found beside the including
 * part. Each part has its own include guard (VDEV_VDEV_<PART>_H, apart from
 * the guards of the private headers under src/) and its own extern "C" block.
 *
 *   vdev/status.h       VDEV_API, the version, status codes and the last
 *                       error, sizes as text, the clock
 *   vdev/config.h       physical devices, the configuration before start-up
 *                       (visible GPUs, growth, logical devices, fraction, soft
 *                       placement, determinism, threads), vdev_init, shutdown
 *   vdev/devices.h      logical devices, memory statistics, raw device memory
 *   vdev/govern.h       floors, ceilings and priorities of logical devices
 *   vdev/tensor.h       tensors, variables, vdev_assign, scopes
 *   vdev/placement.h    device scopes, the placement policy, counts and
 *                       reports, the metrics endpoint, the trace's path
 *   vdev/ops.h          ops on tensors
 *   vdev/autograd.h     the gradient tape
 *   vdev/nn.h           layers, models and optimizers (every optimizer call)
 *   vdev/dlpack.h       sharing tensors through DLPack
 *   vdev/checkpoint.h   checkpoints (safetensors files)
 *   vdev/distribute.h   collectives and the mirrored strategy
 *   vdev/multiworker.h  the cluster, multi-worker and parameter servers (MPI)
 */
#ifndef VDEV_H
#define VDEV_H

#include "vdev/status.h"
#include "vdev/config.h"
#include "vdev/devices.h"
#include "vdev/govern.h"
#include "vdev/tensor.h"
#include "vdev/placement.h"
#include "vdev/ops.h"
#include "vdev/autograd.h"
#include "vdev/nn.h"
#include "vdev/dlpack.h"
#include "vdev/checkpoint.h"
#include "vdev/distribute.h"
#include "vdev/multiworker.h"

#endif /* VDEV_H */
