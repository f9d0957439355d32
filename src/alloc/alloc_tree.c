/* alloc_tree.c — long bins: a bin whose free chunks malloc had to scan more
 * than TREE_ON of is also kept in a search tree by address, so that its
 * lowest-addressed chunk of at least a given size is found in O(log n)
 * instead of a scan of the whole bin. Without it, a bin of thousands of
 * holes (a server that frees every other one of many small tensors) makes
 * each malloc of that size class walk all of them: quadratic in the number
 * of holes. The tree is a treap (a binary search tree by address whose
 * nodes also form a heap by a priority hashed from the record's index, which
 * keeps its expected depth logarithmic whatever order the chunks come in),
 * each node carrying the largest size-and-state word of its subtree, so the
 * descent to the lowest chunk that fits goes left whenever the left subtree
 * holds one. The bin's list stays as it is (the invariant check, the OOM
 * diagnosis and the largest-chunk query read it); the tree is an index over
 * it, kept in step by the bin operations of alloc_impl.h, which call here
 * only for a bin whose bit in `tmap` is set, so a short bin pays one bit
 * test. A tree that falls below TREE_OFF chunks is dropped and its bin
 * scanned again. The placement is the same either way (the lowest-addressed
 * chunk that fits), so capacities and addresses do not change. Nodes live in
 * an array beside the records, by record index, made the first time any bin
 * needs one; if the host cannot give it, the bin simply stays a list. All
 * functions are called with the allocator's lock held. */
#include "alloc/alloc_impl.h"

#include <stdlib.h>

/* The node's heap priority: a mix of its record index (the hash's constants
 * are odd multipliers with good avalanche). */
static inline uint32_t prio(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static inline uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* Recomputes x's subtree maximum from its children. */
static void pull(struct tnode *t, const struct chunk *ch, uint32_t x)
{
    uint32_t l = t[x].l, r = t[x].r;
    t[x].max = max3(ch[x].szst, l != NIL ? t[l].max : 0, r != NIL ? t[r].max : 0);
}

static uint32_t rotate_right(struct tnode *t, const struct chunk *ch, uint32_t x)
{
    uint32_t y = t[x].l;
    t[x].l = t[y].r;
    t[y].r = x;
    pull(t, ch, x);
    pull(t, ch, y);
    return y;
}

static uint32_t rotate_left(struct tnode *t, const struct chunk *ch, uint32_t x)
{
    uint32_t y = t[x].r;
    t[x].r = t[y].l;
    t[y].l = x;
    pull(t, ch, x);
    pull(t, ch, y);
    return y;
}

/* Inserts h into the subtree at x; returns the subtree's new root. */
static uint32_t insert(struct tnode *t, const struct chunk *ch, uint32_t x, uint32_t h)
{
    if (x == NIL) {
        t[h].l = t[h].r = NIL;
        t[h].max = ch[h].szst;
        return h;
    }
    if (ch[h].addr < ch[x].addr) {
        t[x].l = insert(t, ch, t[x].l, h);
        if (prio(t[x].l) > prio(x))
            return rotate_right(t, ch, x);
    } else {
        t[x].r = insert(t, ch, t[x].r, h);
        if (prio(t[x].r) > prio(x))
            return rotate_left(t, ch, x);
    }
    pull(t, ch, x);
    return x;
}

/* Joins two subtrees, every address of l below every address of r. */
static uint32_t join(struct tnode *t, const struct chunk *ch, uint32_t l, uint32_t r)
{
    if (l == NIL)
        return r;
    if (r == NIL)
        return l;
    if (prio(l) > prio(r)) {
        t[l].r = join(t, ch, t[l].r, r);
        pull(t, ch, l);
        return l;
    }
    t[r].l = join(t, ch, l, t[r].l);
    pull(t, ch, r);
    return r;
}

/* Removes the node at address addr from the subtree at x; returns its new root. */
static uint32_t erase(struct tnode *t, const struct chunk *ch, uint32_t x, uint64_t addr)
{
    if (x == NIL)
        return NIL; /* not there: the bin operations never ask for that */
    if (addr < ch[x].addr)
        t[x].l = erase(t, ch, t[x].l, addr);
    else if (addr > ch[x].addr)
        t[x].r = erase(t, ch, t[x].r, addr);
    else
        return join(t, ch, t[x].l, t[x].r);
    pull(t, ch, x);
    return x;
}

static void remove_one(struct vdev_alloc *a, unsigned b, uint32_t h)
{
    struct trees *tr = a->trees;
    tr->root[b] = erase(tr->node, a->ch, tr->root[b], a->ch[h].addr);
    tr->len[b]--;
}

uint32_t vdev_alloc_tree_want(struct vdev_alloc *a, unsigned b, uint32_t chosen)
{
    a->tree_want |= 1ull << b;
    a->hooks |= HOOK_TREES;
    return chosen;
}

/* Gives bin b its tree, from its list. */
static void build(struct vdev_alloc *a, unsigned b)
{
    if (!a->trees) {
        struct trees *tr = vdev_malloc(sizeof *tr);
        struct tnode *node = tr ? vdev_malloc((size_t)a->cap_ch * sizeof *node) : NULL;
        if (!node) {
            free(tr); /* host out of memory: the bin stays a list, scanned (and asked again) */
            return;
        }
        tr->node = node;
        a->trees = tr;
    }
    struct trees *tr = a->trees;
    tr->root[b] = NIL;
    tr->len[b] = 0;
    for (uint32_t i = a->ch[b].fnext; i != b; i = a->ch[i].fnext)
        vdev_alloc_tree_insert(a, b, i);
    a->tmap |= 1ull << b;
}

void vdev_alloc_tree_build_wanted(struct vdev_alloc *a)
{
    for (uint64_t w = a->tree_want & ~a->tmap; w; w &= w - 1)
        build(a, (unsigned)__builtin_ctzll(w));
    a->tree_want = 0;
    if (!a->tmap)
        a->hooks &= ~(unsigned)HOOK_TREES; /* no tree could be made */
}

uint32_t vdev_alloc_tree_lowest(const struct vdev_alloc *a, unsigned b, uint64_t key)
{
    const struct tnode *t = a->trees->node;
    const struct chunk *ch = a->ch;
    uint32_t x = a->trees->root[b];
    while (x != NIL) {
        uint32_t l = t[x].l, r = t[x].r;
        if (l != NIL && t[l].max >= key)
            x = l;
        else if (ch[x].szst >= key)
            return x;
        else if (r != NIL && t[r].max >= key)
            x = r;
        else
            break;
    }
    return b;
}

void vdev_alloc_tree_insert(struct vdev_alloc *a, unsigned b, uint32_t h)
{
    struct trees *tr = a->trees;
    tr->root[b] = insert(tr->node, a->ch, tr->root[b], h);
    tr->len[b]++;
}

void vdev_alloc_tree_remove(struct vdev_alloc *a, unsigned b, uint32_t h)
{
    remove_one(a, b, h);
    if (a->trees->len[b] < TREE_OFF) {
        a->tmap &= ~(1ull << b); /* short again: scanned; the nodes are simply forgotten */
        if (!a->tmap && !a->tree_want)
            a->hooks &= ~(unsigned)HOOK_TREES;
    }
}

void vdev_alloc_tree_replace(struct vdev_alloc *a, unsigned b, uint32_t old, uint32_t h)
{
    remove_one(a, b, old);
    vdev_alloc_tree_insert(a, b, h);
}

void vdev_alloc_tree_grew(struct vdev_alloc *a, unsigned b, uint32_t h)
{
    struct tnode *t = a->trees->node;
    const struct chunk *ch = a->ch;
    uint64_t addr = ch[h].addr, w = ch[h].szst;
    for (uint32_t x = a->trees->root[b]; x != NIL;) {
        if (t[x].max < w)
            t[x].max = w;
        if (addr == ch[x].addr)
            break;
        x = addr < ch[x].addr ? t[x].l : t[x].r;
    }
}

enum vdev_status vdev_alloc_tree_reserve(struct vdev_alloc *a, uint32_t cap)
{
    if (!a->trees)
        return VDEV_OK;
    struct tnode *n = vdev_realloc(a->trees->node, (size_t)cap * sizeof *n);
    if (!n)
        return VDEV_ERR_OOM; /* the caller says so (alloc.c, host_oom) */
    a->trees->node = n;
    return VDEV_OK;
}

uint64_t vdev_alloc_tree_bytes(const struct vdev_alloc *a)
{
    return a->trees ? sizeof *a->trees + (uint64_t)a->cap_ch * sizeof(struct tnode) : 0;
}

void vdev_alloc_tree_free(struct vdev_alloc *a)
{
    if (a->trees)
        free(a->trees->node);
    free(a->trees);
    a->trees = NULL;
    a->tmap = a->tree_want = 0;
    a->hooks &= ~(unsigned)HOOK_TREES;
}

/* In order from x: every node a free chunk of bin b, addresses rising above
 * *last, maxima exact, no child above its parent in priority; counts them.
 * Returns the first fault, or NULL. */
static const char *check_from(const struct vdev_alloc *a, unsigned b, uint32_t x,
                              uint64_t *last, uint32_t *n, unsigned depth)
{
    const struct tnode *t = a->trees->node;
    const struct chunk *ch = a->ch;
    if (x == NIL)
        return NULL;
    if (x < FIRST_RECORD || x >= a->cap_ch || ++*n > a->cap_ch || depth > 4096)
        return "a bad index, a cycle or a degenerate tree";
    uint32_t l = t[x].l, r = t[x].r;
    if ((l != NIL && (l >= a->cap_ch || prio(l) > prio(x))) ||
        (r != NIL && (r >= a->cap_ch || prio(r) > prio(x))))
        return "a child above its parent in priority";
    const char *e = check_from(a, b, l, last, n, depth + 1);
    if (e)
        return e;
    if (cstate(&ch[x]) != ST_FREE || bin_of(csize(&ch[x])) != b)
        return "a chunk that is not a free chunk of this bin";
    if (*last != ALL_ONES && ch[x].addr <= *last)
        return "addresses out of order";
    *last = ch[x].addr;
    if (t[x].max != max3(ch[x].szst, l != NIL ? t[l].max : 0, r != NIL ? t[r].max : 0))
        return "a wrong subtree maximum";
    return check_from(a, b, r, last, n, depth + 1);
}

const char *vdev_alloc_tree_check(const struct vdev_alloc *a, unsigned b, uint64_t list_len)
{
    if (!a->trees)
        return "a tree bit without trees";
    uint64_t last = ALL_ONES;
    uint32_t n = 0;
    const char *e = check_from(a, b, a->trees->root[b], &last, &n, 0);
    if (e)
        return e;
    if (n != a->trees->len[b] || n != list_len)
        return "its tree and its list hold different numbers of chunks";
    return NULL;
}
