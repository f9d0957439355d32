/* test_holders_cross.c — removals of memory holders (vdev_mem_holder_remove)
 * made from inside holders' functions on two threads at once never wait for
 * each other:
 *  - thread 1, inside holder A's live(), removes holder C, and thread 2,
 *    inside holder B's live(), removes holder D, while no thread calls C or
 *    D: neither removal waits (each waits only for calls of the holder it
 *    removes), both return VDEV_OK;
 *  - thread 1, inside A's live(), removes B while thread 2, inside B's
 *    live(), removes A: each waits for the other's call to end, which can
 *    never happen, so the second removal does not wait: it takes its holder
 *    out and says why it could not wait (VDEV_ERR_INVALID_ARG, its exact
 *    message), the first waits for the second's call to end and returns
 *    VDEV_OK, and neither holder is called again;
 *  - a removal from outside any holder still waits for a call of its holder
 *    under way on another thread, even when that call is itself waiting in
 *    a removal (of a third holder, called on a third thread).
 * A removal that waited forever would hang the test: each scenario runs on
 * threads that the main thread joins with a deadline of 60 seconds, and a
 * thread not back by then fails the test (a hang, not a time measured). */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

/* Which thread plays which part: set by each thread before it asks. */
static _Thread_local int role;

struct holder {
    int acts;                     /* the role that acts inside live() */
    struct vdev_mem_holder *rm;   /* the holder it removes there */
    atomic_int asked;             /* calls of live() */
    atomic_int inside;            /* the acting thread is inside live() */
    atomic_int *go;               /* it waits for this flag before removing (NULL: not) */
    atomic_int *stay_until;       /* it stays inside until this flag is set (NULL: not) */
    enum vdev_status st;          /* what the removal returned */
    char msg[512];                /* and its message */
    int removed;                  /* it removed */
};

static int live(void *ctx, char *msg, size_t cap)
{
    struct holder *h = ctx;
    atomic_fetch_add(&h->asked, 1);
    if (cap)
        msg[0] = '\0';
    if (role != h->acts)
        return 0;
    atomic_store(&h->inside, 1);
    if (h->go)
        check_wait_flag(h->go);
    if (h->rm) {
        h->st = vdev_mem_holder_remove(h->rm);
        snprintf(h->msg, sizeof h->msg, "%s", h->st ? vdev_last_error() : "");
        h->removed = 1;
    }
    if (h->stay_until)
        check_wait_flag(h->stay_until);
    return 0;
}

static void forget(void *ctx) { (void)ctx; }

struct part {
    int role;
    void (*fn)(struct part *);
    atomic_int done;
    struct vdev_mem_holder *rm;  /* for a plain removal */
    enum vdev_status st;
};

static void ask(struct part *p)
{
    (void)p;
    vdev_mem_holders_live(NULL, 0);
}

static void plain_remove(struct part *p) { p->st = vdev_mem_holder_remove(p->rm); }

static void *run_part(void *arg)
{
    struct part *p = arg;
    role = p->role;
    p->fn(p);
    atomic_store(&p->done, 1);
    return NULL;
}

static void start(struct part *p, pthread_t *t)
{
    CHECK(pthread_create(t, NULL, run_part, p) == 0);
}

/* Joins the n threads; one not back within 60 seconds is a hang: the test
 * fails and ends there (the thread cannot be taken back). */
static void join_all(pthread_t *t, int n)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    for (int i = 0; i < n; i++)
        if (pthread_timedjoin_np(t[i], NULL, &deadline) != 0) {
            check_fail(__FILE__, __LINE__, "thread %d hangs: a removal waits forever", i + 1);
            fflush(stdout);
            _exit(1);
        }
}

/* Removals of holders that nobody calls, from inside two holders' calls. */
static void removals_of_others(void)
{
    atomic_int both = 0;
    struct holder a = {.acts = 1}, b = {.acts = 2}, c = {.acts = -1}, d = {.acts = -1};
    struct vdev_mem_holder ha = {live, forget, &a}, hb = {live, forget, &b},
                           hc = {live, forget, &c}, hd = {live, forget, &d};
    a.rm = &hc;
    b.rm = &hd;
    /* each stays inside its live() until both removed */
    a.go = b.go = &both;
    CHECK_OK(vdev_mem_holder_add(&ha));
    CHECK_OK(vdev_mem_holder_add(&hb));
    CHECK_OK(vdev_mem_holder_add(&hc));
    CHECK_OK(vdev_mem_holder_add(&hd));
    struct part p[2] = {{.role = 1, .fn = ask}, {.role = 2, .fn = ask}};
    /* both threads inside (A on thread 1, B on thread 2), then both remove */
    pthread_t t[2];
    start(&p[0], &t[0]);
    start(&p[1], &t[1]);
    CHECK(check_wait_flag(&a.inside));
    CHECK(check_wait_flag(&b.inside));
    atomic_store(&both, 1);
    join_all(t, 2);
    CHECK(a.removed && b.removed);
    CHECK_OK(a.st);
    CHECK_OK(b.st);
    CHECK_ERR(vdev_mem_holder_remove(&hc), VDEV_ERR_NOT_FOUND,
              "vdev_mem_holder_remove: no such holder (not added, or removed already)");
    CHECK_OK(vdev_mem_holder_remove(&ha));
    CHECK_OK(vdev_mem_holder_remove(&hb));
    CHECK(vdev_mem_holders_live(NULL, 0) == 0);
}

/* Thread 1 inside A removes B; thread 2 inside B removes A. */
static void cross_removals(void)
{
    atomic_int both = 0;
    struct holder a = {.acts = 1}, b = {.acts = 2};
    struct vdev_mem_holder ha = {live, forget, &a}, hb = {live, forget, &b};
    a.rm = &hb;
    b.rm = &ha;
    a.go = b.go = &both;
    CHECK_OK(vdev_mem_holder_add(&ha));
    CHECK_OK(vdev_mem_holder_add(&hb));
    struct part p[2] = {{.role = 1, .fn = ask}, {.role = 2, .fn = ask}};
    pthread_t t[2];
    start(&p[0], &t[0]);
    start(&p[1], &t[1]);
    CHECK(check_wait_flag(&a.inside));
    CHECK(check_wait_flag(&b.inside));
    atomic_store(&both, 1);
    join_all(t, 2);
    CHECK(a.removed && b.removed);
    /* one waited (VDEV_OK), the other could not (which is which depends on
     * who came second) */
    CHECK((a.st == VDEV_OK) != (b.st == VDEV_OK));
    struct holder *second = a.st == VDEV_OK ? &b : &a;
    CHECK_EQ_U64(second->st, VDEV_ERR_INVALID_ARG);
    CHECK_STR(second->msg,
              "vdev_mem_holder_remove: removed, but not waited for: a call of it runs on another "
              "thread that waits for this thread (it is removing a holder whose function this "
              "thread is in), so that call may still run after this returns");
    /* both out: nobody asks them again */
    int na = atomic_load(&a.asked), nb = atomic_load(&b.asked);
    CHECK(vdev_mem_holders_live(NULL, 0) == 0);
    CHECK_EQ_U64(atomic_load(&a.asked), na);
    CHECK_EQ_U64(atomic_load(&b.asked), nb);
    CHECK_ERR(vdev_mem_holder_remove(&ha), VDEV_ERR_NOT_FOUND,
              "vdev_mem_holder_remove: no such holder (not added, or removed already)");
}

/* Thread 2 is inside B and waits there in a removal of C, which thread 3
 * is inside; the main thread removes B: it waits for thread 2's call of B,
 * which ends once thread 3 leaves C. */
static void waits_through_a_removal(void)
{
    atomic_int go2 = 0, release3 = 0;
    struct holder b = {.acts = 2}, c = {.acts = 3};
    struct vdev_mem_holder hb = {live, forget, &b}, hc = {live, forget, &c};
    b.rm = &hc;
    b.go = &go2;
    c.stay_until = &release3;
    CHECK_OK(vdev_mem_holder_add(&hb));
    CHECK_OK(vdev_mem_holder_add(&hc));
    struct part p[3] = {{.role = 3, .fn = ask}, {.role = 2, .fn = ask},
                        {.role = 0, .fn = plain_remove, .rm = &hb}};
    pthread_t t[3];
    start(&p[0], &t[0]);
    CHECK(check_wait_flag(&c.inside)); /* thread 3 inside C */
    start(&p[1], &t[1]);
    CHECK(check_wait_flag(&b.inside)); /* thread 2 inside B */
    atomic_store(&go2, 1);             /* it removes C: waits for thread 3 */
    start(&p[2], &t[2]);
    /* the main thread's removal of B cannot have returned: thread 2 is in B
     * until thread 3 leaves C */
    check_sleep_ms(100);
    CHECK(atomic_load(&p[2].done) == 0);
    atomic_store(&release3, 1);
    join_all(t, 3);
    CHECK_OK(b.st);
    CHECK_OK(p[2].st);
    CHECK(vdev_mem_holders_live(NULL, 0) == 0);
}

int main(void)
{
    check_fresh("1x1GiB");
    removals_of_others();
    cross_removals();
    waits_through_a_removal();
    return check_done();
}
