/* test_stress_holders.c — vdev_mem_holder_remove() racing
 * vdev_mem_holders_live() on another thread: once the removal returns, no
 * call of the removed holder is still running, so its library may unload
 * (here: its state is marked dead, as a destructor would leave it). The
 * holder's live() waits inside the call until the removal has begun, so the
 * removal always meets a call under way; a removal that returned before
 * that call ended lets live() read the dead state. Then many rounds of the
 * race with no waiting, for ThreadSanitizer. */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

enum { ALIVE = 1, DEAD = 2 };

struct lib {
    atomic_int state;
    atomic_int entered, removing, wait_inside;
    atomic_int saw_dead;
};

static int live(void *ctx, char *msg, size_t cap)
{
    struct lib *l = ctx;
    atomic_store(&l->entered, 1);
    if (atomic_load(&l->wait_inside)) {
        check_wait_flag(&l->removing);
        check_sleep_ms(50); /* a removal that does not wait returns meanwhile */
    }
    if (atomic_load(&l->state) != ALIVE)
        atomic_store(&l->saw_dead, 1);
    if (cap)
        msg[0] = '\0';
    return 0;
}

static void forget(void *ctx) { (void)ctx; }

static atomic_int stop;

static void *ask(void *arg)
{
    (void)arg;
    char msg[64];
    do
        vdev_mem_holders_live(msg, sizeof msg);
    while (!atomic_load(&stop));
    return NULL;
}

/* One removal while the other thread is inside live(). */
static void remove_during_call(void)
{
    struct lib l = {.state = ALIVE, .wait_inside = 1};
    struct vdev_mem_holder h = {live, forget, &l};
    CHECK_OK(vdev_mem_holder_add(&h));
    atomic_store(&stop, 1); /* one query */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, ask, NULL) == 0);
    CHECK(check_wait_flag(&l.entered));
    atomic_store(&l.removing, 1);
    CHECK_OK(vdev_mem_holder_remove(&h));
    atomic_store(&l.state, DEAD); /* the library's destructor ran */
    pthread_join(t, NULL);
    CHECK(atomic_load(&l.saw_dead) == 0);
}

/* Add and remove, over and over, while another thread asks. */
static void churn(void)
{
    atomic_store(&stop, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, ask, NULL) == 0);
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        struct lib l = {.state = ALIVE};
        struct vdev_mem_holder h = {live, forget, &l};
        bad += vdev_mem_holder_add(&h) != VDEV_OK;
        bad += vdev_mem_holder_remove(&h) != VDEV_OK;
        atomic_store(&l.state, DEAD);
        bad += atomic_load(&l.saw_dead);
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    CHECK(bad == 0);
}

int main(void)
{
    remove_during_call();
    churn();
    return check_done();
}
