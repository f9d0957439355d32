/* devname.c — device names in every form TensorFlow accepts.
 *
 * A name is a '/'-separated list of fields, as TensorFlow's DeviceNameUtils
 * and DeviceSpec read it: "job:J", "replica:R", "task:T", "device:TYPE:N",
 * "physical_device:TYPE:N", or a bare "TYPE:N" (legacy "/gpu:1", local
 * "GPU:1"). TYPE is CPU or GPU in any case. The index may be left out
 * ("GPU", "/gpu", "/device:GPU") or be "*", as in a tf.device scope; "*"
 * also leaves a job, replica or task unspecified. A job name starts with a
 * letter, then letters, digits or '_' (DeviceNameUtils' IsJobName). Only the
 * local job (job:localhost, replica:0, task:0) has devices here. */
#define _GNU_SOURCE
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

static enum vdev_status bad_attr(const char *field, const char *text)
{
    return vdev_error(VDEV_ERR_INVALID_ARG,
                      "Unknown attribute '%s' is encountered while parsing the device spec: '%s'.",
                      field, text);
}

/* A non-negative decimal index without sign or spaces. Leading zeros are
 * taken ("01" is 1), as TensorFlow's DeviceNameUtils takes them (its
 * ConsumeLeadingDigits) and its Python DeviceSpec (int()). */
static int parse_index(const char *s, int *out)
{
    if (!isdigit((unsigned char)s[0]))
        return 0;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return 0;
        v = v * 10 + (*p - '0');
        if (v > 1000000)
            return 0;
    }
    *out = (int)v;
    return 1;
}

/* DeviceNameUtils' IsJobName: a letter, then letters, digits or '_'. */
static int is_job_name(const char *s)
{
    if (!isalpha((unsigned char)s[0]))
        return 0;
    for (const char *p = s + 1; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return 0;
    return 1;
}

/* Device types TensorFlow knows that vdev has no devices of. */
static int other_tf_type(const char *s)
{
    static const char *const types[] = {"TPU", "XLA_CPU", "XLA_GPU", "XLA_TPU", "CUSTOM", "EPU"};
    for (size_t i = 0; i < VDEV_ARRAY_LEN(types); i++)
        if (vdev_strcasecmp(s, types[i]) == 0)
            return 1;
    return 0;
}

static int parse_type(const char *s, enum vdev_device_type *out)
{
    if (vdev_strcasecmp(s, "GPU") == 0) {
        *out = VDEV_DEVICE_GPU;
        return 1;
    }
    if (vdev_strcasecmp(s, "CPU") == 0) {
        *out = VDEV_DEVICE_CPU;
        return 1;
    }
    return 0;
}

/* Both parsers: no_device_ok takes a name that gives no device. */
static enum vdev_status parse_name(const char *text, struct vdev_device_name *out,
                                   int no_device_ok)
{
    if (!text)
        return vdev_error(VDEV_ERR_INVALID_ARG, "device name is NULL");
    size_t len = strlen(text);
    if ((len == 0 && !no_device_ok) || len >= 256)
        return vdev_error(VDEV_ERR_INVALID_ARG, "'%s' is not a device name (expected e.g. "
                                                "/device:GPU:0, GPU:0 or CPU:0)",
                          len ? "(overlong)" : "");
    char buf[256];
    memcpy(buf, text, len + 1);

    int have_dev = 0, remote = 0;
    /* the job, replica and task named ("" / -1: not named, or "*") */
    char job[64] = "";
    int replica = -1, task = -1;
    struct vdev_device_name r = {VDEV_DEVICE_CPU, -1, 0, 0, 0, 0};
    char *save = NULL;
    for (char *f = strtok_r(buf, "/", &save); f; f = strtok_r(NULL, "/", &save)) {
        /* split on ':' into at most 3 parts */
        char *parts[4] = {0};
        int np = 0;
        char *p = f;
        while (np < 4) {
            parts[np++] = p;
            char *c = strchr(p, ':');
            if (!c)
                break;
            *c = '\0';
            p = c + 1;
        }
        if (np == 4)
            return bad_attr(f, text);
        if (np == 2 && strcmp(parts[0], "job") == 0) {
            r.logical_form = 1;
            if (strcmp(parts[1], "*") == 0)
                continue;
            if (!is_job_name(parts[1]))
                return vdev_error(VDEV_ERR_INVALID_ARG,
                                  "Unknown attribute 'job' is encountered while parsing the device "
                                  "spec: '%s'. (a job name starts with a letter, then letters, "
                                  "digits or '_')",
                                  text);
            vdev_strlcpy(job, parts[1], sizeof job);
            continue;
        }
        if (np == 2 && (strcmp(parts[0], "replica") == 0 || strcmp(parts[0], "task") == 0)) {
            int v;
            r.logical_form = 1;
            if (strcmp(parts[1], "*") == 0)
                continue;
            if (!parse_index(parts[1], &v))
                return bad_attr(parts[0], text);
            *(parts[0][0] == 'r' ? &replica : &task) = v;
            continue;
        }
        /* device:TYPE[:N], physical_device:TYPE[:N], TYPE[:N] */
        int physical = 0;
        char *type_s, *idx_s;
        int prefixed = np >= 2 && (strcmp(parts[0], "device") == 0 ||
                                   strcmp(parts[0], "physical_device") == 0);
        if (prefixed) {
            physical = parts[0][0] == 'p';
            r.logical_form |= !physical;
            type_s = parts[1];
            idx_s = np == 3 ? parts[2] : NULL;
        } else if (np <= 2) {
            type_s = parts[0];
            idx_s = np == 2 ? parts[1] : NULL;
        } else {
            /* As DeviceSpec: the message names the field's first part. */
            return bad_attr(f, text);
        }
        enum vdev_device_type type;
        if (!parse_type(type_s, &type)) {
            /* "device:TYPE" may name any type; a bare "TYPE[:N]" only a type
             * TensorFlow knows, or it is an unknown attribute. */
            if (prefixed || other_tf_type(type_s))
                return vdev_error(VDEV_ERR_INVALID_ARG,
                                  "Unknown device type '%s' in the device spec: '%s' (vdev has "
                                  "CPU and GPU devices)",
                                  type_s, text);
            return bad_attr(f, text);
        }
        if (have_dev)
            return vdev_error(VDEV_ERR_INVALID_ARG,
                              "Multiple device types are not allowed while parsing the device "
                              "spec: %s.", /* unquoted, as TensorFlow's device_spec.py */
                              text);
        int idx = -1;
        if (idx_s && strcmp(idx_s, "*") != 0 && !parse_index(idx_s, &idx))
            return vdev_error(VDEV_ERR_INVALID_ARG,
                              "Bad device index '%s' in the device spec: '%s' (expected a whole "
                              "number such as 0 or 1)",
                              idx_s, text);
        have_dev = 1;
        r.type = type;
        r.index = idx;
        r.has_index = idx >= 0;
        r.physical = physical;
    }
    if (!have_dev && no_device_ok)
        r.no_device = 1;
    else if (!have_dev)
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "'%s' names no device (expected e.g. /device:GPU:0, GPU:0 or CPU:0)",
                          text);
    /* Local: /job:localhost/replica:0/task:0, and this process's own task
     * of a cluster (/job:worker/replica:0/task:1), each part optional. */
    struct vdev_cluster_view cv;
    vdev_cluster_get(&cv);
    const char *own = vdev_cluster_job_name(cv.job);
    int as_localhost = (!job[0] || !strcmp(job, "localhost")) && task <= 0;
    int as_own = cv.job >= 0 && (!job[0] || !strcmp(job, own)) && (task < 0 || task == cv.index);
    remote = replica > 0 || !(as_localhost || as_own);
    if (remote && cv.job >= 0)
        return vdev_error(VDEV_ERR_NOT_FOUND,
                          "%s unknown device: only /job:localhost/replica:0/task:0 and "
                          "%s are local",
                          text, cv.name);
    if (remote)
        return vdev_error(VDEV_ERR_NOT_FOUND,
                          "%s unknown device: only /job:localhost/replica:0/task:0 is local", text);
    *out = r;
    return VDEV_OK;
}

enum vdev_status vdev_parse_device_name(const char *text, struct vdev_device_name *out)
{
    return parse_name(text, out, 0);
}

enum vdev_status vdev_parse_scope_name(const char *text, struct vdev_device_name *out)
{
    return parse_name(text, out, 1);
}
