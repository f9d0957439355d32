/* test_host_oom_ckpt.c — the host refusing memory, at every allocation in turn, in
 * checkpoints and the nn layer.
 *
 * As test_host_oom.c (the machinery is host_oom.h): each scenario runs once for each
 * of its host allocations refused in turn, then once with none refused; a call that
 * fails must say VDEV_ERR_OOM and only when the refusal came in it, the same call again
 * must succeed, and the run must end with the digest of the run without a refusal; the
 * sanitizer build's leak check reports what a failed path left.
 *
 * The scenarios: a training state (an MLP, Adam's slots and iteration count) saved with
 * metadata, saved again over the first file (through a link to it), read back as a
 * tool does (entries and metadata), and loaded into a fresh model and optimizer, which
 * then train on as the first (a save that failed must leave the old file as it was and
 * no temporary file; a load that failed must leave every tensor as it was); the nn
 * layer (a dense layer, MLPs under SGD with Nesterov momentum switched off and on, Adam
 * with AMSGrad, each clipping, weight decay with exclusions, slots handed out and given
 * back, the iteration count, updates of more variables than the stack holds, variables
 * freed under an optimizer); the checkpoint of a model mirrored on three simulated GPUs, one
 * file entry loaded into every replica; and a mirrored step's update as each replica
 * makes it, every replica's slots prepared first, after which the update must not fail.
 * The strategy's own runs go on other threads, where no refusal is set: here the
 * calling thread makes each replica's calls (test_mirrored_ckpt.c runs the strategy). */
#define _GNU_SOURCE
#include "host_oom.h"

#include "nn/nn.h" /* vdev_optimizer_prepare, as the mirrored strategy's step calls it */
#include "vdev/checkpoint.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A call returning a count, -1 on failure (vdev_optimizer_slots). */
#define RETRY_N(var, call)                                                                         \
    do {                                                                                           \
        before_call();                                                                             \
        if (((var) = (call)) < 0) {                                                                \
            failed_call(#call);                                                                    \
            CHECK(((var) = (call)) >= 0);                                                          \
        }                                                                                          \
    } while (0)

static char dir[64];   /* this process's folder: the checkpoint and nothing else */
static char path[128]; /* the checkpoint in it */
static char link_path[128]; /* a symbolic link to it, beside it */

/* ---- helpers -------------------------------------------------------------- */

/* The tensors' bytes, read back. */
/* The checkpoint file's bytes (nothing in it varies between equal saves). */
static uint64_t file_digest(void)
{
    static unsigned char buf[1 << 16];
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf, f);
    CHECK(n > 0 && n < sizeof buf);
    fclose(f);
    return mix(mix_bytes(0, buf, n), n);
}

/* Files in the folder: a failed save leaves no temporary file. */
static int dir_files(void)
{
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

/* A save to `to` (path, or a link to it): when it fails, path must hold what it held
 * (or still be missing) and no temporary file be left; then again. */
static void save(const char *to, const char *const *names, vdev_tensor_t *const *t, int n,
                 const char *const *meta, int n_meta)
{
    int files = dir_files(), had = access(path, F_OK) == 0;
    uint64_t old = had ? file_digest() : 0;
    before_call();
    if (vdev_checkpoint_save(to, names, t, n, meta, n_meta) != VDEV_OK) {
        failed_call("vdev_checkpoint_save");
        CHECK(dir_files() == files);
        CHECK(access(path, F_OK) == (had ? 0 : -1));
        if (had)
            CHECK_EQ_U64(file_digest(), old);
        CHECK_OK(vdev_checkpoint_save(to, names, t, n, meta, n_meta));
    }
    CHECK(dir_files() == files + !had);
}

/* A load from path: when it fails, every tensor must be as it was; then again. */
static void load(const char *const *names, vdev_tensor_t *const *t, int n)
{
    uint64_t was = tensors_digest(0, t, n);
    before_call();
    if (vdev_checkpoint_load(path, names, t, n) != VDEV_OK) {
        failed_call("vdev_checkpoint_load");
        CHECK_EQ_U64(tensors_digest(0, t, n), was);
        CHECK_OK(vdev_checkpoint_load(path, names, t, n));
    }
}

/* The model's variables' bytes. */
static uint64_t model_digest(uint64_t h, vdev_mlp_t *m)
{
    vdev_tensor_t *vars[16];
    int nv = vdev_mlp_variables(m, vars, 16);
    CHECK(nv > 0);
    return tensors_digest(h, vars, nv);
}

/* Every byte of every simulated GPU back, then shutdown. */
static void finish(int n_gpus)
{
    for (int g = 0; g < n_gpus; g++) {
        char dev[16];
        snprintf(dev, sizeof dev, "GPU:%d", g);
        struct vdev_memory_info mi;
        RETRY_OK(vdev_memory_info(dev, &mi));
        CHECK_EQ_U64(mi.bytes_in_use, 0);
    }
    vdev_shutdown();
}

/* ---- checkpoints ------------------------------------------------------------ */

static const int64_t ck_sizes[3] = {6, 8, 3};
#define CK_NV 4
#define CK_NT (3 * CK_NV + 1) /* variables, Adam's m and v, the iteration count */

/* A model's state as a checkpoint names it: "dense0/w", "dense0/w/m", "dense0/w/v",
 * ..., then "optimizer/iterations" (an I32 scalar holding it). */
struct ck_state {
    char names[CK_NT][32];
    const char *np[CK_NT];
    vdev_tensor_t *t[CK_NT];
};

static void ck_state(struct ck_state *s, vdev_mlp_t *m, vdev_optimizer_t *o)
{
    vdev_tensor_t *vars[CK_NV];
    CHECK(vdev_mlp_variables(m, vars, CK_NV) == CK_NV);
    int n = 0;
    for (int i = 0; i < CK_NV; i++) {
        char var[16];
        snprintf(var, sizeof var, "dense%d/%s", i / 2, i % 2 ? "b" : "w");
        snprintf(s->names[n], sizeof s->names[n], "%s", var);
        s->t[n++] = vars[i];
        vdev_tensor_t *sl[2] = {0};
        const char *sn[2] = {0};
        int k;
        RETRY_N(k, vdev_optimizer_slots(o, vars[i], sl, sn, 2));
        CHECK(k == 2);
        for (int j = 0; j < 2 && j < k; j++) {
            snprintf(s->names[n], sizeof s->names[n], "%s/%.8s", var, sn[j]);
            s->t[n++] = sl[j];
        }
    }
    int64_t it = -1;
    RETRY_OK(vdev_optimizer_get_iterations(o, &it));
    int32_t it32 = (int32_t)it;
    snprintf(s->names[n], sizeof s->names[n], "optimizer/iterations");
    RETRY_PTR(s->t[n], vdev_tensor_from_host(&it32, NULL, 0, VDEV_I32));
    n++;
    CHECK(n == CK_NT);
    for (int i = 0; i < CK_NT; i++)
        s->np[i] = s->names[i];
}

/* What a tool reads of the file: every entry and metadata pair. */
static uint64_t ck_read_header(uint64_t h)
{
    vdev_checkpoint_t *ck;
    RETRY_OK(vdev_checkpoint_open(path, &ck));
    if (!ck)
        return h;
    int n = vdev_checkpoint_n_entries(ck);
    CHECK(n == CK_NT);
    for (int i = 0; i < n; i++) {
        struct vdev_checkpoint_entry e;
        RETRY_OK(vdev_checkpoint_entry(ck, i, &e));
        h = mix_str(mix_str(h, e.name), e.dtype_name);
        h = mix(mix(mix(mix(h, (uint64_t)e.dtype), (uint64_t)e.ndim), e.offset_bytes),
                e.size_bytes);
        h = mix_bytes(h, e.shape, (size_t)e.ndim * sizeof *e.shape);
    }
    int nm = vdev_checkpoint_n_metadata(ck);
    CHECK(nm == 6); /* vdev's three and the caller's three */
    for (int i = 0; i < nm; i++) {
        const char *k, *v;
        RETRY_OK(vdev_checkpoint_metadata_at(ck, i, &k, &v));
        h = mix_str(mix_str(h, k), v);
    }
    vdev_checkpoint_close(ck);
    return h;
}

/* Train one step, save; train another, save over the first file through a symbolic link
 * to it; read the file back as a tool does; load it into a fresh model and optimizer,
 * which must then train on to the bits of the first. The digest: the losses, both
 * files, the header, the metadata, the state loaded and the two models after the last
 * step. */
static uint64_t checkpoints(void)
{
    check_fresh("1x64MiB");
    RETRY_OK(vdev_init());
    RETRY_OK(vdev_device_push("GPU:0"));
    vdev_mlp_t *m, *m2;
    vdev_optimizer_t *o, *o2;
    RETRY_PTR(m, vdev_mlp_new(ck_sizes, 3, VDEV_ACT_TANH, VDEV_ACT_NONE, 7));
    RETRY_PTR(o, vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f));
    uint64_t h = train(0, m, o, ck_sizes, 3, 0);

    struct ck_state s;
    ck_state(&s, m, o);
    const char *meta1[4] = {"step", "1", "optimizer/learning_rate", "0.01"};
    save(path, s.np, s.t, CK_NT, meta1, 2);
    h = mix(h, file_digest());
    vdev_tensor_free(s.t[CK_NT - 1]);

    h = train(h, m, o, ck_sizes, 3, 1);
    ck_state(&s, m, o); /* the same slots, a new count */
    /* over the first file, through a link to it, with a note long enough that the
     * header grows, and characters it escapes */
    static char note[3000];
    for (size_t i = 0; i + 1 < sizeof note; i++)
        note[i] = i % 97 == 0 ? '"' : i % 89 == 0 ? '\n' : (char)('a' + i % 26);
    const char *meta2[6] = {"step", "2", "optimizer/learning_rate", "0.01", "note", note};
    CHECK(symlink("ckpt.safetensors", link_path) == 0);
    save(link_path, s.np, s.t, CK_NT, meta2, 3);
    struct stat sb;
    CHECK(lstat(link_path, &sb) == 0 && S_ISLNK(sb.st_mode)); /* the link stays */
    unlink(link_path);
    h = mix(h, file_digest());
    RETRY_OK(vdev_optimizer_slots_release(o, NULL));

    h = ck_read_header(h);
    char step[16] = "";
    RETRY_OK(vdev_checkpoint_metadata(path, "step", step, sizeof step));
    CHECK_STR(step, "2");
    h = mix_str(h, step);

    /* A fresh model (another seed) and optimizer: everything from the file. */
    RETRY_PTR(m2, vdev_mlp_new(ck_sizes, 3, VDEV_ACT_TANH, VDEV_ACT_NONE, 99));
    RETRY_PTR(o2, vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f));
    struct ck_state s2;
    ck_state(&s2, m2, o2);
    load(NULL, NULL, 0); /* verifies the file */
    load(s2.np, s2.t, CK_NT);
    h = tensors_digest(h, s2.t, CK_NT);
    int32_t it = -1;
    RETRY_OK(vdev_tensor_to_host(s2.t[CK_NT - 1], &it, sizeof it));
    CHECK(it == 2);
    RETRY_OK(vdev_optimizer_set_iterations(o2, it));
    RETRY_OK(vdev_optimizer_slots_release(o2, NULL));
    vdev_tensor_free(s.t[CK_NT - 1]);
    vdev_tensor_free(s2.t[CK_NT - 1]);

    /* Both train on from step 2, to the same bits. */
    uint64_t a = train(0, m, o, ck_sizes, 3, 2), b = train(0, m2, o2, ck_sizes, 3, 2);
    CHECK_EQ_U64(a, b);
    a = model_digest(0, m);
    b = model_digest(0, m2);
    CHECK_EQ_U64(a, b);
    h = mix(h, a);

    vdev_optimizer_free(o2);
    vdev_optimizer_free(o);
    vdev_mlp_free(m2);
    vdev_mlp_free(m);
    vdev_device_pop();
    unlink(path);
    finish(1);
    return h;
}

/* ---- the nn layer ----------------------------------------------------------- */

static const int64_t nn_sizes[4] = {6, 10, 8, 3};
#define NN_NV 6
#define N_MANY 70 /* more variables than an update keeps on the stack (64) */

/* The biases of m excluded from o's weight decay. */
static void exclude_biases(vdev_optimizer_t *o, vdev_mlp_t *m)
{
    vdev_tensor_t *vars[NN_NV], *b[NN_NV / 2];
    CHECK(vdev_mlp_variables(m, vars, NN_NV) == NN_NV);
    for (int i = 0; i < NN_NV / 2; i++)
        b[i] = vars[2 * i + 1];
    RETRY_OK(vdev_optimizer_exclude_from_weight_decay(o, b, 1));
    RETRY_OK(vdev_optimizer_exclude_from_weight_decay(o, b, NN_NV / 2)); /* b[0] twice */
}

/* The slots of every variable of m, handed out: their bytes. */
static uint64_t slots_digest(uint64_t h, vdev_optimizer_t *o, vdev_mlp_t *m, int want)
{
    vdev_tensor_t *vars[NN_NV];
    CHECK(vdev_mlp_variables(m, vars, NN_NV) == NN_NV);
    for (int i = 0; i < NN_NV; i++) {
        vdev_tensor_t *sl[3];
        const char *sn[3];
        int k;
        RETRY_N(k, vdev_optimizer_slots(o, vars[i], sl, sn, 3));
        CHECK(k == want);
        for (int j = 0; j < k && j < 3; j++)
            h = mix_str(h, sn[j]);
        h = tensors_digest(h, sl, k < 0 ? 0 : k < 3 ? k : 3);
    }
    return h;
}

/* An update of N_MANY variables at once (their gradients on CPU:0), twice, by SGD with
 * momentum and by Adam with AMSGrad; then the variables freed, and their slots with
 * them at the optimizer's next call. */
static uint64_t many_variables(uint64_t h)
{
    vdev_tensor_t *v[N_MANY], *g[N_MANY];
    const int64_t shape[1] = {3};
    for (int i = 0; i < N_MANY; i++) {
        vdev_tensor_t *t;
        RETRY_PTR(t, vdev_tensor_uniform(shape, 1, -1, 1, 500 + (uint64_t)i));
        RETRY_PTR(v[i], vdev_variable(t));
    }
    RETRY_OK(vdev_device_push("CPU:0")); /* the update copies them to the GPU first */
    for (int i = 0; i < N_MANY; i++)
        RETRY_PTR(g[i], vdev_tensor_uniform(shape, 1, -1, 1, 900 + (uint64_t)i));
    vdev_device_pop();
    vdev_optimizer_t *o, *a;
    RETRY_PTR(o, vdev_sgd_new(0.1f, 0.5f));
    RETRY_OK(vdev_optimizer_set_clipping(o, 0, 0.3f, 0)); /* clipvalue */
    RETRY_PTR(a, vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f));
    RETRY_OK(vdev_adam_set_amsgrad(a, true)); /* two ops an update */
    for (int k = 0; k < 2; k++) {
        RETRY_OK(vdev_optimizer_apply(o, v, g, N_MANY));
        RETRY_OK(vdev_optimizer_apply(a, v, g, N_MANY));
    }
    h = tensors_digest(h, v, N_MANY);
    for (int i = 0; i < N_MANY; i++) {
        vdev_tensor_free(v[i]);
        vdev_tensor_free(g[i]);
    }
    RETRY_OK(vdev_optimizer_slots_release(o, NULL)); /* the slots of the freed go */
    vdev_optimizer_free(o);
    vdev_optimizer_free(a);
    return h;
}

/* A dense layer's output; three MLPs trained four steps: SGD with Nesterov momentum,
 * clipnorm and weight decay (the biases excluded), its momentum switched off while its
 * velocities are handed out and on again; Adam with global_clipnorm and weight decay,
 * AMSGrad switched on after a step, new hyperparameters, its count set; SGD with
 * weight decay, momentum and clipvalue switched on after a step, whose model is freed
 * and replaced under it. The digest: the outputs, the losses, the slots and
 * the final variables. */
static uint64_t nn_layer(void)
{
    check_fresh("1x64MiB");
    RETRY_OK(vdev_init());
    RETRY_OK(vdev_device_push("GPU:0"));
    uint64_t h = 0;

    vdev_dense_t *d;
    vdev_tensor_t *x, *y;
    RETRY_PTR(d, vdev_dense_new(6, 5, VDEV_ACT_RELU, 3));
    RETRY_PTR(x, vdev_tensor_uniform((const int64_t[]){4, 6}, 2, -1, 1, 5));
    RETRY_PTR(y, vdev_dense_forward(d, x));
    h = tensors_digest(h, &y, 1);
    vdev_tensor_free(y);
    vdev_tensor_free(x);
    vdev_dense_free(d);

    vdev_mlp_t *m[3];
    vdev_optimizer_t *o[3];
    for (int i = 0; i < 3; i++)
        RETRY_PTR(m[i], vdev_mlp_new(nn_sizes, 4, VDEV_ACT_RELU, VDEV_ACT_NONE, 10 + (uint64_t)i));
    RETRY_PTR(o[0], vdev_sgd_new(0.05f, 0.9f));
    RETRY_OK(vdev_sgd_set_nesterov(o[0], true));
    RETRY_OK(vdev_optimizer_set_clipping(o[0], 1.0f, 0, 0));
    RETRY_OK(vdev_optimizer_set_weight_decay(o[0], 0.01f));
    exclude_biases(o[0], m[0]);
    RETRY_PTR(o[1], vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f));
    RETRY_OK(vdev_optimizer_set_clipping(o[1], 0, 0, 0.5f));
    RETRY_OK(vdev_optimizer_set_weight_decay(o[1], 0.004f));
    exclude_biases(o[1], m[1]);
    RETRY_PTR(o[2], vdev_sgd_new(0.1f, 0));
    RETRY_OK(vdev_optimizer_set_weight_decay(o[2], 0.02f));
    exclude_biases(o[2], m[2]);

    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 3; i++)
            h = train(h, m[i], o[i], nn_sizes, 4, k);
        if (k == 0) {
            /* made by the next update for the records there: vhat, o[2]'s velocities
             * and clipping scratch */
            RETRY_OK(vdev_adam_set_amsgrad(o[1], true));
            h = slots_digest(h, o[2], m[2], 0);
            RETRY_OK(vdev_sgd_set(o[2], 0.1f, 0.5f));
            RETRY_OK(vdev_optimizer_set_clipping(o[2], 0, 0.1f, 0));
        }
        if (k == 1) {
            h = slots_digest(h, o[0], m[0], 1); /* the velocities, handed out */
            RETRY_OK(vdev_sgd_set(o[0], 0.05f, 0)); /* kept, zeroed */
            h = slots_digest(h, o[1], m[1], 3); /* m, v, vhat */
            RETRY_OK(vdev_adam_set(o[1], 0.005f, 0.8f, 0.99f, 1e-6f));
            int64_t it = -1;
            RETRY_OK(vdev_optimizer_get_iterations(o[1], &it));
            CHECK(it == 2);
            RETRY_OK(vdev_optimizer_set_iterations(o[1], it + 10));
            RETRY_OK(vdev_optimizer_slots_release(o[1], NULL));
        }
        if (k == 2) {
            h = slots_digest(h, o[0], m[0], 0); /* no momentum: none */
            RETRY_OK(vdev_optimizer_slots_release(o[0], NULL)); /* the zeroed ones go */
            RETRY_OK(vdev_sgd_set(o[0], 0.05f, 0.9f)); /* made again by the next update */
            /* o[2]'s model replaced: its variables' records go at its next call */
            h = model_digest(h, m[2]);
            vdev_mlp_free(m[2]);
            RETRY_PTR(m[2], vdev_mlp_new(nn_sizes, 4, VDEV_ACT_TANH, VDEV_ACT_NONE, 20));
            exclude_biases(o[2], m[2]); /* the old ones' exclusions go first */
        }
    }
    h = slots_digest(h, o[0], m[0], 1);
    RETRY_OK(vdev_optimizer_slots_release(o[0], NULL));
    for (int i = 0; i < 3; i++)
        h = model_digest(h, m[i]);
    int64_t it = -1;
    RETRY_OK(vdev_optimizer_get_iterations(o[1], &it));
    CHECK(it == 14);
    h = mix(h, (uint64_t)it);

    h = many_variables(h);
    for (int i = 0; i < 3; i++) {
        vdev_optimizer_free(o[i]);
        vdev_mlp_free(m[i]);
    }
    vdev_device_pop();
    finish(1);
    return h;
}

/* ---- a mirrored model's checkpoint --------------------------------------------- */

#define N_REPLICAS 3

/* The model on three GPUs (each from its own seed, as before a broadcast); replica 0's
 * variables saved; the file loaded into every replica at once, each entry into three
 * tensors. The digest: the file and every replica's variables, which must be replica
 * 0's. */
static uint64_t mirrored(void)
{
    check_fresh("3x64MiB");
    RETRY_OK(vdev_init());
    vdev_mlp_t *m[N_REPLICAS];
    vdev_tensor_t *vars[N_REPLICAS][CK_NV];
    for (int r = 0; r < N_REPLICAS; r++) {
        char dev[16];
        snprintf(dev, sizeof dev, "GPU:%d", r);
        RETRY_OK(vdev_device_push(dev));
        RETRY_PTR(m[r], vdev_mlp_new(ck_sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, 30 + (uint64_t)r));
        vdev_device_pop();
        CHECK(vdev_mlp_variables(m[r], vars[r], CK_NV) == CK_NV);
    }
    static const char *const names[CK_NV] = {"dense0/w", "dense0/b", "dense1/w", "dense1/b"};
    const char *meta[2] = {"replicas", "3"};
    save(path, names, vars[0], CK_NV, meta, 1);
    uint64_t h = file_digest();
    uint64_t want = tensors_digest(0, vars[0], CK_NV);

    /* replica 0 changes: the file must bring it back too */
    vdev_optimizer_t *o;
    RETRY_PTR(o, vdev_sgd_new(0.1f, 0));
    RETRY_OK(vdev_device_push("GPU:0"));
    h = train(h, m[0], o, ck_sizes, 3, 0);
    vdev_device_pop();
    vdev_optimizer_free(o);

    const char *nm[N_REPLICAS * CK_NV];
    vdev_tensor_t *t[N_REPLICAS * CK_NV];
    for (int r = 0; r < N_REPLICAS; r++)
        for (int i = 0; i < CK_NV; i++) {
            nm[r * CK_NV + i] = names[i];
            t[r * CK_NV + i] = vars[r][i];
        }
    load(nm, t, N_REPLICAS * CK_NV);
    for (int r = 0; r < N_REPLICAS; r++) {
        uint64_t got = tensors_digest(0, vars[r], CK_NV);
        CHECK_EQ_U64(got, want);
        h = mix(h, got);
    }
    for (int r = 0; r < N_REPLICAS; r++)
        vdev_mlp_free(m[r]);
    unlink(path);
    finish(N_REPLICAS);
    return h;
}

/* ---- a mirrored step's update, as each replica makes it ------------------------ */

/* The mirrored strategy's step (replica.c) makes every replica's slots first
 * (vdev_optimizer_prepare), takes them back on every replica when one could not make
 * its own (vdev_optimizer_unprepare), and only when all could, updates: an update that
 * fails then leaves the replicas differing, so the strategy aborts. The replicas' own
 * threads have no refusal set; here the calling thread makes each replica's calls in
 * turn. After a prepare, the update allocates nothing: it must not fail. */
static void prepare_all(vdev_optimizer_t *const *o, vdev_tensor_t *const *vars, int nv, int n)
{
    for (int r = 0; r < n; r++) {
        before_call();
        if (vdev_optimizer_prepare(o[r], vars + r * nv, nv) == VDEV_OK)
            continue;
        failed_call("vdev_optimizer_prepare");
        while (r-- > 0) /* the others take theirs back, and the step starts again */
            vdev_optimizer_unprepare(o[r]);
        r = -1;
    }
}

/* Three replicas of an MLP (Adam with AMSGrad and global_clipnorm; SGD with momentum
 * and clipnorm) and an update of N_MANY variables, each step prepared on every replica
 * first. The digest: the losses and the variables (each replica's own batch: they
 * differ). */
static uint64_t mirrored_update(void)
{
    check_fresh("3x64MiB");
    RETRY_OK(vdev_init());
    uint64_t h = 0;
    for (int adam = 0; adam < 2; adam++) {
        vdev_mlp_t *m[N_REPLICAS];
        vdev_optimizer_t *o[N_REPLICAS];
        vdev_tensor_t *vars[N_REPLICAS * CK_NV];
        for (int r = 0; r < N_REPLICAS; r++) {
            char dev[16];
            snprintf(dev, sizeof dev, "GPU:%d", r);
            RETRY_OK(vdev_device_push(dev));
            RETRY_PTR(m[r], vdev_mlp_new(ck_sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, 40));
            vdev_device_pop();
            CHECK(vdev_mlp_variables(m[r], vars + r * CK_NV, CK_NV) == CK_NV);
            if (adam) {
                RETRY_PTR(o[r], vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f));
                RETRY_OK(vdev_adam_set_amsgrad(o[r], true));
                RETRY_OK(vdev_optimizer_set_clipping(o[r], 0, 0, 0.5f));
            } else {
                RETRY_PTR(o[r], vdev_sgd_new(0.05f, 0.9f));
                RETRY_OK(vdev_optimizer_set_clipping(o[r], 0.8f, 0, 0));
            }
        }
        for (int k = 0; k < 2; k++) {
            vdev_tensor_t *grads[N_REPLICAS * CK_NV], *loss[N_REPLICAS];
            for (int r = 0; r < N_REPLICAS; r++) {
                char dev[16];
                snprintf(dev, sizeof dev, "GPU:%d", r);
                RETRY_OK(vdev_device_push(dev));
                vdev_tensor_t *x, *y, *pred;
                const int64_t xs[2] = {4, 6}, ys[2] = {4, 3};
                uint64_t seed = 10 * (uint64_t)k + (uint64_t)r;
                RETRY_PTR(x, vdev_tensor_uniform(xs, 2, -1, 1, 300 + seed));
                RETRY_PTR(y, vdev_tensor_uniform(ys, 2, -1, 1, 400 + seed));
                vdev_tape_t *tape;
                RETRY_PTR(tape, vdev_tape_begin());
                RETRY_PTR(pred, vdev_mlp_forward(m[r], x));
                RETRY_PTR(loss[r], vdev_mse(pred, y));
                RETRY_OK(vdev_tape_gradient(tape, loss[r], vars + r * CK_NV, CK_NV,
                                            grads + r * CK_NV));
                vdev_tape_end(tape);
                vdev_device_pop();
                vdev_tensor_free(x);
                vdev_tensor_free(y);
                vdev_tensor_free(pred);
            }
            prepare_all(o, vars, CK_NV, N_REPLICAS);
            for (int r = 0; r < N_REPLICAS; r++)
                CHECK_OK(vdev_optimizer_apply(o[r], vars + r * CK_NV, grads + r * CK_NV, CK_NV));
            h = tensors_digest(h, loss, N_REPLICAS);
            for (int i = 0; i < N_REPLICAS * CK_NV; i++)
                vdev_tensor_free(grads[i]);
            for (int r = 0; r < N_REPLICAS; r++)
                vdev_tensor_free(loss[r]);
        }
        h = tensors_digest(h, vars, N_REPLICAS * CK_NV);
        for (int r = 0; r < N_REPLICAS; r++) {
            vdev_optimizer_free(o[r]);
            vdev_mlp_free(m[r]);
        }
    }

    /* N_MANY variables on one replica, more than an update keeps on its stack: the
     * prepare takes the scratch the apply will use (nn/scratch.c), so the apply after
     * it must not fail */
    vdev_tensor_t *v[N_MANY], *g[N_MANY];
    const int64_t shape[1] = {3};
    RETRY_OK(vdev_device_push("GPU:1"));
    for (int i = 0; i < N_MANY; i++) {
        vdev_tensor_t *t;
        RETRY_PTR(t, vdev_tensor_uniform(shape, 1, -1, 1, 600 + (uint64_t)i));
        RETRY_PTR(v[i], vdev_variable(t));
        RETRY_PTR(g[i], vdev_tensor_uniform(shape, 1, -1, 1, 700 + (uint64_t)i));
    }
    vdev_device_pop();
    vdev_optimizer_t *o;
    RETRY_PTR(o, vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f));
    RETRY_OK(vdev_adam_set_amsgrad(o, true));
    RETRY_OK(vdev_optimizer_set_clipping(o, 0, 0, 0.5f));
    prepare_all(&o, v, N_MANY, 1);
    CHECK_OK(vdev_optimizer_apply(o, v, g, N_MANY));
    h = tensors_digest(h, v, N_MANY);
    vdev_optimizer_free(o);
    for (int i = 0; i < N_MANY; i++) {
        vdev_tensor_free(v[i]);
        vdev_tensor_free(g[i]);
    }
    finish(N_REPLICAS);
    return h;
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/vdev-host-oom-ckpt-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    snprintf(link_path, sizeof link_path, "%s/link.safetensors", dir);
    sweep("checkpoints: save, save over, read, load, resume", checkpoints);
    sweep("nn: dense, MLPs, SGD, Adam, clipping, weight decay, slots", nn_layer);
    sweep("checkpoint of a model on three GPUs, loaded into every replica", mirrored);
    sweep("a mirrored step's update: prepared on every replica, then made", mirrored_update);
    unlink(path);
    CHECK(rmdir(dir) == 0);
    return check_done();
}
