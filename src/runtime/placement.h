/* placement.h — where each op runs, and the record of where ops ran.
 *
 * The device-scope stack is thread-local. The choice of device for an op:
 *   1. the innermost device scope, if any;
 *   2. otherwise (policy copy/strict) the device of its inputs when they all
 *      agree; when they do not, the device of the variables they derive from
 *      (their "home", below), so an unscoped op follows its model; else the
 *      default device;
 *   3. policy tf: the default device, as TensorFlow places unscoped ops.
 * Gradient ops push their forward op's device as a scope, so rule 1 puts them
 * there whatever scope the caller is in.
 *
 * The record: ops per (op type, device) and bytes copied per (from, to)
 * device pair, as relaxed atomic counters; and the audit: ops that ran on a
 * device other than their "home", the device of the variables they derive
 * from (a tensor's home is the device of the first variable among an op's
 * inputs, else the home of its first homed input). */
#ifndef VDEV_PLACEMENT_H
#define VDEV_PLACEMENT_H

#include "runtime/runtime.h"

/* Op types the summary counts: at least VDEV_OP_COUNT (src/ops/op_ids.h),
 * which src/ops/exec.c asserts at compile time. */
#define VDEV_MAX_OP_TYPES 128

/* Reads VDEV_PLACEMENT, VDEV_LOG_DEVICE_PLACEMENT, VDEV_SOFT_DEVICE_PLACEMENT
 * and VDEV_PLACEMENT_REPORT (called by vdev_init); code wins where it set
 * the same. VDEV_ERR_CONFIG on a malformed value, even one code overrides. */
enum vdev_status vdev_placement_init_env(void);

/* The innermost scope's device, or NULL when there is none. A scope opened
 * before vdev_shutdown() names its device again in the running runtime (by
 * type and index, as TensorFlow resolves a scope's name per op); when there
 * is no such device (and soft placement is off), NULL with the error set.
 * After a NULL from it, vdev_placement_scope_failed() tells that failure (a
 * scope exists) from no scope. */
struct vdev_ldev *vdev_placement_scope_device(void);
int vdev_placement_scope_failed(void);
/* Pushes/pops a device scope by pointer (for gradients). */
void vdev_placement_push_dev(struct vdev_ldev *d);
void vdev_placement_pop_dev(void);

/* Chooses the device for an op whose inputs live on in_devs[0..n) and derive
 * from variables on device `home` (-1: none); NULL (error set) when the
 * innermost scope names a device that no longer exists (see above). */
struct vdev_ldev *vdev_placement_choose(struct vdev_ldev *const *in_devs, int n, int home);
enum vdev_placement_policy vdev_placement_policy_now(void);

/* Records one executed op: type index and name (a static string), the device
 * it ran on, its home device id (-1 none), and the bytes copied to bring its
 * inputs there. Logs the op when placement logging is on. */
void vdev_placement_record(int op_type, const char *op_name, const struct vdev_ldev *ran_on,
                           int home, uint64_t bytes_copied);
/* The name an op type was recorded under (NULL: never run), and how many
 * ops of that type ran on a device (by id): for the metrics endpoint. */
const char *vdev_placement_op_name(int op_type);
uint64_t vdev_placement_ops_of(int op_type, int dev_id);

/* Prints the report VDEV_PLACEMENT_REPORT asked for, once. */
void vdev_placement_report_if_asked(void);

/* Back to the default policy, logging and soft placement, and forgets which
 * names soft placement has warned about (vdev_shutdown). */
void vdev_placement_forget_settings(void);

/* Records a copy between devices (also vdev_tensor_to). */
void vdev_placement_record_copy(const struct vdev_ldev *from, const struct vdev_ldev *to,
                                uint64_t bytes);

#endif
