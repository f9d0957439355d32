/* placement.c — device scopes, the choice of device for each op, placement
 * logging, soft placement, the placement summary and the audit (see
 * placement.h).
 *
 * A scope is resolved as tf.device resolves it: a name without an index
 * takes the enclosing scope's index (else 0), as DeviceSpec.make_merged_spec
 * does; a name that gives no device ("", or a job, replica or task alone)
 * keeps the enclosing scope's device, and outside any scope adds no
 * constraint (a scope of no device: ops in it are placed as unscoped ops);
 * a NULL name opens a scope of no device at any depth (tf.device(None)).
 * The scope remembers the name it asked for (what vdev_device_current()
 * reports, TensorFlow's context.device_name) beside the device its ops run
 * on. The two differ only under soft placement, where a scope naming a
 * device that does not exist sends its ops to the device TensorFlow's eager
 * soft placement picks — the first in its priority order, GPU:0, else CPU:0
 * — with one warning per such name and start-up, for as long as soft
 * placement stays on (it is read at each such op, as TensorFlow decides per
 * op). */
#define _GNU_SOURCE
#include "runtime/placement.h"

#include <stdatomic.h>
#include <string.h>

#define MAX_SCOPE_DEPTH 64
/* Room above the public cap for the scopes vdev pushes itself (a gradient's
 * op, a replica's step, an optimizer's update), so that they work inside
 * MAX_SCOPE_DEPTH scopes a caller opened: they nest a few deep at most. */
#define INTERNAL_SCOPE_ROOM 16
#define MAX_AUDIT 256

#define MAX_SOFT_WARNED 64

/* One device scope: where its ops run, the device it named, the runtime
 * that `dev` belongs to (vdev_runtime_generation), and whether `dev` is soft
 * placement's stand-in for a named device that does not exist. Such a scope
 * reads the soft placement switch at each op (TensorFlow decides per op), so
 * turning soft placement off makes its next op fail; a scope on the device
 * it named never needs to, and its ops pay for no second load. */
struct scope {
    struct vdev_ldev *dev;
    enum vdev_device_type type;
    int index;
    uint32_t rgen;
    int soft;
    int none; /* a name of no device outside any scope: dev is NULL */
};
static _Thread_local struct scope scope_stack[MAX_SCOPE_DEPTH + INTERNAL_SCOPE_ROOM];
static _Thread_local int scope_depth;
static _Thread_local char scope_name[96]; /* vdev_device_current() of a soft-placed scope */

static _Atomic int policy = VDEV_PLACEMENT_COPY;
static _Atomic int policy_set_by_code;
static _Atomic int log_placement;
static _Atomic int log_set_by_code;
static _Atomic int soft_placement;
static _Atomic int soft_set_by_code;

static _Atomic uint64_t op_counts[VDEV_MAX_OP_TYPES][VDEV_MAX_LDEVS];
static const char *_Atomic op_names[VDEV_MAX_OP_TYPES];
static _Atomic uint64_t copy_bytes[VDEV_MAX_LDEVS][VDEV_MAX_LDEVS];

struct audit_row {
    int op_type, ran_on, home;
    uint64_t count, bytes;
};
static struct {
    pthread_mutex_t lock;
    int n;
    struct audit_row rows[MAX_AUDIT];
    int n_devs;
    char names[VDEV_MAX_LDEVS][64];  /* device names, kept for the report at exit */
    int report_at_exit, atexit_done;
    int n_soft;                      /* names soft placement has warned about */
    struct {
        enum vdev_device_type type;
        int index;
    } soft[MAX_SOFT_WARNED];
} A = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- device scopes ---- */

/* Warns once per start-up for each missing device a scope named. */
static void warn_soft(enum vdev_device_type type, int index, const struct vdev_ldev *to)
{
    pthread_mutex_lock(&A.lock);
    int seen = 0;
    for (int i = 0; i < A.n_soft && !seen; i++)
        seen = A.soft[i].type == type && A.soft[i].index == index;
    if (!seen && A.n_soft < MAX_SOFT_WARNED) {
        A.soft[A.n_soft].type = type;
        A.soft[A.n_soft].index = index;
        A.n_soft++;
    }
    pthread_mutex_unlock(&A.lock);
    if (!seen)
        vdev_log_warning("soft device placement: /job:localhost/replica:0/task:0/device:%s:%d "
                         "does not exist; ops placed there run on %s",
                         type == VDEV_DEVICE_GPU ? "GPU" : "CPU", index, to->long_name);
}

/* VDEV_ERR_NOT_FOUND for the missing device a scope named (dn, index). When
 * the name had no index and took the enclosing scope's (make_merged_spec:
 * 'CPU' inside 'GPU:1' is CPU:1), the message says so, and names the
 * device in full when the type has one: "... unknown device (there is 1 CPU
 * device) (the index 1 came from the enclosing scope /device:GPU:1; name the
 * device in full, such as 'CPU:0')". */
static enum vdev_status unknown_device(const struct vdev_device_name *dn, int index)
{
    enum vdev_status st = vdev_runtime_unknown_device(dn->type, index);
    if (dn->has_index || !scope_depth || scope_stack[scope_depth - 1].none)
        return st;
    const struct scope *outer = &scope_stack[scope_depth - 1];
    const char *type = dn->type == VDEV_DEVICE_GPU ? "GPU" : "CPU";
    char msg[512], hint[64] = "";
    vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
    if (vdev_runtime_lookup(dn->type, 0))
        snprintf(hint, sizeof hint, "; name the device in full, such as '%s:0'", type);
    return vdev_error(st, "%s (the index %d came from the enclosing scope /device:%s:%d%s)", msg,
                      index, outer->type == VDEV_DEVICE_GPU ? "GPU" : "CPU", outer->index, hint);
}

/* VDEV_OK while a caller may open one more scope (vdev's own scopes have
 * INTERNAL_SCOPE_ROOM more: vdev_placement_push_dev). */
static enum vdev_status scope_room(void)
{
    if (scope_depth < MAX_SCOPE_DEPTH)
        return VDEV_OK;
    return vdev_error(VDEV_ERR_INVALID_ARG, "device scopes nested deeper than %d",
                      MAX_SCOPE_DEPTH);
}

/* Pushes a scope on the device that an empty name or a job, replica or task
 * alone leaves in force: the enclosing scope's, and outside any scope none
 * (ops in it are placed as unscoped ops; "GPU" inside it is GPU:0). */
static enum vdev_status push_merged(void)
{
    enum vdev_status st = scope_room();
    if (st != VDEV_OK)
        return st;
    if (scope_depth) {
        scope_stack[scope_depth] = scope_stack[scope_depth - 1];
        scope_depth++;
        return VDEV_OK;
    }
    scope_stack[scope_depth++] =
        (struct scope){NULL, VDEV_DEVICE_CPU, 0, vdev_runtime_generation(), 0, 1};
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_device_push(const char *device)
{
    struct vdev_device_name dn;
    enum vdev_status st;
    if (!device) { /* tf.device(None): a scope of no device, whatever encloses it */
        if ((st = vdev_init()) != VDEV_OK)
            return st;
        if ((st = scope_room()) != VDEV_OK)
            return st;
        scope_stack[scope_depth++] =
            (struct scope){NULL, VDEV_DEVICE_CPU, 0, vdev_runtime_generation(), 0, 1};
        return VDEV_OK;
    }
    if ((st = vdev_parse_scope_name(device, &dn)) != VDEV_OK)
        return st;
    if ((st = vdev_init()) != VDEV_OK)
        return st;
    if (dn.no_device)
        return push_merged();
    if (dn.physical)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "'%s' is a physical device; ops and memory queries take a logical "
                          "device such as /device:GPU:0",
                          device);
    int index = dn.has_index ? dn.index : scope_depth ? scope_stack[scope_depth - 1].index : 0;
    struct vdev_ldev *d = vdev_runtime_lookup(dn.type, index);
    if (!d) {
        if (!atomic_load(&soft_placement))
            return unknown_device(&dn, index);
        d = vdev_runtime_default_device();
    }
    if ((st = scope_room()) != VDEV_OK)
        return st;
    int soft = d->type != dn.type || d->index != index;
    if (soft)
        warn_soft(dn.type, index, d);
    scope_stack[scope_depth++] =
        (struct scope){d, dn.type, index, vdev_runtime_generation(), soft, 0};
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_device_pop(void)
{
    if (scope_depth == 0)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_device_pop without a matching push");
    scope_depth--;
    return VDEV_OK;
}

/* The error of an op in a scope whose device does not exist: the unknown
 * device's message, then why the scope names it ("(<why>)"). */
static void scope_device_error(const struct scope *s, const char *why)
{
    char msg[384];
    vdev_runtime_unknown_device(s->type, s->index);
    vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
    vdev_error(vdev_last_status(), "%s (%s)", msg, why);
}

/* Scope s's device in the running runtime: a scope opened before
 * vdev_shutdown() (its thread's stack outlives the runtime) names its device
 * again by type and index; a scope on soft placement's stand-in holds only
 * while soft placement is on. NULL when there is no device (with `report`,
 * the error set). */
static struct vdev_ldev *scope_resolve(struct scope *s, int report)
{
    uint32_t gen = vdev_runtime_generation();
    if (__builtin_expect(s->rgen == gen && !s->soft, 1))
        return s->dev;
    if (s->none)
        return NULL; /* no error: ops are placed as unscoped ones */
    if (s->rgen == gen) {
        if (atomic_load_explicit(&soft_placement, memory_order_relaxed))
            return s->dev;
        if (report)
            scope_device_error(s, "the device scope was opened under soft device placement, "
                                  "which is now off");
        return NULL;
    }
    struct vdev_ldev *d = vdev_runtime_lookup(s->type, s->index);
    int soft = 0;
    if (!d) {
        if (!report)
            return NULL;
        if (!atomic_load(&soft_placement)) {
            scope_device_error(s, "a device scope opened before vdev_shutdown() names it; pop "
                                  "that scope");
            return NULL;
        }
        d = vdev_runtime_default_device();
        warn_soft(s->type, s->index, d);
        soft = 1;
    }
    s->dev = d;
    s->rgen = gen;
    s->soft = soft;
    return d;
}

VDEV_API const char *vdev_device_current(void)
{
    if (!scope_depth)
        return NULL;
    struct scope *s = &scope_stack[scope_depth - 1];
    if (s->none)
        return NULL;
    struct vdev_ldev *d = scope_resolve(s, 0); /* a getter sets no error */
    if (d && d->type == s->type && d->index == s->index)
        return d->long_name;
    snprintf(scope_name, sizeof scope_name, "/job:localhost/replica:0/task:0/device:%s:%d",
             s->type == VDEV_DEVICE_GPU ? "GPU" : "CPU", s->index);
    return scope_name;
}

struct vdev_ldev *vdev_placement_scope_device(void)
{
    return scope_depth ? scope_resolve(&scope_stack[scope_depth - 1], 1) : NULL;
}

int vdev_placement_scope_failed(void)
{
    return scope_depth > 0 && !scope_stack[scope_depth - 1].none;
}

void vdev_placement_push_dev(struct vdev_ldev *d)
{
    VDEV_ASSERT(scope_depth < MAX_SCOPE_DEPTH + INTERNAL_SCOPE_ROOM);
    scope_stack[scope_depth++] =
        (struct scope){d, d->type, d->index, vdev_runtime_generation(), 0, 0};
}

void vdev_placement_pop_dev(void)
{
    VDEV_ASSERT(scope_depth > 0);
    scope_depth--;
}

/* ---- policy ---- */

/* The policy VDEV_PLACEMENT gives: *out is left as it is where the variable
 * is unset. Any case, as every other value. */
static enum vdev_status env_policy(int *out)
{
    const char *p = getenv("VDEV_PLACEMENT");
    if (!p)
        return VDEV_OK;
    if (!vdev_strcasecmp(p, "copy"))
        *out = VDEV_PLACEMENT_COPY;
    else if (!vdev_strcasecmp(p, "strict"))
        *out = VDEV_PLACEMENT_STRICT;
    else if (!vdev_strcasecmp(p, "tf"))
        *out = VDEV_PLACEMENT_TF;
    else
        return vdev_error(VDEV_ERR_CONFIG,
                          "VDEV_PLACEMENT=\"%s\" is not a placement policy (copy, strict or tf)",
                          p);
    return VDEV_OK;
}

/* A switch's variable (VDEV_SOFT_DEVICE_PLACEMENT, ...): *out is left as it
 * is where it is unset. */
static enum vdev_status env_switch(const char *var, int *out)
{
    const char *v = getenv(var);
    int b;
    if (!v)
        return VDEV_OK;
    enum vdev_status st = vdev_config_parse_bool(var, v, &b);
    if (st == VDEV_OK)
        *out = b;
    return st;
}

/* A setting as its getter reports it: the one in force after start-up, and
 * before it the one start-up would put in force, code's where code has set
 * it, else the environment's (var, or VDEV_PLACEMENT where var is NULL),
 * else `def`. A malformed variable gives `def`, with start-up's error left
 * as the calling thread's last error, as vdev_config_get_visible_devices
 * fails with it. */
static int setting(_Atomic int *value, _Atomic int *by_code, const char *var, int def)
{
    if (vdev_is_initialized() || atomic_load(by_code))
        return atomic_load(value);
    int v = def;
    if ((var ? env_switch(var, &v) : env_policy(&v)) != VDEV_OK)
        return def;
    return v;
}

VDEV_API enum vdev_status vdev_set_placement_policy(enum vdev_placement_policy p)
{
    if ((unsigned)p >= VDEV_PLACEMENT_POLICY_COUNT)
        return vdev_error(VDEV_ERR_INVALID_ARG, "unknown placement policy %d", (int)p);
    atomic_store(&policy, (int)p);
    atomic_store(&policy_set_by_code, 1);
    return VDEV_OK;
}

VDEV_API enum vdev_placement_policy vdev_get_placement_policy(void)
{
    return (enum vdev_placement_policy)setting(&policy, &policy_set_by_code, NULL,
                                               VDEV_PLACEMENT_COPY);
}

enum vdev_placement_policy vdev_placement_policy_now(void)
{
    return (enum vdev_placement_policy)atomic_load_explicit(&policy, memory_order_relaxed);
}

VDEV_API void vdev_set_log_device_placement(bool enable)
{
    atomic_store(&log_placement, enable ? 1 : 0);
    atomic_store(&log_set_by_code, 1);
}

VDEV_API bool vdev_get_log_device_placement(void)
{
    return setting(&log_placement, &log_set_by_code, "VDEV_LOG_DEVICE_PLACEMENT", 0) != 0;
}

VDEV_API void vdev_config_set_soft_device_placement(bool enable)
{
    atomic_store(&soft_placement, enable ? 1 : 0);
    atomic_store(&soft_set_by_code, 1);
}

VDEV_API bool vdev_config_get_soft_device_placement(void)
{
    return setting(&soft_placement, &soft_set_by_code, "VDEV_SOFT_DEVICE_PLACEMENT", 0) != 0;
}

struct vdev_ldev *vdev_placement_choose(struct vdev_ldev *const *in, int n, int home)
{
    struct vdev_ldev *d = vdev_placement_scope_device();
    if (d)
        return d;
    if (vdev_placement_scope_failed()) /* a scope that names no device now: error set */
        return NULL;
    if (vdev_placement_policy_now() != VDEV_PLACEMENT_TF && n > 0) {
        int agree = 1;
        for (int i = 1; i < n; i++)
            agree = agree && in[i] == in[0];
        if (agree)
            return in[0];
        struct vdev_ldev *h = home >= 0 ? vdev_runtime_device(home) : NULL;
        if (h)
            return h;
    }
    return vdev_runtime_default_device();
}

/* ---- the record ---- */

void vdev_placement_record(int op_type, const char *op_name, const struct vdev_ldev *ran_on,
                           int home, uint64_t bytes_copied)
{
    VDEV_DEBUG_ASSERT(op_type >= 0 && op_type < VDEV_MAX_OP_TYPES);
    if (!atomic_load_explicit(&op_names[op_type], memory_order_relaxed))
        atomic_store_explicit(&op_names[op_type], op_name, memory_order_relaxed);
    atomic_fetch_add_explicit(&op_counts[op_type][ran_on->id], 1, memory_order_relaxed);
    if (atomic_load_explicit(&log_placement, memory_order_relaxed))
        fprintf(stderr, "Executing op %s in device %s\n", op_name, ran_on->long_name);
    if (home < 0 || home == ran_on->id)
        return;
    pthread_mutex_lock(&A.lock);
    struct audit_row *r = NULL;
    for (int i = 0; i < A.n; i++)
        if (A.rows[i].op_type == op_type && A.rows[i].ran_on == ran_on->id &&
            A.rows[i].home == home) {
            r = &A.rows[i];
            break;
        }
    if (!r && A.n < MAX_AUDIT) {
        r = &A.rows[A.n++];
        *r = (struct audit_row){op_type, ran_on->id, home, 0, 0};
    }
    if (r) {
        r->count++;
        r->bytes += bytes_copied;
    }
    pthread_mutex_unlock(&A.lock);
}

void vdev_placement_record_copy(const struct vdev_ldev *from, const struct vdev_ldev *to,
                                uint64_t bytes)
{
    atomic_fetch_add_explicit(&copy_bytes[from->id][to->id], bytes, memory_order_relaxed);
}

const char *vdev_placement_op_name(int op_type)
{
    if (op_type < 0 || op_type >= VDEV_MAX_OP_TYPES)
        return NULL;
    return atomic_load_explicit(&op_names[op_type], memory_order_relaxed);
}

uint64_t vdev_placement_ops_of(int op_type, int dev_id)
{
    if (op_type < 0 || op_type >= VDEV_MAX_OP_TYPES || dev_id < 0 || dev_id >= VDEV_MAX_LDEVS)
        return 0;
    return atomic_load_explicit(&op_counts[op_type][dev_id], memory_order_relaxed);
}

/* Device id of a name, -1 for NULL (all), -2 for a bad name. */
static int dev_id(const char *name)
{
    if (!name)
        return -1;
    struct vdev_ldev *d = NULL;
    if (vdev_runtime_find(name, &d) != VDEV_OK)
        return -2;
    return d->id;
}

VDEV_API uint64_t vdev_placement_op_count(const char *op_type, const char *device)
{
    int id = dev_id(device);
    if (id == -2)
        return 0;
    uint64_t sum = 0;
    for (int t = 0; t < VDEV_MAX_OP_TYPES; t++) {
        const char *nm = atomic_load_explicit(&op_names[t], memory_order_relaxed);
        if (!nm || (op_type && strcmp(op_type, nm) != 0))
            continue;
        for (int d = 0; d < VDEV_MAX_LDEVS; d++)
            if (id < 0 || id == d)
                sum += atomic_load_explicit(&op_counts[t][d], memory_order_relaxed);
    }
    return sum;
}

VDEV_API uint64_t vdev_placement_bytes_copied(const char *from, const char *to)
{
    int f = dev_id(from), t = dev_id(to);
    if (f == -2 || t == -2)
        return 0;
    uint64_t sum = 0;
    for (int i = 0; i < VDEV_MAX_LDEVS; i++)
        for (int j = 0; j < VDEV_MAX_LDEVS; j++)
            if ((f < 0 || f == i) && (t < 0 || t == j))
                sum += atomic_load_explicit(&copy_bytes[i][j], memory_order_relaxed);
    return sum;
}

static const char *name_of(int id) { return id >= 0 && id < A.n_devs ? A.names[id] : "?"; }

VDEV_API enum vdev_status vdev_placement_audit(struct vdev_audit_entry *out, int cap, int *n)
{
    if (!n || cap < 0 || (cap > 0 && !out))
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_placement_audit: bad arguments");
    pthread_mutex_lock(&A.lock);
    for (int i = 0; i < A.n && i < cap; i++) {
        const struct audit_row *r = &A.rows[i];
        const char *nm = atomic_load(&op_names[r->op_type]);
        vdev_strlcpy(out[i].op_type, nm ? nm : "?", sizeof out[i].op_type);
        vdev_strlcpy(out[i].ran_on, name_of(r->ran_on), sizeof out[i].ran_on);
        vdev_strlcpy(out[i].home, name_of(r->home), sizeof out[i].home);
        out[i].count = r->count;
        out[i].bytes_copied = r->bytes;
    }
    *n = A.n;
    pthread_mutex_unlock(&A.lock);
    return VDEV_OK;
}

VDEV_API void vdev_placement_report(FILE *f)
{
    char b[32];
    if (!f)
        f = stderr;
    fprintf(f, "Placement summary (ops per type and device)\n");
    int any = 0;
    for (int t = 0; t < VDEV_MAX_OP_TYPES; t++) {
        const char *nm = atomic_load(&op_names[t]);
        if (!nm)
            continue;
        for (int d = 0; d < A.n_devs; d++) {
            uint64_t c = atomic_load(&op_counts[t][d]);
            if (c) {
                fprintf(f, "  %-24s %-16s %12llu\n", nm, name_of(d), (unsigned long long)c);
                any = 1;
            }
        }
    }
    if (!any)
        fprintf(f, "  (no ops)\n");
    fprintf(f, "Bytes copied between devices\n");
    any = 0;
    for (int i = 0; i < A.n_devs; i++)
        for (int j = 0; j < A.n_devs; j++) {
            uint64_t c = atomic_load(&copy_bytes[i][j]);
            if (c) {
                fprintf(f, "  %-16s -> %-16s %12s\n", name_of(i), name_of(j),
                        vdev_format_bytes(c, b, sizeof b));
                any = 1;
            }
        }
    if (!any)
        fprintf(f, "  (none)\n");
    pthread_mutex_lock(&A.lock);
    fprintf(f, "Placement audit (ops that ran away from their variables' device)\n");
    if (A.n == 0)
        fprintf(f, "  none: every op ran on the device of the variables it uses\n");
    for (int i = 0; i < A.n; i++) {
        const struct audit_row *r = &A.rows[i];
        const char *nm = atomic_load(&op_names[r->op_type]);
        fprintf(f, "  %llu x %s ran on %s, its variables live on %s (%s copied to get there)\n",
                (unsigned long long)r->count, nm ? nm : "?", name_of(r->ran_on), name_of(r->home),
                vdev_format_bytes(r->bytes, b, sizeof b));
    }
    pthread_mutex_unlock(&A.lock);
}

VDEV_API void vdev_placement_reset(void)
{
    for (int t = 0; t < VDEV_MAX_OP_TYPES; t++)
        for (int d = 0; d < VDEV_MAX_LDEVS; d++)
            atomic_store_explicit(&op_counts[t][d], 0, memory_order_relaxed);
    for (int i = 0; i < VDEV_MAX_LDEVS; i++)
        for (int j = 0; j < VDEV_MAX_LDEVS; j++)
            atomic_store_explicit(&copy_bytes[i][j], 0, memory_order_relaxed);
    pthread_mutex_lock(&A.lock);
    A.n = 0;
    pthread_mutex_unlock(&A.lock);
}

void vdev_placement_forget_settings(void)
{
    atomic_store(&policy, VDEV_PLACEMENT_COPY);
    atomic_store(&policy_set_by_code, 0);
    atomic_store(&log_placement, 0);
    atomic_store(&log_set_by_code, 0);
    atomic_store(&soft_placement, 0);
    atomic_store(&soft_set_by_code, 0);
    pthread_mutex_lock(&A.lock);
    A.n_soft = 0;
    pthread_mutex_unlock(&A.lock);
}

/* VDEV_PLACEMENT_REPORT: printed once, at vdev_shutdown() or at exit,
 * whichever comes first (shutdown forgets the counters). */
void vdev_placement_report_if_asked(void)
{
    pthread_mutex_lock(&A.lock);
    int report = A.report_at_exit;
    A.report_at_exit = 0;
    pthread_mutex_unlock(&A.lock);
    if (report)
        vdev_placement_report(stderr);
}

static void report_at_exit(void)
{
    if (!vdev_runtime_forked_from()) /* a forked child's would repeat the parent's */
        vdev_placement_report_if_asked();
}

enum vdev_status vdev_placement_init_env(void)
{
    /* Each variable is validated even where code has set its setting; where
     * code has not, the variable's value, or the default where it is unset
     * (not what an earlier start-up that failed left). */
    int v = VDEV_PLACEMENT_COPY, soft = 0, logging = 0;
    enum vdev_status st;
    if ((st = env_policy(&v)) != VDEV_OK ||
        (st = env_switch("VDEV_SOFT_DEVICE_PLACEMENT", &soft)) != VDEV_OK ||
        (st = env_switch("VDEV_LOG_DEVICE_PLACEMENT", &logging)) != VDEV_OK)
        return st;
    if (!atomic_load(&policy_set_by_code))
        atomic_store(&policy, v);
    if (!atomic_load(&soft_set_by_code))
        atomic_store(&soft_placement, soft);
    if (!atomic_load(&log_set_by_code))
        atomic_store(&log_placement, logging);
    const char *r = getenv("VDEV_PLACEMENT_REPORT");
    int report = 0;
    if (r && (st = vdev_config_parse_bool("VDEV_PLACEMENT_REPORT", r, &report)) != VDEV_OK)
        return st;
    pthread_mutex_lock(&A.lock);
    A.n_devs = vdev_runtime_n_devices();
    for (int i = 0; i < A.n_devs; i++)
        vdev_strlcpy(A.names[i], vdev_runtime_device(i)->name, sizeof A.names[i]);
    A.report_at_exit = report;
    if (report && !A.atexit_done) {
        atexit(report_at_exit);
        A.atexit_done = 1;
    }
    pthread_mutex_unlock(&A.lock);
    return VDEV_OK;
}

VDEV_API void vdev_device_report(FILE *f)
{
    if (!f)
        f = stdout;
    if (vdev_init() != VDEV_OK) {
        fprintf(f, "(no devices: %s)\n", vdev_last_error());
        return;
    }
    char b[6][32];
    fprintf(f, "%-16s %10s %12s %12s %12s %12s %12s %12s\n", "device", "ops", "in use", "peak",
            "reserved", "limit", "copied in", "copied out");
    int n = vdev_runtime_n_devices();
    for (int i = 0; i < n; i++) {
        struct vdev_ldev *d = vdev_runtime_device(i);
        uint64_t ops = 0, in = 0, out = 0;
        for (int t = 0; t < VDEV_MAX_OP_TYPES; t++)
            ops += atomic_load_explicit(&op_counts[t][i], memory_order_relaxed);
        for (int j = 0; j < VDEV_MAX_LDEVS; j++) {
            if (j == i)
                continue;
            in += atomic_load_explicit(&copy_bytes[j][i], memory_order_relaxed);
            out += atomic_load_explicit(&copy_bytes[i][j], memory_order_relaxed);
        }
        struct vdev_alloc_stats s;
        vdev_alloc_get_stats(d->alloc, &s);
        fprintf(f, "%-16s %10llu %12s %12s %12s %12s %12s %12s\n", d->name,
                (unsigned long long)ops, vdev_format_bytes(s.bytes_in_use, b[0], 32),
                vdev_format_bytes(s.peak_bytes_in_use, b[1], 32),
                vdev_format_bytes(s.bytes_reserved, b[2], 32),
                vdev_format_bytes(s.bytes_limit, b[3], 32), vdev_format_bytes(in, b[4], 32),
                vdev_format_bytes(out, b[5], 32));
    }
}
