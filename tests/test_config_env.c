/* test_config_env.c — every configuration environment variable, valid and
 * malformed, with the exact status and the message that names it; code
 * winning over the environment; the variables together. Runs on simulated
 * GPUs (a 1536 MiB driver reserve on 16 GiB cards). */
#define _GNU_SOURCE
#include "config_want.h"

#include <unistd.h>

/* ---- 5. environment variables ---- */

/* A variable that must make start-up fail with VDEV_ERR_CONFIG and `msg`,
 * leave the configuration unfrozen, and let start-up succeed once removed. */
static void expect_env_error(int line, const char *sim, const char *var, const char *value,
                             const char *msg)
{
    check_fresh(sim);
    setenv(var, value, 1);
    enum vdev_status st = vdev_init();
    if (st != VDEV_ERR_CONFIG || !strstr(vdev_last_error(), msg))
        check_fail(__FILE__, line, "%s=\"%s\": %s \"%s\", expected VDEV_ERR_CONFIG \"%s\"", var,
                   value, vdev_status_str(st), vdev_last_error(), msg);
    else
        check_passed++;
    CHECK(!vdev_is_initialized());
    CHECK(!vdev_config_frozen());
    CHECK(strstr(vdev_last_error(), var) != NULL); /* names the variable */
    unsetenv(var);
    CHECK_OK(vdev_init());
}
#define EXPECT_ENV_ERROR(sim, var, value, msg) expect_env_error(__LINE__, sim, var, value, msg)

static void test_env_growth(void)
{
    static const char *const on[] = {"true", "TRUE", "True", "tRuE", "1"};
    static const char *const off[] = {"false", "FALSE", "False", "0"};
    static const char *const vars[] = {"TF_FORCE_GPU_ALLOW_GROWTH", "VDEV_MEMORY_GROWTH"};
    for (int v = 0; v < 2; v++) {
        for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
            check_fresh("2x8GiB");
            setenv(vars[v], on[i], 1);
            EXPECT_GPUS({0, 8 * GiB - RESERVE, GROW}, {1, 8 * GiB - RESERVE, GROW});
        }
        for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
            check_fresh("2x8GiB");
            setenv(vars[v], off[i], 1);
            EXPECT_GPUS({0, 8 * GiB - RESERVE, PRE}, {1, 8 * GiB - RESERVE, PRE});
        }
        /* The same message, but VDEV_MEMORY_GROWTH's names its per-GPU form
         * too; the whole message, exactly. */
        static const char *const bad[] = {"yes", "", "2", " true", "true ", "no", "on"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "%s=\"%s\" could not be parsed: valid values are true or false (any "
                     "case), 1 or 0%s",
                     vars[v], bad[i], v ? ", or per GPU 0:true,1:false" : "");
            EXPECT_ENV_ERROR("2x8GiB", vars[v], bad[i], msg);
            check_fresh("2x8GiB");
            setenv(vars[v], bad[i], 1);
            CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
            CHECK_STR(vdev_last_error(), msg);
            unsetenv(vars[v]);
        }
    }
    /* Per GPU. */
    check_fresh("3x8GiB");
    setenv("VDEV_MEMORY_GROWTH", "0:true,1:false", 1);
    EXPECT_GPUS({0, 8 * GiB - RESERVE, GROW}, {1, 8 * GiB - RESERVE, PRE},
                {2, 8 * GiB - RESERVE, GROW});
    check_fresh("3x8GiB");
    setenv("VDEV_MEMORY_GROWTH", "2:0,0:FALSE", 1);
    EXPECT_GPUS({0, 8 * GiB - RESERVE, PRE}, {1, 8 * GiB - RESERVE, GROW},
                {2, 8 * GiB - RESERVE, PRE});
    static const struct {
        const char *value, *msg;
    } bad[] = {
        {"0:maybe", "VDEV_MEMORY_GROWTH=\"0:maybe\": bad value 'maybe' for GPU 0 (true, false, "
                    "1 or 0)"},
        {"0:", "VDEV_MEMORY_GROWTH=\"0:\": bad value '' for GPU 0"},
        {"5:true", "VDEV_MEMORY_GROWTH=\"5:true\": there is no GPU 5 (3 GPUs)"},
        {"0:true,", "VDEV_MEMORY_GROWTH=\"0:true,\": bad part ''"},
        {",0:true", "VDEV_MEMORY_GROWTH=\",0:true\": bad part ''"},
        {"0:true,,1:true", "bad part ''"},
        {"0:true,0:false", "VDEV_MEMORY_GROWTH=\"0:true,0:false\": GPU 0 is given twice"},
        {"x:true", "VDEV_MEMORY_GROWTH=\"x:true\": bad part 'x:true' (expected true, false, or "
                   "per GPU 0:true,1:false)"},
        {":true", "bad part ':true'"},
        {"+0:true", "bad part '+0:true'"},
        {" 0:true", "bad part ' 0:true'"},
        {"0:true,true", "bad part 'true'"},
        {"0:true;1:false", "bad value 'true;1:false' for GPU 0"},
        {"99999999999:true", "bad part '99999999999:true'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT_ENV_ERROR("3x8GiB", "VDEV_MEMORY_GROWTH", bad[i].value, bad[i].msg);

    /* Both variables: they must agree where both speak. */
    check_fresh("2x8GiB");
    setenv("TF_FORCE_GPU_ALLOW_GROWTH", "true", 1);
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
               "TF_FORCE_GPU_ALLOW_GROWTH=\"true\" and VDEV_MEMORY_GROWTH=\"false\" disagree for "
               "GPU 0");
    check_fresh("2x8GiB");
    setenv("TF_FORCE_GPU_ALLOW_GROWTH", "true", 1);
    setenv("VDEV_MEMORY_GROWTH", "0:true,1:false", 1);
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG, "disagree for GPU 1");
    check_fresh("2x8GiB");
    setenv("TF_FORCE_GPU_ALLOW_GROWTH", "false", 1);
    setenv("VDEV_MEMORY_GROWTH", "0", 1);
    EXPECT_GPUS({0, 8 * GiB - RESERVE, PRE}, {1, 8 * GiB - RESERVE, PRE});
    check_fresh("2x8GiB");
    setenv("TF_FORCE_GPU_ALLOW_GROWTH", "false", 1);
    setenv("VDEV_MEMORY_GROWTH", "1:false", 1);
    EXPECT_GPUS({0, 8 * GiB - RESERVE, PRE}, {1, 8 * GiB - RESERVE, PRE});

    /* Code wins over the environment. */
    check_fresh("2x8GiB");
    setenv("TF_FORCE_GPU_ALLOW_GROWTH", "false", 1);
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", true));
    EXPECT_GPUS({0, 8 * GiB - RESERVE, GROW}, {1, 8 * GiB - RESERVE, PRE});
    check_fresh("2x8GiB");
    setenv("VDEV_MEMORY_GROWTH", "true", 1);
    CHECK_OK(vdev_config_set_memory_growth("GPU:1", false));
    EXPECT_GPUS({0, 8 * GiB - RESERVE, GROW}, {1, 8 * GiB - RESERVE, PRE});
    /* A malformed variable is an error even where code overrides it. */
    EXPECT_ENV_ERROR("1x8GiB", "TF_FORCE_GPU_ALLOW_GROWTH", "yes", "TF_FORCE_GPU_ALLOW_GROWTH");
    check_fresh("1x8GiB");
    setenv("TF_FORCE_GPU_ALLOW_GROWTH", "yes", 1);
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", true));
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG, "TF_FORCE_GPU_ALLOW_GROWTH=\"yes\"");
}

static void test_env_fraction(void)
{
    static const char *const vars[] = {"VDEV_MEMORY_FRACTION", "TF_GPU_MEMORY_FRACTION"};
    for (int v = 0; v < 2; v++) {
        check_fresh("2x16GiB");
        setenv(vars[v], "0.5", 1);
        EXPECT_GPUS({0, 8 * GiB, GROW}, {1, 8 * GiB, GROW});
        check_fresh("1x16GiB");
        setenv(vars[v], "1", 1);
        EXPECT_GPUS({0, 16 * GiB, GROW});
        check_fresh("1x16GiB");
        setenv(vars[v], ".25", 1);
        EXPECT_GPUS({0, 4 * GiB, GROW});
        /* 0 is no fraction (as in code): the default budget, free less the reserve. */
        static const char *const none[] = {"0", "0.0", "00", ".0"};
        for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
            check_fresh("2x8GiB");
            setenv(vars[v], none[i], 1);
            EXPECT_GPUS({0, 8 * GiB - RESERVE, GROW}, {1, 8 * GiB - RESERVE, GROW});
        }
        static const char *const bad[] = {"1.5",  "abc",   "0.5x", "",      "-0.5",
                                          "nan",  "inf",   "0x0.8", " 0.5", "5e-1",
                                          "0.5.1", ".",    "1.0000001", "-0"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "%s=\"%s\" is not a fraction in [0, 1] (e.g. 0.5 for half of each GPU's "
                     "total memory; 0 for none)",
                     vars[v], bad[i]);
            EXPECT_ENV_ERROR("1x16GiB", vars[v], bad[i], msg);
        }
    }
    check_fresh("1x16GiB");
    setenv("VDEV_MEMORY_FRACTION", "0.5", 1);
    setenv("TF_GPU_MEMORY_FRACTION", "0.25", 1);
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
               "VDEV_MEMORY_FRACTION=\"0.5\" and TF_GPU_MEMORY_FRACTION=\"0.25\" disagree; set "
               "one");
    check_fresh("1x16GiB");
    setenv("VDEV_MEMORY_FRACTION", "0", 1);
    setenv("TF_GPU_MEMORY_FRACTION", "0.5", 1);
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
               "VDEV_MEMORY_FRACTION=\"0\" and TF_GPU_MEMORY_FRACTION=\"0.5\" disagree; set "
               "one");
    check_fresh("1x16GiB");
    setenv("VDEV_MEMORY_FRACTION", "0.5", 1);
    setenv("TF_GPU_MEMORY_FRACTION", "0.50", 1);
    EXPECT_GPUS({0, 8 * GiB, GROW});
    /* Code wins. */
    check_fresh("2x16GiB");
    setenv("VDEV_MEMORY_FRACTION", "0.5", 1);
    CHECK_OK(vdev_config_set_memory_fraction("GPU:1", 0.25));
    EXPECT_GPUS({0, 8 * GiB, GROW}, {1, 4 * GiB, GROW});
}

static void test_env_logical(void)
{
    check_fresh("2x16GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:4GiB,2GiB;1:3GiB", 1);
    EXPECT_GPUS({0, 4 * GiB, GROW}, {0, 2 * GiB, GROW}, {1, 3 * GiB, GROW});
    check_fresh("3x16GiB");
    setenv("VDEV_LOGICAL_DEVICES", "2:1.5GiB,512MiB", 1);
    EXPECT_GPUS({0, 16 * GiB - RESERVE, GROW}, {1, 16 * GiB - RESERVE, GROW},
                {2, 3 * GiB / 2, GROW}, {2, 512 * MiB, GROW});
    check_fresh("2x16GiB");
    setenv("VDEV_LOGICAL_DEVICES", "1:3GiB;0:1GiB", 1); /* any order: numbered by GPU */
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    EXPECT_GPUS({0, GiB, PRE}, {1, 3 * GiB, PRE});
    /* Spaces around a group, its ':' and each limit, as VDEV_SIM_GPUS takes them (" 0:2GiB"
     * was a bad part while "0: 2GiB" passed). */
    static const char *const spaced[] = {" 0:2GiB,1GiB", "0: 2GiB, 1GiB", "0 :2GiB ,1GiB",
                                         "  0 : 2 GiB , 1GiB  ;  1:3GiB  "};
    for (size_t i = 0; i < sizeof spaced / sizeof spaced[0]; i++) {
        check_fresh("2x16GiB");
        setenv("VDEV_LOGICAL_DEVICES", spaced[i], 1);
        if (i < 3)
            EXPECT_GPUS({0, 2 * GiB, GROW}, {0, GiB, GROW}, {1, 16 * GiB - RESERVE, GROW});
        else
            EXPECT_GPUS({0, 2 * GiB, GROW}, {0, GiB, GROW}, {1, 3 * GiB, GROW});
    }
    static const struct {
        const char *value, *msg;
    } bad[] = {
        {"   ", "VDEV_LOGICAL_DEVICES is empty (expected e.g. 0:4GiB,2GiB;1:3GiB)"},
        {"0 1:1GiB", "VDEV_LOGICAL_DEVICES=\"0 1:1GiB\": bad part '0 1:1GiB' (expected "
                     "GPU:LIMIT[,LIMIT...] or cpu:N, e.g. 0:4GiB,2GiB;1:3GiB or cpu:4)"},
        {" ; 0:1GiB", "VDEV_LOGICAL_DEVICES=\" ; 0:1GiB\": bad part '' (expected"},
        {"0:4GiB, ", "VDEV_LOGICAL_DEVICES=\"0:4GiB, \": bad limit '' for GPU 0 (a size such "
                     "as 4GiB)"},
        {"0:4GiB, ,1GiB", "VDEV_LOGICAL_DEVICES=\"0:4GiB, ,1GiB\": bad limit '' for GPU 0"},
        {"0 : ", "VDEV_LOGICAL_DEVICES=\"0 : \": GPU 0 has no limits"},
        {"0: 100 ", "VDEV_LOGICAL_DEVICES=\"0: 100 \": limit '100' for GPU 0 is 100 bytes, less "
                    "than 1 MiB (did you mean 100MiB?)"},
        {"0: ban ana", "VDEV_LOGICAL_DEVICES=\"0: ban ana\": bad limit 'ban ana' for GPU 0"},
        {"0:", "VDEV_LOGICAL_DEVICES=\"0:\": GPU 0 has no limits"},
        {"0:4GiB;0:2GiB", "VDEV_LOGICAL_DEVICES=\"0:4GiB;0:2GiB\": GPU 0 is given twice"},
        {"5:1GiB", "VDEV_LOGICAL_DEVICES=\"5:1GiB\": there is no GPU 5 (2 GPUs)"},
        {"a:1GiB", "VDEV_LOGICAL_DEVICES=\"a:1GiB\": bad part 'a:1GiB' (expected "
                   "GPU:LIMIT[,LIMIT...] or cpu:N, e.g. 0:4GiB,2GiB;1:3GiB or cpu:4)"},
        {"0:4GiB,", "VDEV_LOGICAL_DEVICES=\"0:4GiB,\": bad limit '' for GPU 0 (a size such as "
                    "4GiB)"},
        {"0:4GiB,,1GiB", "bad limit '' for GPU 0"},
        {"0:banana", "VDEV_LOGICAL_DEVICES=\"0:banana\": bad limit 'banana' for GPU 0"},
        {"0:100", "limit '100' for GPU 0 is 100 bytes, less than 1 MiB (did you mean 100MiB?)"},
        {"0:-1GiB", "bad limit '-1GiB' for GPU 0"},
        {"0:1e3MiB", "VDEV_LOGICAL_DEVICES=\"0:1e3MiB\": bad limit '1e3MiB' for GPU 0 (a size "
                     "such as 4GiB)"},
        {"0:99999999TiB", "VDEV_LOGICAL_DEVICES=\"0:99999999TiB\": limit '99999999TiB' for GPU "
                          "0 is too large"},
        {"0:1GiB..99999999999999999999", "VDEV_LOGICAL_DEVICES=\"0:1GiB..99999999999999999999\": "
                                         "ceiling '99999999999999999999' for GPU 0 is too large"},
        {"", "VDEV_LOGICAL_DEVICES is empty (expected e.g. 0:4GiB,2GiB;1:3GiB)"},
        {"0:4GiB;", "VDEV_LOGICAL_DEVICES=\"0:4GiB;\": bad part ''"},
        {";0:4GiB", "bad part ''"},
        {"4GiB", "bad part '4GiB'"},
        {"-1:4GiB", "bad part '-1:4GiB'"},
        {"0:1GiB,1GiB,1GiB,1GiB,1GiB,1GiB,1GiB,1GiB,1GiB,1GiB,1GiB,1GiB,1GiB,1GiB,1GiB,1GiB,1GiB",
         "more than 16 logical devices on GPU 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT_ENV_ERROR("2x16GiB", "VDEV_LOGICAL_DEVICES", bad[i].value, bad[i].msg);
    /* Too big for the card: named at start-up. */
    check_fresh("2x16GiB");
    setenv("VDEV_LOGICAL_DEVICES", "1:8GiB,8GiB", 1);
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG,
               "/physical_device:GPU:1: its 2 logical devices' limits sum to 16.00 GiB");
    /* Code wins, per GPU. */
    check_fresh("2x16GiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:1GiB;1:1GiB", 1);
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", (const uint64_t[]){2 * GiB, 3 * GiB}, 2));
    EXPECT_GPUS({0, 2 * GiB, GROW}, {0, 3 * GiB, GROW}, {1, GiB, GROW});
}

static void test_env_visible(void)
{
    check_fresh("3x16GiB");
    setenv("VDEV_VISIBLE_DEVICES", "0,2", 1);
    EXPECT_GPUS({0, 16 * GiB - RESERVE, GROW}, {2, 16 * GiB - RESERVE, GROW});
    check_fresh("3x16GiB");
    setenv("VDEV_VISIBLE_DEVICES", "1", 1);
    EXPECT_GPUS({1, 16 * GiB - RESERVE, GROW});
    check_fresh("3x16GiB");
    setenv("VDEV_VISIBLE_DEVICES", "2,0", 1);
    EXPECT_GPUS({2, 16 * GiB - RESERVE, GROW}, {0, 16 * GiB - RESERVE, GROW});
    check_fresh("3x16GiB");
    setenv("VDEV_VISIBLE_DEVICES", "", 1);
    EXPECT_NO_GPUS();
    /* "-1" hides every GPU, as CUDA_VISIBLE_DEVICES=-1; spaces around an
     * index are allowed, as TensorFlow's visible_device_list allows them. */
    static const char *const none[] = {"-1", " -1 "};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        check_fresh("3x16GiB");
        setenv("VDEV_VISIBLE_DEVICES", none[i], 1);
        EXPECT_NO_GPUS();
    }
    check_fresh("3x16GiB");
    setenv("VDEV_VISIBLE_DEVICES", "2, 0", 1);
    EXPECT_GPUS({2, 16 * GiB - RESERVE, GROW}, {0, 16 * GiB - RESERVE, GROW});
    check_fresh("3x16GiB");
    setenv("VDEV_VISIBLE_DEVICES", " 1 ,2 ", 1);
    EXPECT_GPUS({1, 16 * GiB - RESERVE, GROW}, {2, 16 * GiB - RESERVE, GROW});
    static const struct {
        const char *value, *msg;
    } bad[] = {
        {"0,0", "VDEV_VISIBLE_DEVICES=\"0,0\": VDEV_VISIBLE_DEVICES contained a duplicate "
                "entry: 0,0"},
        {"7", "VDEV_VISIBLE_DEVICES=\"7\": 'VDEV_VISIBLE_DEVICES' listed an invalid Device id "
              "'7' but visible device count is 3"},
        {"0,", "VDEV_VISIBLE_DEVICES=\"0,\": Could not parse entry in 'VDEV_VISIBLE_DEVICES': "
               "''. VDEV_VISIBLE_DEVICES = 0, (expected GPU indices such as 0,2; empty or -1 "
               "hides every GPU)"},
        {"x", "VDEV_VISIBLE_DEVICES=\"x\": Could not parse entry in 'VDEV_VISIBLE_DEVICES': "
              "'x'."},
        {"0,,1", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': ''."},
        {",0", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': ''."},
        {"-1,0", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': '-1'."},
        {"0,-1", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': '-1'."},
        {"-2", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': '-2'."},
        {" ", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': ' '."},
        {"1 2", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': '1 2'."},
        {"0;1", "Could not parse entry in 'VDEV_VISIBLE_DEVICES': '0;1'."},
        {"99999999999999999999",
         "Could not parse entry in 'VDEV_VISIBLE_DEVICES': '99999999999999999999'."},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT_ENV_ERROR("3x16GiB", "VDEV_VISIBLE_DEVICES", bad[i].value, bad[i].msg);
    /* Code wins; a malformed variable is still an error. */
    check_fresh("3x16GiB");
    setenv("VDEV_VISIBLE_DEVICES", "1", 1);
    CHECK_OK(vdev_config_set_visible_devices((const int[]){0}, 1));
    EXPECT_GPUS({0, 16 * GiB - RESERVE, GROW});
    check_fresh("3x16GiB");
    setenv("VDEV_VISIBLE_DEVICES", "x", 1);
    CHECK_OK(vdev_config_set_visible_devices((const int[]){0}, 1));
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG, "VDEV_VISIBLE_DEVICES=\"x\"");
}

static void test_env_min_sys(void)
{
    /* TensorFlow's reading (gpu_device.cc, strings::safe_strto64): an empty
     * value is unset; blanks around the number and a minus sign on 0 are
     * taken. */
    static const struct {
        const char *value;
        uint64_t reserve;
    } good[] = {{"", RESERVE}, {" 5", 5 * MiB}, {"5 ", 5 * MiB}, {"\t5\n", 5 * MiB},
                {"-0", 0}, {"007", 7 * MiB}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        check_fresh("1x16GiB");
        setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", good[i].value, 1);
        EXPECT_GPUS({0, 16 * GiB - good[i].reserve, GROW});
        unsetenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB");
    }
    static const char *const bad[] = {"-1", "abc", " ", "1.5", "+5", "5MB", "0x10", "5 5",
                                      "- 5", "-"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"%s\" is not a whole number of MiB >= 0",
                 bad[i]);
        EXPECT_ENV_ERROR("1x16GiB", "TF_DEVICE_MIN_SYS_MEMORY_IN_MB", bad[i], msg);
    }
    EXPECT_ENV_ERROR("1x16GiB", "TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "99999999999999999999",
                     "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"99999999999999999999\" is too large");
    EXPECT_ENV_ERROR("1x16GiB", "TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "17592186044416",
                     "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"17592186044416\" is too large");
    EXPECT_ENV_ERROR("1x16GiB", "TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "16384",
                     "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"16384\" reserves 16.00 GiB, which leaves "
                     "nothing of the 16.00 GiB free on /physical_device:GPU:0");
    /* No GPU visible: nothing to reserve on, but still checked. */
    check_fresh("1x16GiB");
    setenv("VDEV_VISIBLE_DEVICES", "", 1);
    setenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", "abc", 1);
    EXPECT_ERR(vdev_init(), VDEV_ERR_CONFIG, "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"abc\"");
}

static void test_env_trace(void)
{
    EXPECT_ENV_ERROR("1x1GiB", "VDEV_ALLOC_TRACE", "",
                     "VDEV_ALLOC_TRACE is empty (expected a file path)");
    check_fresh("1x1GiB");
    setenv("VDEV_ALLOC_TRACE", "/nonexistent-dir/trace.txt", 1);
    EXPECT_ERR(vdev_init(), VDEV_ERR_IO, "VDEV_ALLOC_TRACE: cannot write allocation trace "
                                         "/nonexistent-dir/trace.txt");
    CHECK(!vdev_is_initialized());
    CHECK(!vdev_config_frozen());

    char path[] = "/tmp/vdev-test-config-trace-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    check_fresh("1x1GiB");
    setenv("VDEV_ALLOC_TRACE", path, 1);
    void *p = NULL;
    CHECK_OK(vdev_mem_alloc("GPU:0", 1000, &p));
    CHECK_OK(vdev_mem_free("GPU:0", p));
    vdev_shutdown(); /* closes the trace */
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f) {
        char text[512] = "";
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
        CHECK(strncmp(text, "# trace v1 source=vdev", 22) == 0);
        CHECK(strstr(text, "\na 0 1000\nf 0\n") != NULL);
    }
    unlink(path);
}

/* Several variables at once: each one's effect, in one start-up. */
static void test_env_combined(void)
{
    check_fresh("3x16GiB");
    setenv("VDEV_VISIBLE_DEVICES", "2,1", 1);
    setenv("VDEV_MEMORY_GROWTH", "1:false", 1);
    setenv("TF_GPU_MEMORY_FRACTION", "0.5", 1);
    setenv("VDEV_LOGICAL_DEVICES", "1:2GiB,2GiB", 1);
    EXPECT_GPUS({2, 8 * GiB, GROW}, {1, 2 * GiB, PRE}, {1, 2 * GiB, PRE});
    CHECK_EQ_U64(phys_free(1), 12 * GiB);
    CHECK_EQ_U64(phys_free(0), 16 * GiB);
}

/* The four settings' getters: (soft placement, determinism, placement
 * logging, policy) as one string, "1 1 1 2". */
static const char *settings(char *buf, size_t cap)
{
    snprintf(buf, cap, "%d %d %d %d", vdev_config_get_soft_device_placement(),
             vdev_config_get_deterministic(), vdev_get_log_device_placement(),
             (int)vdev_get_placement_policy());
    return buf;
}

static void set_all_env(void)
{
    setenv("VDEV_SOFT_DEVICE_PLACEMENT", "1", 1);
    setenv("VDEV_DETERMINISTIC", "TRUE", 1);
    setenv("VDEV_LOG_DEVICE_PLACEMENT", "true", 1);
    setenv("VDEV_PLACEMENT", "Strict", 1);
}

/* Before start-up the getters of soft placement, determinism, placement
 * logging and the policy report what start-up will put in force: code's
 * setting, else the environment's, else the default; a malformed variable
 * reads as the default and leaves start-up's error as the last error. */
static void test_env_getters(void)
{
    char b[32];
    check_fresh("1x1GiB");
    CHECK_STR(settings(b, sizeof b), "0 0 0 0");
    set_all_env();
    vdev_clear_error();
    CHECK_STR(settings(b, sizeof b), "1 1 1 1");
    CHECK(vdev_last_status() == VDEV_OK && !vdev_is_initialized());
    CHECK_OK(vdev_init());
    CHECK_STR(settings(b, sizeof b), "1 1 1 1");
    /* After start-up the environment is read no more. */
    setenv("VDEV_SOFT_DEVICE_PLACEMENT", "0", 1);
    setenv("VDEV_PLACEMENT", "tf", 1);
    CHECK_STR(settings(b, sizeof b), "1 1 1 1");

    /* Code wins, before start-up as at it. */
    check_fresh("1x1GiB");
    set_all_env();
    vdev_config_set_soft_device_placement(false);
    vdev_config_set_deterministic(false);
    vdev_set_log_device_placement(false);
    CHECK_OK(vdev_set_placement_policy(VDEV_PLACEMENT_TF));
    CHECK_STR(settings(b, sizeof b), "0 0 0 2");
    CHECK_OK(vdev_init());
    CHECK_STR(settings(b, sizeof b), "0 0 0 2");
    /* One set by code, the others from the environment. */
    check_fresh("1x1GiB");
    set_all_env();
    vdev_config_set_deterministic(false);
    CHECK_STR(settings(b, sizeof b), "1 0 1 1");
    CHECK_OK(vdev_init());
    CHECK_STR(settings(b, sizeof b), "1 0 1 1");

    /* A malformed variable: the default, and start-up's error. */
    static const struct {
        const char *var, *value, *want, *msg;
    } bad[] = {
        {"VDEV_SOFT_DEVICE_PLACEMENT", "yes", "0 1 1 1",
         "VDEV_SOFT_DEVICE_PLACEMENT=\"yes\" could not be parsed: valid values are true or "
         "false (any case), 1 or 0"},
        {"VDEV_DETERMINISTIC", "on", "1 0 1 1",
         "VDEV_DETERMINISTIC=\"on\" could not be parsed: valid values are true or false (any "
         "case), 1 or 0"},
        {"VDEV_LOG_DEVICE_PLACEMENT", "2", "1 1 0 1",
         "VDEV_LOG_DEVICE_PLACEMENT=\"2\" could not be parsed: valid values are true or false "
         "(any case), 1 or 0"},
        {"VDEV_PLACEMENT", "copies", "1 1 1 0",
         "VDEV_PLACEMENT=\"copies\" is not a placement policy (copy, strict or tf)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        check_fresh("1x1GiB");
        set_all_env();
        setenv(bad[i].var, bad[i].value, 1);
        vdev_clear_error();
        CHECK_STR(settings(b, sizeof b), bad[i].want);
        CHECK(vdev_last_status() == VDEV_ERR_CONFIG);
        CHECK_STR(vdev_last_error(), bad[i].msg);
        CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
        CHECK_STR(vdev_last_error(), bad[i].msg);
        /* Where code has set it, the variable is not read for the getter. */
        vdev_config_set_soft_device_placement(true);
        vdev_config_set_deterministic(true);
        vdev_set_log_device_placement(true);
        CHECK_OK(vdev_set_placement_policy(VDEV_PLACEMENT_STRICT));
        vdev_clear_error();
        CHECK_STR(settings(b, sizeof b), "1 1 1 1");
        CHECK(vdev_last_status() == VDEV_OK);
    }

    /* A start-up that failed leaves nothing of the environment behind: with
     * the variables gone, the next one puts the defaults in force. */
    check_fresh("1x1GiB");
    set_all_env();
    setenv("VDEV_OOM_REPORT", "maybe", 1); /* read after the four */
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_STR(settings(b, sizeof b), "1 1 1 1");
    static const char *const vars[] = {"VDEV_SOFT_DEVICE_PLACEMENT", "VDEV_DETERMINISTIC",
                                       "VDEV_LOG_DEVICE_PLACEMENT", "VDEV_PLACEMENT",
                                       "VDEV_OOM_REPORT"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    CHECK_STR(settings(b, sizeof b), "0 0 0 0");
    CHECK_OK(vdev_init());
    CHECK_STR(settings(b, sizeof b), "0 0 0 0");
}

/* Code's settings win over the environment's; start-up says so, on stderr,
 * for every knob where the two differ on a visible GPU (TensorFlow warns
 * when its variable overrides code), and says nothing when they agree. */
static void test_env_code_wins_warns(void)
{
    check_fresh("2x8GiB");
    setenv("TF_FORCE_GPU_ALLOW_GROWTH", "true", 1);
    setenv("VDEV_MEMORY_FRACTION", "0.5", 1);
    setenv("VDEV_LOGICAL_DEVICES", "1:1GiB,2GiB", 1);
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    CHECK_OK(vdev_config_set_memory_growth("GPU:1", true)); /* agrees: no word */
    CHECK_OK(vdev_config_set_memory_fraction("GPU:1", 0.25));
    CHECK_OK(vdev_config_set_logical_devices("GPU:1", (const uint64_t[]){1 * GiB}, 1));
    check_capture_begin();
    CHECK_OK(vdev_init());
    char *err = check_capture_end();
    CHECK_STR(err, "vdev: warning: /physical_device:GPU:0: memory growth off in code wins over "
                   "TF_FORCE_GPU_ALLOW_GROWTH=\"true\" (vdev: code's settings win over the "
                   "environment's)\n"
                   "vdev: warning: /physical_device:GPU:1: the memory fraction 0.25 set in code "
                   "wins over VDEV_MEMORY_FRACTION=\"0.5\" (vdev: code's settings win over the "
                   "environment's)\n"
                   "vdev: warning: /physical_device:GPU:1: the logical devices set in code win "
                   "over those of VDEV_LOGICAL_DEVICES=\"1:1GiB,2GiB\" (vdev: code's settings "
                   "win over the environment's)\n");
    free(err);
    unsetenv("TF_FORCE_GPU_ALLOW_GROWTH");
    unsetenv("VDEV_MEMORY_FRACTION");
    unsetenv("VDEV_LOGICAL_DEVICES");
    /* the same settings from code alone: no warning */
    check_fresh("2x8GiB");
    CHECK_OK(vdev_config_set_memory_growth("GPU:0", false));
    check_capture_begin();
    CHECK_OK(vdev_init());
    err = check_capture_end();
    CHECK_STR(err, "");
    free(err);
}

int main(void)
{
    test_env_code_wins_warns();
    test_env_growth();
    test_env_fraction();
    test_env_logical();
    test_env_visible();
    test_env_min_sys();
    test_env_trace();
    test_env_combined();
    test_env_getters();
    check_fresh(NULL);
    return check_done();
}
