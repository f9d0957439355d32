/* env.c — parsers for the environment variables of the configuration, and
 * for sizes that must be a whole number of bytes.
 *
 * Each parser takes the variable's name and value and either fills its
 * output or fails with VDEV_ERR_CONFIG and a message that names the variable,
 * quotes the value and points at the bad part. Lists are split with strsep,
 * so an empty part ("0:true,") is an error rather than skipped. Where a
 * variable mirrors a TensorFlow setting, the message uses TensorFlow's words
 * (ParseVisibleDeviceList's for VDEV_VISIBLE_DEVICES). */
#define _GNU_SOURCE
#include "config/internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#define MIB (1ull << 20)

enum vdev_status vdev_config_parse_bool(const char *var, const char *v, int *out)
{
    *out = 0; /* written on every path, so callers never read an unset value */
    if (vdev_strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0) {
        *out = 1;
        return VDEV_OK;
    }
    if (vdev_strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0) {
        *out = 0;
        return VDEV_OK;
    }
    return vdev_error(VDEV_ERR_CONFIG,
                      "%s=\"%s\" could not be parsed: valid values are true or false (any case), "
                      "1 or 0",
                      var, v);
}

/* ---- sizes ---- */

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The value of the decimal number at *p ("1.5", "2e6", "0.25"), exactly, as
 * a mantissa m and a power of ten k (value = m × 10^k); advances *p past it.
 * 0 when the number has more significant digits than fit m. */
static int read_decimal(const char **p, uint64_t *m, int *k)
{
    const char *q = *p;
    uint64_t mant = 0;
    int exp10 = 0, digits = 0, overflow = 0;
    int pending_zeros = 0; /* fraction zeros not yet known to be significant */
    for (; isdigit((unsigned char)*q); q++) {
        if (mant > (UINT64_MAX - 9) / 10)
            overflow = 1;
        else
            mant = mant * 10 + (uint64_t)(*q - '0');
        digits++;
    }
    if (*q == '.') {
        for (q++; isdigit((unsigned char)*q); q++) {
            if (*q == '0') {
                pending_zeros++;
                continue;
            }
            for (; pending_zeros > 0; pending_zeros--, exp10--) {
                if (mant > UINT64_MAX / 10)
                    overflow = 1;
                else
                    mant *= 10;
            }
            if (mant > (UINT64_MAX - 9) / 10)
                overflow = 1;
            else
                mant = mant * 10 + (uint64_t)(*q - '0');
            exp10--;
            digits++;
        }
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        int sign = 1, e = 0;
        if (*q == '+' || *q == '-')
            sign = *q++ == '-' ? -1 : 1;
        for (; isdigit((unsigned char)*q); q++)
            e = e < 10000 ? e * 10 + (*q - '0') : e;
        exp10 += sign * e;
    }
    *p = q;
    *m = mant;
    *k = exp10;
    return digits > 0 && !overflow;
}

enum vdev_status vdev_config_parse_size(const char *text, uint64_t *out, int *not_whole)
{
    *not_whole = 0;
    uint64_t approx;
    if (vdev_parse_bytes(text, &approx) != VDEV_OK)
        return VDEV_ERR_PARSE;
    /* The unit's multiplier: what vdev_parse_bytes makes of "1<unit>". */
    const char *p = text;
    while (*p == ' ')
        p++;
    uint64_t m;
    int k;
    int exact = read_decimal(&p, &m, &k);
    while (*p == ' ')
        p++;
    uint64_t mult = 1;
    if (*p) {
        char one[32];
        if (snprintf(one, sizeof one, "1%s", p) >= (int)sizeof one ||
            vdev_parse_bytes(one, &mult) != VDEV_OK)
            return VDEV_ERR_PARSE;
    }
    if (!exact || m == 0 || k > 19 || k < -19) {
        /* Too many digits to reason about exactly (or zero): as parsed. */
        if (m != 0 && k < -19) {
            *not_whole = 1;
            return VDEV_ERR_PARSE;
        }
        *out = approx;
        return VDEV_OK;
    }
    if (k >= 0) {
        *out = approx; /* a whole number times a power of ten: whole */
        return VDEV_OK;
    }
    uint64_t pow10 = 1;
    for (int i = 0; i < -k; i++)
        pow10 *= 10;
    /* m × mult / 10^-k must be whole: with g = gcd(mult, 10^-k), m must be a
     * multiple of 10^-k / g. */
    uint64_t g = gcd_u64(mult, pow10), need = pow10 / g;
    if (m % need != 0) {
        *not_whole = 1;
        return VDEV_ERR_PARSE;
    }
    uint64_t q = m / need, per = mult / g;
    *out = (per && q > UINT64_MAX / per) ? approx : q * per;
    return VDEV_OK;
}

/* ---- per-GPU lists ---- */

/* Reads the "N:" that starts a per-GPU part of a variable: digits (no sign,
 * no space), then ':'. Returns N and sets *after to what follows the ':', or
 * returns -1 when the part does not start that way. */
static long part_gpu(char *part, char **after)
{
    char *c = part;
    long gpu = 0;
    if (!isdigit((unsigned char)*c))
        return -1;
    for (; isdigit((unsigned char)*c); c++) {
        gpu = gpu * 10 + (*c - '0');
        if (gpu > 1000000)
            return -1;
    }
    if (*c != ':')
        return -1;
    *after = c + 1;
    return gpu;
}

/* VDEV_MEMORY_GROWTH: "true" for every GPU, or per GPU "0:true,1:false".
 * A value that is neither names both forms (the boolean parser's message
 * knows only the first). */
enum vdev_status vdev_env_growth(const char *var, const char *v, int n_gpus,
                                 int growth[VDEV_MAX_GPUS])
{
    if (!strchr(v, ':')) {
        int b;
        if (vdev_config_parse_bool(var, v, &b) != VDEV_OK)
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\" could not be parsed: valid values are true or false "
                              "(any case), 1 or 0, or per GPU 0:true,1:false",
                              var, v);
        for (int i = 0; i < VDEV_MAX_GPUS; i++)
            growth[i] = b;
        return VDEV_OK;
    }
    char buf[512];
    if (strlen(v) >= sizeof buf)
        return vdev_error(VDEV_ERR_CONFIG, "%s is too long", var);
    vdev_strlcpy(buf, v, sizeof buf);
    int seen[VDEV_MAX_GPUS] = {0};
    char *rest = buf;
    for (char *part; (part = strsep(&rest, ",")) != NULL;) {
        char *val;
        long gpu = part_gpu(part, &val);
        if (gpu < 0)
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\": bad part '%s' (expected true, false, or per GPU "
                              "0:true,1:false)",
                              var, v, part);
        if (gpu >= n_gpus)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": there is no GPU %ld (%d GPU%s)",
                              var, v, gpu, n_gpus, n_gpus == 1 ? "" : "s");
        if (seen[gpu])
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": GPU %ld is given twice", var, v, gpu);
        seen[gpu] = 1;
        int b;
        if (vdev_config_parse_bool(var, val, &b) != VDEV_OK)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": bad value '%s' for GPU %ld (true, "
                                               "false, 1 or 0)",
                              var, v, val, gpu);
        growth[gpu] = b;
    }
    return VDEV_OK;
}

/* A decimal fraction such as 0.5 or 1: digits and at most one '.', nothing
 * else (strtod alone would also take " 0.5", "5e-1", "0x0.8p0" and "nan").
 * 0 (or 0.0) means no fraction, as vdev_config_set_memory_fraction(0) and
 * TensorFlow Serving's default of 0 do: *out is 0 and the caller applies none. */
enum vdev_status vdev_env_fraction(const char *var, const char *v, double *out)
{
    int digits = 0, dots = 0;
    const char *q = v;
    for (; *q; q++) {
        if (isdigit((unsigned char)*q))
            digits++;
        else if (*q == '.')
            dots++;
        else
            break;
    }
    double f = (digits && dots <= 1 && !*q) ? strtod(v, NULL) : -1.0;
    if (!(f >= 0.0 && f <= 1.0))
        return vdev_error(VDEV_ERR_CONFIG,
                          "%s=\"%s\" is not a fraction in [0, 1] (e.g. 0.5 for half of each "
                          "GPU's total memory; 0 for none)",
                          var, v);
    *out = f;
    return VDEV_OK;
}

uint64_t vdev_config_fraction_budget(uint64_t total, double fraction)
{
    return (uint64_t)((double)total * fraction) & ~(uint64_t)255;
}

void vdev_config_min_fraction(uint64_t total, char *out, size_t cap)
{
    /* 1 MiB plus the 256-byte rounding, so the budget itself reaches 1 MiB. */
    double f = total ? (double)(MIB + 256) / (double)total : 1.0;
    if (f >= 1.0) {
        snprintf(out, cap, "1");
        return;
    }
    int e = (int)floor(log10(f));
    int decimals = 1 - e; /* two significant digits */
    double scale = pow(10.0, decimals);
    double v = ceil(f * scale - 1e-9) / scale;
    snprintf(out, cap, "%.*f", decimals, v);
}

/* `s` without the spaces around it: the spaces after it are cut off in
 * place, and the result starts at its first non-space. VDEV_LOGICAL_DEVICES
 * takes spaces around each of its parts, as VDEV_SIM_GPUS does. */
static char *trim_spaces(char *s)
{
    s += strspn(s, " ");
    size_t len = strlen(s);
    while (len && s[len - 1] == ' ')
        s[--len] = '\0';
    return s;
}

/* One size of VDEV_LOGICAL_DEVICES (`what`: "limit", "floor" or "ceiling"):
 * a whole number of bytes, 1 MiB or more; a floor may also be 0 (none). */
static enum vdev_status env_limit(const char *var, const char *v, char *lim, long gpu,
                                  const char *what, uint64_t *out)
{
    int not_whole;
    uint64_t bytes = 0;
    if (vdev_config_parse_size(lim, &bytes, &not_whole) != VDEV_OK) {
        /* vdev_parse_bytes's words for a size beyond 64 bits */
        if (!not_whole && strstr(vdev_last_error(), "' is too large"))
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": %s '%s' for GPU %ld is too large", var,
                              v, what, lim, gpu);
        if (not_whole)
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\": %s '%s' for GPU %ld is not a whole number of bytes "
                              "(a fraction needs a unit that makes it whole, e.g. 1.5GiB)",
                              var, v, what, lim, gpu);
        return vdev_error(VDEV_ERR_CONFIG,
                          "%s=\"%s\": bad %s '%s' for GPU %ld (a size such as 4GiB)", var, v,
                          what, lim, gpu);
    }
    int is_floor = what[0] == 'f';
    if (bytes < MIB && !(is_floor && bytes == 0)) {
        int unitless = 1;
        for (const char *c = lim; *c; c++)
            unitless &= isdigit((unsigned char)*c) || *c == '.';
        char hint[96];
        if (bytes == 0 && what[0] == 'c')
            snprintf(hint, sizeof hint, " (leave it out for the card's budget: FLOOR..)");
        else if (unitless && bytes)
            snprintf(hint, sizeof hint, " (did you mean %sMiB?)", lim);
        else
            hint[0] = '\0';
        return vdev_error(VDEV_ERR_CONFIG,
                          "%s=\"%s\": %s '%s' for GPU %ld is %llu bytes, less than 1 MiB%s",
                          var, v, what, lim, gpu, (unsigned long long)bytes, hint);
    }
    *out = bytes;
    return VDEV_OK;
}

/* "low", "normal", "high", "critical" in any case; VDEV_PRIORITY_COUNT
 * for anything else. */
static enum vdev_priority priority_of(const char *name)
{
    for (int p = VDEV_PRIORITY_LOW; p < VDEV_PRIORITY_COUNT; p++)
        if (vdev_strcasecmp(name, vdev_priority_name((enum vdev_priority)p)) == 0)
            return (enum vdev_priority)p;
    return VDEV_PRIORITY_COUNT;
}

/* One logical device: "4GiB", "2GiB..6GiB", "..6GiB", "2GiB..", "..", each
 * optionally followed by "@PRIORITY". */
static enum vdev_status env_device(const char *var, const char *v, char *spec, long gpu,
                                   struct vdev_logical_device_config *d)
{
    enum vdev_status st;
    memset(d, 0, sizeof *d);
    d->priority = VDEV_PRIORITY_NORMAL;
    spec = trim_spaces(spec);
    char *at = strchr(spec, '@');
    if (at) {
        *at = '\0';
        char *prio = trim_spaces(at + 1);
        spec = trim_spaces(spec);
        d->priority = priority_of(prio);
        if (d->priority == VDEV_PRIORITY_COUNT)
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\": bad priority '%s' for GPU %ld (low, normal, high or "
                              "critical)",
                              var, v, prio, gpu);
    }
    char *dots = strstr(spec, "..");
    if (!dots) {
        if ((st = env_limit(var, v, spec, gpu, "limit", &d->ceiling_bytes)) != VDEV_OK)
            return st;
        d->floor_bytes = d->ceiling_bytes;
        return VDEV_OK;
    }
    *dots = '\0';
    char *ceil = trim_spaces(dots + 2);
    spec = trim_spaces(spec);
    if (*spec && (st = env_limit(var, v, spec, gpu, "floor", &d->floor_bytes)) != VDEV_OK)
        return st;
    if (*ceil == '.')
        return vdev_error(VDEV_ERR_CONFIG,
                          "%s=\"%s\": bad ceiling '%s' for GPU %ld (FLOOR..CEILING, e.g. "
                          "2GiB..6GiB)",
                          var, v, ceil, gpu);
    if (*ceil && (st = env_limit(var, v, ceil, gpu, "ceiling", &d->ceiling_bytes)) != VDEV_OK)
        return st;
    if (d->ceiling_bytes && d->floor_bytes > d->ceiling_bytes)
        return vdev_error(VDEV_ERR_CONFIG,
                          "%s=\"%s\": floor '%s' for GPU %ld is above its ceiling '%s'", var, v,
                          spec, gpu, ceil);
    return VDEV_OK;
}

enum vdev_status vdev_config_parse_split(const char *var, const char *v, char *list, long gpu,
                                         struct vdev_logical_device_config *out, int *n)
{
    *n = 0;
    for (char *spec; (spec = strsep(&list, ",")) != NULL;) {
        if (*n == VDEV_MAX_LOGICAL_PER_GPU)
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\": more than %d logical devices on GPU %ld", var, v,
                              VDEV_MAX_LOGICAL_PER_GPU, gpu);
        enum vdev_status st = env_device(var, v, spec, gpu, &out[*n]);
        if (st != VDEV_OK)
            return st;
        (*n)++;
    }
    return VDEV_OK;
}

/* "cpu:N": N logical CPUs, 1 to VDEV_MAX_LOGICAL_CPUS. */
static enum vdev_status env_cpus(const char *var, const char *v, const char *count, int *n_cpus)
{
    long n = 0;
    const char *c = count;
    for (; isdigit((unsigned char)*c) && n <= VDEV_MAX_LOGICAL_CPUS; c++)
        n = n * 10 + (*c - '0');
    if (c == count || *c || n < 1 || n > VDEV_MAX_LOGICAL_CPUS)
        return vdev_error(VDEV_ERR_CONFIG,
                          "%s=\"%s\": bad CPU count '%s' (1 to %d logical CPUs, e.g. cpu:4)", var,
                          v, count, VDEV_MAX_LOGICAL_CPUS);
    *n_cpus = (int)n;
    return VDEV_OK;
}

/* VDEV_LOGICAL_DEVICES="cpu:4;0:4GiB@critical,2GiB..6GiB;1:3GiB", with
 * spaces allowed around each part. Empty groups and empty limits ("0:4GiB,",
 * "0:4GiB; ") are errors; a value of spaces only is empty. */
enum vdev_status vdev_env_logical(const char *var, const char *v, int n_gpus,
                                  struct vdev_gpu_cfg *cfg, int set[VDEV_MAX_GPUS], int *n_cpus)
{
    char buf[1024];
    *n_cpus = 0;
    if (strlen(v) >= sizeof buf)
        return vdev_error(VDEV_ERR_CONFIG, "%s is too long", var);
    if (!v[strspn(v, " ")])
        return vdev_error(VDEV_ERR_CONFIG, "%s is empty (expected e.g. 0:4GiB,2GiB;1:3GiB)",
                          var);
    vdev_strlcpy(buf, v, sizeof buf);
    char *rest = buf;
    for (char *grp; (grp = strsep(&rest, ";")) != NULL;) {
        /* spaces around a group, its ':' and its parts: " 0 : 2GiB , 1GiB ; cpu : 4 " */
        grp = trim_spaces(grp);
        if (vdev_strncasecmp(grp, "cpu", 3) == 0 && grp[3 + strspn(grp + 3, " ")] == ':') {
            if (*n_cpus)
                return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": the CPU is given twice", var, v);
            enum vdev_status st = env_cpus(var, v, trim_spaces(strchr(grp, ':') + 1), n_cpus);
            if (st != VDEV_OK)
                return st;
            continue;
        }
        char *lims = NULL, *colon = strchr(grp, ':');
        long gpu = -1;
        if (colon) {
            /* the GPU's number without the spaces before its ':' ("0 :4GiB") */
            char *num_end = colon;
            while (num_end > grp && num_end[-1] == ' ')
                num_end--;
            char saved = *num_end;
            *num_end = ':';
            gpu = part_gpu(grp, &lims);
            *num_end = saved;
            lims = trim_spaces(colon + 1);
        }
        if (gpu < 0)
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\": bad part '%s' (expected GPU:LIMIT[,LIMIT...] or cpu:N, "
                              "e.g. 0:4GiB,2GiB;1:3GiB or cpu:4)",
                              var, v, grp);
        if (gpu >= n_gpus)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": there is no GPU %ld (%d GPU%s)",
                              var, v, gpu, n_gpus, n_gpus == 1 ? "" : "s");
        if (set[gpu])
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": GPU %ld is given twice", var, v, gpu);
        set[gpu] = 1;
        struct vdev_gpu_cfg *g = &cfg[gpu];
        g->n_logical = 0;
        if (!*lims)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": GPU %ld has no limits", var, v, gpu);
        struct vdev_logical_device_config devs[VDEV_MAX_LOGICAL_PER_GPU];
        int n = 0;
        enum vdev_status st = vdev_config_parse_split(var, v, lims, gpu, devs, &n);
        if (st != VDEV_OK)
            return st;
        for (int i = 0; i < n; i++) {
            g->limits[i] = devs[i].ceiling_bytes;
            g->floors[i] = devs[i].floor_bytes;
            g->prios[i] = devs[i].priority;
        }
        g->n_logical = n;
    }
    return VDEV_OK;
}

/* VDEV_VISIBLE_DEVICES="0,2"; "" hides every GPU, as CUDA_VISIBLE_DEVICES.
 * Errors in the words of TensorFlow's ParseVisibleDeviceList, naming the
 * variable where TensorFlow names visible_device_list. */
enum vdev_status vdev_env_visible(const char *var, const char *v, int n_gpus, int *vis,
                                  int *n_out)
{
    char buf[512];
    if (strlen(v) >= sizeof buf)
        return vdev_error(VDEV_ERR_CONFIG, "%s is too long", var);
    *n_out = 0;
    if (!*v)
        return VDEV_OK;
    vdev_strlcpy(buf, v, sizeof buf);
    /* "-1" alone hides every GPU, as CUDA_VISIBLE_DEVICES=-1 does (CUDA
     * stops at the first index that names no device). */
    const char *t = v + strspn(v, " ");
    if (strncmp(t, "-1", 2) == 0 && t[2 + strspn(t + 2, " ")] == '\0')
        return VDEV_OK;
    int n = 0;
    char *rest = buf;
    for (char *entry; (entry = strsep(&rest, ",")) != NULL;) {
        /* spaces around an index are allowed, as TensorFlow's safe_strto32 */
        long idx = 0;
        const char *c = entry + strspn(entry, " "), *start = c;
        for (; isdigit((unsigned char)*c) && idx <= 1000000; c++)
            idx = idx * 10 + (*c - '0');
        int digits = c != start;
        c += strspn(c, " ");
        if (!digits || *c || idx > 1000000)
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\": Could not parse entry in '%s': '%s'. %s = %s (expected "
                              "GPU indices such as 0,2; empty or -1 hides every GPU)",
                              var, v, var, entry, var, v);
        if (idx >= n_gpus)
            return vdev_error(VDEV_ERR_CONFIG,
                              "%s=\"%s\": '%s' listed an invalid Device id '%ld' but visible "
                              "device count is %d",
                              var, v, var, idx, n_gpus);
        if (n == VDEV_MAX_GPUS)
            return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": %s contained a duplicate entry: %s",
                              var, v, var, v);
        vis[n++] = (int)idx;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (vis[i] == vis[j])
                return vdev_error(VDEV_ERR_CONFIG, "%s=\"%s\": %s contained a duplicate entry: %s",
                                  var, v, var, v);
    *n_out = n;
    return VDEV_OK;
}

enum vdev_status vdev_env_min_sys(uint64_t *out, int *set)
{
    const char *v = getenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB");
    *set = 0;
    if (!v || !*v)
        return VDEV_OK; /* TensorFlow reads an empty value as unset */
    /* TensorFlow's strings::safe_strto64: blanks around the number, an
     * optional minus sign (so "-0" is 0), then digits only. */
    const char *p = v;
    while (isspace((unsigned char)*p))
        p++;
    int minus = *p == '-';
    p += minus;
    char *end = NULL;
    errno = 0;
    long long mb = isdigit((unsigned char)*p) ? strtoll(p, &end, 10) : -1;
    while (end && isspace((unsigned char)*end))
        end++;
    if (mb < 0 || *end || (minus && mb != 0))
        return vdev_error(VDEV_ERR_CONFIG,
                          "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"%s\" is not a whole number of MiB >= 0",
                          v);
    /* digits only: ERANGE is a whole number beyond 64 bits, too large as well */
    if (errno == ERANGE || (unsigned long long)mb > (UINT64_MAX >> 20))
        return vdev_error(VDEV_ERR_CONFIG, "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"%s\" is too large", v);
    *out = (uint64_t)mb << 20;
    *set = 1;
    return VDEV_OK;
}
