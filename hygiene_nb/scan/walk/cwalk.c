/*
 * _cwalk: the threaded C core of hygiene_nb's disk walker.
 *
 * It keeps the row contract of hygiene_nb/scan/walk/spec.py (the module docstring there is the
 * reference; hygiene_nb/scan/walk/pywalk.py is the pure-Python twin).  Design:
 *
 *  - Worker threads pull directories from one scheduler (mutex `mu`, taken once per directory:
 *    fold in the listing just read, take the next).  The root is listed first; each direct
 *    child directory of the root then gets its own "lane" (a DFS stack) and the scheduler hands
 *    out one directory listing per turn, rotating over the lanes (round-robin).  Without a
 *    budget any ready lane is served (work-conserving); with max_entries / max_seconds the lanes
 *    are kept in step (no lane more than ceil(threads / active lanes) listings ahead of the
 *    least advanced one), so a big child cannot use up the budget while small ones wait.
 *  - A directory is opened by absolute path (O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC), its
 *    (st_dev, st_ino) checked against the parent's listing, read with getdents64 and every entry
 *    fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)-ed in inode order (each getdents buffer is sorted
 *    by d_ino, as fts does).  Non-directories are emitted at once; a
 *    directory's row is emitted when its pending count (own listing + unfinished subdirectories)
 *    drops to zero (post-order) and its sums are folded into its parent.
 *  - Hard links (nlink > 1, not a directory) count once in every directory, like `du DIR`: a
 *    global (dev, ino) map remembers the directories holding earlier occurrences; a repeat in
 *    directory C finds L, the deepest common ancestor of C with any earlier occurrence, and
 *    records a correction (-size) on L, so L and everything above count the inode once while the
 *    directories between C and L count it too.  Entries are dropped once `nlink` occurrences
 *    were seen.
 *  - Rows go to a per-thread chunk, chunks are merged into shared batches of `batch_rows`, and a
 *    bounded queue of finished batches is handed to Python (workers pause when it is full).
 *    Within a batch the directory rows come after the others (each part in stream order).
 *    Chunks are merged under `mu` before a listing can complete its directory, so the stream is
 *    post-order: a directory's row always comes after every row below it.
 *    Column buffers are handed over without copying (a tiny buffer-protocol type owns them).
 *  - Worker threads never touch Python objects; next_batch() waits with the GIL released.
 */
#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KIND_FILE 0
#define KIND_DIR 1
#define KIND_SYMLINK 2
#define KIND_OTHER 3
#define FLAG_EXCLUDED 1
#define FLAG_MOUNT_POINT 2
#define FLAG_BUDGET_CUT 4

#define CHUNK_ROWS 1024                 /* rows a thread buffers before merging them */
#define DENTS_BUF (64 * 1024)           /* getdents64 buffer per thread */
#define DENTS_MAX (DENTS_BUF / 24 + 1)  /* entries one buffer can hold (d_reclen >= 24) */
#define DATA_LIMIT ((size_t)1 << 30)    /* keep int32 offsets far from overflow */
#define QUEUE_MAX 4                     /* finished batches waiting for Python */
#define DEFAULT_THREADS 16
#define MAX_THREADS 256
#define NO_LANE UINT32_MAX

/* ------------------------------------------------------------------------------------------ */
/* Column batches                                                                             */
/* ------------------------------------------------------------------------------------------ */

typedef struct Batch {
    size_t n, cap;
    int32_t *poff;
    char *pdata;
    size_t plen, pcap;
    int32_t *noff;
    char *ndata;
    size_t nlen, ncap;
    uint8_t *kind;
    int64_t *size, *alloc, *mtime;
    uint64_t *ino, *dev, *nlink;
    int32_t *depth;
    int64_t *tb, *ta, *tf, *tl;
    uint8_t *partial;
    int32_t *err;
    uint8_t *flags;
    int64_t *ctime;
    uint32_t *uid, *gid, *mode;
    size_t nerr;
    struct Batch *next;
} Batch;

typedef struct Row {
    const char *parent;
    size_t plen;
    const char *name;
    size_t nlen;
    uint8_t kind;
    int64_t size, alloc, mtime;
    uint64_t ino, dev, nlink;
    int32_t depth;
    int64_t tb, ta, tf, tl;
    uint8_t partial;
    int32_t err;
    uint8_t flags;
    int64_t ctime;
    uint32_t uid, gid, mode;
} Row;

#define GROW(ptr, count)                                                   \
    do {                                                                   \
        void *np_ = realloc((ptr), (size_t)(count) * sizeof(*(ptr)));       \
        if (np_ == NULL)                                                   \
            return -1;                                                     \
        (ptr) = np_;                                                       \
    } while (0)

static int batch_reserve(Batch *b, size_t rows)
{
    if (rows <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < rows)
        cap *= 2;
    GROW(b->poff, cap + 1);
    GROW(b->noff, cap + 1);
    GROW(b->kind, cap);
    GROW(b->size, cap);
    GROW(b->alloc, cap);
    GROW(b->mtime, cap);
    GROW(b->ino, cap);
    GROW(b->dev, cap);
    GROW(b->nlink, cap);
    GROW(b->depth, cap);
    GROW(b->tb, cap);
    GROW(b->ta, cap);
    GROW(b->tf, cap);
    GROW(b->tl, cap);
    GROW(b->partial, cap);
    GROW(b->err, cap);
    GROW(b->flags, cap);
    GROW(b->ctime, cap);
    GROW(b->uid, cap);
    GROW(b->gid, cap);
    GROW(b->mode, cap);
    if (b->cap == 0) {
        b->poff[0] = 0;
        b->noff[0] = 0;
    }
    b->cap = cap;
    return 0;
}

static int data_reserve(char **data, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 4096;
    while (c < need)
        c *= 2;
    char *p = realloc(*data, c);
    if (p == NULL)
        return -1;
    *data = p;
    *cap = c;
    return 0;
}

static void batch_free(Batch *b)
{
    if (b == NULL)
        return;
    free(b->poff);
    free(b->pdata);
    free(b->noff);
    free(b->ndata);
    free(b->kind);
    free(b->size);
    free(b->alloc);
    free(b->mtime);
    free(b->ino);
    free(b->dev);
    free(b->nlink);
    free(b->depth);
    free(b->tb);
    free(b->ta);
    free(b->tf);
    free(b->tl);
    free(b->partial);
    free(b->err);
    free(b->flags);
    free(b->ctime);
    free(b->uid);
    free(b->gid);
    free(b->mode);
    free(b);
}

static Batch *batch_new(size_t rows)
{
    Batch *b = calloc(1, sizeof(Batch));
    if (b == NULL)
        return NULL;
    if (batch_reserve(b, rows) < 0 || data_reserve(&b->pdata, &b->pcap, 4096) < 0 ||
        data_reserve(&b->ndata, &b->ncap, 4096) < 0) {
        batch_free(b);
        return NULL;
    }
    return b;
}

static void batch_clear(Batch *b)
{
    b->n = 0;
    b->plen = 0;
    b->nlen = 0;
    b->nerr = 0;
}

static int batch_push(Batch *b, const Row *r)
{
    if (batch_reserve(b, b->n + 1) < 0 || data_reserve(&b->pdata, &b->pcap, b->plen + r->plen) < 0 ||
        data_reserve(&b->ndata, &b->ncap, b->nlen + r->nlen) < 0)
        return -1;
    size_t i = b->n;
    if (r->plen)
        memcpy(b->pdata + b->plen, r->parent, r->plen);
    b->plen += r->plen;
    b->poff[i + 1] = (int32_t)b->plen;
    if (r->nlen)
        memcpy(b->ndata + b->nlen, r->name, r->nlen);
    b->nlen += r->nlen;
    b->noff[i + 1] = (int32_t)b->nlen;
    b->kind[i] = r->kind;
    b->size[i] = r->size;
    b->alloc[i] = r->alloc;
    b->mtime[i] = r->mtime;
    b->ino[i] = r->ino;
    b->dev[i] = r->dev;
    b->nlink[i] = r->nlink;
    b->depth[i] = r->depth;
    b->tb[i] = r->tb;
    b->ta[i] = r->ta;
    b->tf[i] = r->tf;
    b->tl[i] = r->tl;
    b->partial[i] = r->partial;
    b->err[i] = r->err;
    b->flags[i] = r->flags;
    b->ctime[i] = r->ctime;
    b->uid[i] = r->uid;
    b->gid[i] = r->gid;
    b->mode[i] = r->mode;
    if (r->err)
        b->nerr++;
    b->n = i + 1;
    return 0;
}

/* Append rows [i, i + k) of src to dst. */
static int batch_append(Batch *dst, const Batch *src, size_t i, size_t k)
{
    if (k == 0)
        return 0;
    size_t p0 = (size_t)src->poff[i], p1 = (size_t)src->poff[i + k];
    size_t n0 = (size_t)src->noff[i], n1 = (size_t)src->noff[i + k];
    if (batch_reserve(dst, dst->n + k) < 0 ||
        data_reserve(&dst->pdata, &dst->pcap, dst->plen + (p1 - p0)) < 0 ||
        data_reserve(&dst->ndata, &dst->ncap, dst->nlen + (n1 - n0)) < 0)
        return -1;
    size_t d = dst->n;
    memcpy(dst->pdata + dst->plen, src->pdata + p0, p1 - p0);
    memcpy(dst->ndata + dst->nlen, src->ndata + n0, n1 - n0);
    for (size_t j = 1; j <= k; j++) {
        dst->poff[d + j] = (int32_t)(dst->plen + ((size_t)src->poff[i + j] - p0));
        dst->noff[d + j] = (int32_t)(dst->nlen + ((size_t)src->noff[i + j] - n0));
    }
    dst->plen += p1 - p0;
    dst->nlen += n1 - n0;
#define CP(col) memcpy(dst->col + d, src->col + i, k * sizeof(*dst->col))
    CP(kind);
    CP(size);
    CP(alloc);
    CP(mtime);
    CP(ino);
    CP(dev);
    CP(nlink);
    CP(depth);
    CP(tb);
    CP(ta);
    CP(tf);
    CP(tl);
    CP(partial);
    CP(err);
    CP(flags);
    CP(ctime);
    CP(uid);
    CP(gid);
    CP(mode);
#undef CP
    for (size_t j = 0; j < k; j++)
        if (src->err[i + j])
            dst->nerr++;
    dst->n += k;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Walk state                                                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef struct Node {
    struct Node *parent;
    struct Node *prev_all, *next_all; /* every live node, for teardown */
    atomic_long refs; /* alive (until its row is out) + one per child node + hard-link map */
    int64_t size, alloc, mtime, ctime;
    uint64_t ino, dev, nlink;
    uint32_t uid, gid, mode;
    int64_t tb, ta, tf, tl; /* rollups, guarded by W.mu */
    int64_t pending;        /* own listing + unfinished child directories, guarded by W.mu */
    int32_t depth;
    int32_t err;
    uint32_t lane;
    uint8_t flags;
    uint8_t partial;
    bool quiet;       /* a store/quarantine subtree: its row is counted, never emitted */
    bool quiet_below; /* what this directory's listing holds is counted, never emitted */
    size_t path_len, name_off;
    char path[]; /* NUL-terminated absolute path; the name is path + name_off */
} Node;

typedef struct Rule {
    char *pat;
    bool anchored, dir_only, negate, pathname, globstar;
    /* globstar: the pattern cut at its "**" components (split_globstar) */
    char *segbuf;       /* the segments, each NUL-terminated */
    char **segs;
    size_t *seg_parts;  /* most components a segment can span: 1 + its '/' count */
    size_t nsegs;
    bool lead, trail;   /* the pattern starts / ends with a "**" component */
} Rule;

typedef struct Name {
    char *s;
    size_t len;
} Name;

typedef struct Ident {
    uint64_t dev, ino;
} Ident;

typedef struct HLEnt {
    uint64_t dev, ino, seen;
    Node **occ; /* directories holding earlier occurrences (each holds a ref) */
    uint32_t nocc, cap;
    struct HLEnt *next;
} HLEnt;

typedef struct Lane {
    Node **stk;
    size_t n, cap;
    uint64_t started; /* listings handed out (budgeted walks) */
    int inflight;     /* listings of this lane being read right now */
    uint32_t next_ready;
    bool queued;
} Lane;

typedef struct Corr {
    Node *node;
    int64_t db, da, df;
} Corr;

struct W;

typedef struct Worker {
    struct W *w;
    pthread_t tid;
    bool started;
    Batch *chunk;
    char *dents;
    const struct linux_dirent64 **order; /* one buffer's entries, sorted by inode */
    char *rel;
    size_t relcap;
    char *gtext; /* globstar matching: a copy of the text, its component offsets, reach sets */
    size_t gtextcap;
    size_t *goff;
    bool *greach;
    size_t gcap;
    Node **subs;
    size_t nsubs, capsubs;
    Corr *corr;
    size_t ncorr, capcorr;
    Node **unrefs; /* hard-link map references to drop at the next apply */
    size_t nunrefs, capunrefs;
    /* per-listing results */
    int64_t ltb, lta, ltf, ltl;
    int32_t lerr;
    uint8_t lflags;
    bool lpartial;
    bool oom;
} Worker;

typedef struct W {
    /* options */
    char *root;
    size_t root_len, rel_off;
    bool ofs;
    Rule *rules;
    size_t nrules;
    bool any_anchored;
    Ident *skip_ids;
    size_t nskip_ids;
    Name *skip_names;
    size_t nskip_names;
    int64_t max_entries;
    double max_seconds;
    int nthreads;
    size_t batch_rows;
    uint64_t root_dev;
    uint64_t root_mnt; /* mount id of the root (under ofs), when root_mnt_known */
    bool root_mnt_known;
    struct timespec deadline;
    bool has_deadline;
    locale_t cloc;
    /* scheduler */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    Node *root_task;
    Lane *lanes;
    size_t nlanes, caplanes;
    /* ready lanes: FIFO queues by level (started % nlevels when budgeted, else one queue) */
    uint32_t *rhead, *rtail;
    size_t *level_count; /* active lanes per level (budgeted) */
    size_t nlevels;
    uint64_t round; /* least `started` among active lanes (budgeted) */
    int idle;       /* workers waiting on work_cv */
    size_t active_lanes; /* lanes with stacked or in-flight listings */
    bool budgeted;       /* max_entries or max_seconds set: keep lanes in step */
    bool done;
    /* live nodes (guarded by mu), for teardown */
    Node *all;
    /* hard links */
    pthread_mutex_t hl_mu;
    HLEnt **hl;
    size_t hl_nb, hl_n;
    /* output */
    pthread_mutex_t out_mu;
    pthread_cond_t data_cv, space_cv;
    Batch *cur;  /* the batch being filled: its non-directory rows ... */
    Batch *curd; /* ... and its directory rows, appended after them when it is handed over */
    Batch *qhead, *qtail;
    size_t nq;
    atomic_bool qfull; /* nq >= QUEUE_MAX, readable without out_mu */
    int alive;
    bool finished;
    /* counters */
    atomic_llong counted, errors, dirs;
    atomic_bool budget_cut, stop;
    atomic_int fatal;
    Worker *workers;
    int nworkers;
    bool sync_ok;
} W;

static void set_fatal(W *w, int e)
{
    int zero = 0;
    atomic_compare_exchange_strong(&w->fatal, &zero, e);
    atomic_store(&w->stop, true);
}

/* ---- nodes ---- */

static Node *node_new(W *w, Node *parent, const char *ppath, size_t plen, const char *name,
                      size_t nlen, const struct stat *st)
{
    size_t len;
    size_t name_off;
    if (parent == NULL) {
        len = nlen;
        name_off = 0;
    } else {
        bool slash = plen > 0 && ppath[plen - 1] == '/';
        name_off = plen + (slash ? 0 : 1);
        len = name_off + nlen;
    }
    Node *n = malloc(sizeof(Node) + len + 1);
    if (n == NULL)
        return NULL;
    memset(n, 0, sizeof(Node));
    if (parent == NULL) {
        memcpy(n->path, name, nlen);
    } else {
        memcpy(n->path, ppath, plen);
        if (name_off > plen)
            n->path[plen] = '/';
        memcpy(n->path + name_off, name, nlen);
    }
    n->path[len] = '\0';
    n->path_len = len;
    n->name_off = name_off;
    n->parent = parent;
    atomic_init(&n->refs, 1);
    n->size = (int64_t)st->st_size;
    n->alloc = (int64_t)st->st_blocks * 512;
    n->mtime = (int64_t)st->st_mtim.tv_sec * 1000000000LL + (int64_t)st->st_mtim.tv_nsec;
    n->ino = (uint64_t)st->st_ino;
    n->dev = (uint64_t)st->st_dev;
    n->nlink = (uint64_t)st->st_nlink;
    n->ctime = (int64_t)st->st_ctim.tv_sec * 1000000000LL + (int64_t)st->st_ctim.tv_nsec;
    n->uid = (uint32_t)st->st_uid;
    n->gid = (uint32_t)st->st_gid;
    n->mode = (uint32_t)st->st_mode;
    n->tb = n->size;
    n->ta = n->alloc;
    n->tf = 0;
    n->tl = n->mtime;
    n->pending = 1;
    n->depth = parent ? parent->depth + 1 : 0;
    n->lane = NO_LANE;
    if (parent) {
        n->quiet = n->quiet_below = parent->quiet_below;
        atomic_fetch_add(&parent->refs, 1);
    }
    atomic_fetch_add(&w->dirs, 1);
    return n;
}

/* Put n on the list of live nodes (under W.mu, or before the workers start). */
static void node_link(W *w, Node *n)
{
    n->prev_all = NULL;
    n->next_all = w->all;
    if (w->all)
        w->all->prev_all = n;
    w->all = n;
}

/* Drop a reference; the last one frees the node and drops its parent's (under W.mu: every
 * reference that can be the last is dropped there, so the live-node list needs no lock). */
static void node_unref(W *w, Node *n)
{
    while (n != NULL) {
        if (atomic_fetch_sub(&n->refs, 1) != 1)
            return;
        Node *p = n->parent;
        if (n->prev_all)
            n->prev_all->next_all = n->next_all;
        else
            w->all = n->next_all;
        if (n->next_all)
            n->next_all->prev_all = n->prev_all;
        free(n);
        n = p;
    }
}

/* ---- hard links ---- */

static size_t hl_hash(uint64_t dev, uint64_t ino)
{
    uint64_t h = ino * 0x9E3779B97F4A7C15ULL ^ (dev + 0x632BE59BD9B4E019ULL);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    return (size_t)h;
}

static Node *lca(Node *a, Node *b)
{
    while (a->depth > b->depth)
        a = a->parent;
    while (b->depth > a->depth)
        b = b->parent;
    while (a != b) {
        a = a->parent;
        b = b->parent;
    }
    return a;
}

/* Forget an entry; its node references are dropped at the worker's next apply (under W.mu). */
static void hl_drop(Worker *t, HLEnt *e)
{
    if (t->nunrefs + e->nocc > t->capunrefs) {
        size_t cap = t->capunrefs ? t->capunrefs * 2 : 64;
        while (cap < t->nunrefs + e->nocc)
            cap *= 2;
        Node **u = realloc(t->unrefs, cap * sizeof(Node *));
        if (u == NULL) {
            t->oom = true; /* fatal; the nodes are freed with the walk */
        } else {
            t->unrefs = u;
            t->capunrefs = cap;
        }
    }
    if (!t->oom)
        for (uint32_t i = 0; i < e->nocc; i++)
            t->unrefs[t->nunrefs++] = e->occ[i];
    free(e->occ);
    free(e);
}

/* Record an occurrence of (dev, ino) in directory c.  Returns the directory that must take
 * back the occurrence (NULL when it is the first), or sets *oom. */
static Node *hl_register(W *w, Worker *t, uint64_t dev, uint64_t ino, uint64_t nlink, Node *c)
{
    bool *oom = &t->oom;
    Node *best = NULL;
    pthread_mutex_lock(&w->hl_mu);
    if (w->hl_n >= w->hl_nb) {
        size_t nb = w->hl_nb ? w->hl_nb * 2 : 1024;
        HLEnt **t = calloc(nb, sizeof(HLEnt *));
        if (t == NULL) {
            *oom = true;
            pthread_mutex_unlock(&w->hl_mu);
            return NULL;
        }
        for (size_t i = 0; i < w->hl_nb; i++) {
            HLEnt *e = w->hl[i];
            while (e) {
                HLEnt *nx = e->next;
                size_t h = hl_hash(e->dev, e->ino) & (nb - 1);
                e->next = t[h];
                t[h] = e;
                e = nx;
            }
        }
        free(w->hl);
        w->hl = t;
        w->hl_nb = nb;
    }
    size_t h = hl_hash(dev, ino) & (w->hl_nb - 1);
    HLEnt **pp = &w->hl[h];
    HLEnt *e = *pp;
    while (e && !(e->dev == dev && e->ino == ino)) {
        pp = &e->next;
        e = *pp;
    }
    if (e == NULL) {
        e = calloc(1, sizeof(HLEnt));
        if (e == NULL || (e->occ = malloc(2 * sizeof(Node *))) == NULL) {
            free(e);
            *oom = true;
            pthread_mutex_unlock(&w->hl_mu);
            return NULL;
        }
        e->dev = dev;
        e->ino = ino;
        e->seen = 1;
        e->cap = 2;
        e->occ[0] = c;
        e->nocc = 1;
        atomic_fetch_add(&c->refs, 1);
        e->next = w->hl[h];
        w->hl[h] = e;
        w->hl_n++;
        pthread_mutex_unlock(&w->hl_mu);
        return NULL;
    }
    e->seen++;
    bool have_c = false;
    for (uint32_t i = 0; i < e->nocc; i++) {
        Node *o = e->occ[i];
        if (o == c)
            have_c = true;
        Node *l = lca(c, o);
        if (best == NULL || l->depth > best->depth)
            best = l;
    }
    if (e->seen >= nlink) {
        /* every link has been seen: no later occurrence can come */
        *pp = e->next;
        w->hl_n--;
        hl_drop(t, e);
    } else if (!have_c) {
        if (e->nocc == e->cap) {
            Node **o = realloc(e->occ, (size_t)e->cap * 2 * sizeof(Node *));
            if (o == NULL) {
                *oom = true;
                pthread_mutex_unlock(&w->hl_mu);
                return best;
            }
            e->occ = o;
            e->cap *= 2;
        }
        e->occ[e->nocc++] = c;
        atomic_fetch_add(&c->refs, 1);
    }
    pthread_mutex_unlock(&w->hl_mu);
    return best;
}

/* ---- output ---- */

static void enqueue_locked(W *w, Batch *b)
{
    b->next = NULL;
    if (w->qtail)
        w->qtail->next = b;
    else
        w->qhead = b;
    w->qtail = b;
    w->nq++;
    if (w->nq >= QUEUE_MAX)
        atomic_store_explicit(&w->qfull, true, memory_order_relaxed);
    pthread_cond_signal(&w->data_cv);
}

/* Hand the batch being filled to the queue: its directory rows after the others (under out_mu).
 * Both keep the stream's order, so the stream stays post-order (a directory comes after
 * everything below it, in this batch or an earlier one), and the snapshot writer, which puts
 * each row group's directories after its other rows, takes the two parts as slices instead of
 * filtering every column.  Returns -1 when out of memory. */
static int finish_batch_locked(W *w)
{
    Batch *b = w->cur, *d = w->curd;
    size_t dirs = d != NULL ? d->n : 0;
    if ((b == NULL || b->n == 0) && dirs == 0)
        return 0;
    if (b == NULL || b->n == 0) {
        /* directories only: hand that batch over as it is */
        batch_free(b);
        w->cur = NULL;
        w->curd = NULL;
        enqueue_locked(w, d);
        return 0;
    }
    if (batch_append(b, d, 0, dirs) < 0)
        return -1;
    if (d != NULL)
        batch_clear(d);
    w->cur = NULL;
    enqueue_locked(w, b);
    return 0;
}

/* Merge a thread's chunk into the shared batches (never blocks on the consumer): each run of
 * directory rows goes to w->curd, each run of other rows to w->cur. */
static int flush_chunk(W *w, Batch *ch)
{
    int rc = 0;
    if (ch->n == 0)
        return 0;
    pthread_mutex_lock(&w->out_mu);
    size_t i = 0;
    while (i < ch->n) {
        size_t plen = (w->cur ? w->cur->plen : 0) + (w->curd ? w->curd->plen : 0);
        size_t nlen = (w->cur ? w->cur->nlen : 0) + (w->curd ? w->curd->nlen : 0);
        size_t held = (w->cur ? w->cur->n : 0) + (w->curd ? w->curd->n : 0);
        if (held > 0 && (plen + ch->plen > DATA_LIMIT || nlen + ch->nlen > DATA_LIMIT)) {
            if (finish_batch_locked(w) < 0) {
                rc = -1;
                break;
            }
            held = 0;
        }
        bool dir = ch->kind[i] == KIND_DIR;
        Batch **dst = dir ? &w->curd : &w->cur;
        if (*dst == NULL) {
            size_t want = dir ? 1024 : 16384;
            *dst = batch_new(w->batch_rows < want ? w->batch_rows : want);
            if (*dst == NULL) {
                rc = -1;
                break;
            }
        }
        size_t run = 1;
        while (i + run < ch->n && (ch->kind[i + run] == KIND_DIR) == dir)
            run++;
        size_t room = w->batch_rows - held;
        size_t k = run < room ? run : room;
        if (batch_append(*dst, ch, i, k) < 0) {
            rc = -1;
            break;
        }
        i += k;
        if (held + k >= w->batch_rows && finish_batch_locked(w) < 0) {
            rc = -1;
            break;
        }
    }
    pthread_mutex_unlock(&w->out_mu);
    batch_clear(ch);
    return rc;
}

static void emit(Worker *t, const Row *r)
{
    if (t->oom)
        return;
    if (r->err)
        atomic_fetch_add(&t->w->errors, 1);
    if (batch_push(t->chunk, r) < 0) {
        t->oom = true;
        return;
    }
    if (t->chunk->n >= CHUNK_ROWS && flush_chunk(t->w, t->chunk) < 0)
        t->oom = true;
}

/* ---- scheduler (all under W.mu) ---- */

static size_t level_of(const W *w, const Lane *l)
{
    return w->budgeted ? (size_t)(l->started % w->nlevels) : 0;
}

static void ready_push(W *w, uint32_t id)
{
    Lane *l = &w->lanes[id];
    size_t q = level_of(w, l);
    l->queued = true;
    l->next_ready = NO_LANE;
    if (w->rtail[q] == NO_LANE)
        w->rhead[q] = id;
    else
        w->lanes[w->rtail[q]].next_ready = id;
    w->rtail[q] = id;
}

/* The least-advanced active lane moved on: advance the round. */
static void advance_round(W *w)
{
    while (w->active_lanes > 0 && w->level_count[w->round % w->nlevels] == 0)
        w->round++;
}

/* Take the next listing, round-robin over the lanes (one listing per turn).  Without a budget
 * any ready lane will do (FIFO).  With a budget the lanes are kept in step, as in a sequential
 * round-robin: a lane may start a listing only while it is fewer than
 * slack = ceil(threads / active lanes) listings ahead of the least-advanced active lane (whose
 * listing may still be running), so one big child cannot use up the budget while the others'
 * next listings wait.  Levels span at most threads + 1 values, so a pop costs O(threads). */
static Node *sched_pop(W *w)
{
    if (w->root_task) {
        Node *n = w->root_task;
        w->root_task = NULL;
        return n;
    }
    uint32_t id = NO_LANE;
    size_t q = 0;
    if (!w->budgeted) {
        id = w->rhead[0];
    } else if (w->active_lanes > 0) {
        uint64_t slack = ((uint64_t)w->nthreads + w->active_lanes - 1) / w->active_lanes;
        for (uint64_t lvl = w->round; lvl < w->round + slack && id == NO_LANE; lvl++) {
            q = (size_t)(lvl % w->nlevels);
            id = w->rhead[q];
        }
    }
    if (id == NO_LANE)
        return NULL;
    Lane *l = &w->lanes[id];
    w->rhead[q] = l->next_ready;
    if (w->rhead[q] == NO_LANE)
        w->rtail[q] = NO_LANE;
    Node *n = l->stk[--l->n];
    l->inflight++;
    if (w->budgeted) {
        w->level_count[l->started % w->nlevels]--;
        l->started++;
        w->level_count[l->started % w->nlevels]++;
        advance_round(w);
    }
    if (l->n)
        ready_push(w, id);
    else
        l->queued = false;
    return n;
}

static int lane_push(Lane *l, Node *n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        Node **s = realloc(l->stk, cap * sizeof(Node *));
        if (s == NULL)
            return -1;
        l->stk = s;
        l->cap = cap;
    }
    l->stk[l->n++] = n;
    return 0;
}

static void row_of_node(Row *r, const Node *n)
{
    const Node *p = n->parent;
    r->parent = p ? p->path : "";
    r->plen = p ? p->path_len : 0;
    r->name = n->path + n->name_off;
    r->nlen = n->path_len - n->name_off;
    r->kind = KIND_DIR;
    r->size = n->size;
    r->alloc = n->alloc;
    r->mtime = n->mtime;
    r->ino = n->ino;
    r->dev = n->dev;
    r->nlink = n->nlink;
    r->ctime = n->ctime;
    r->uid = n->uid;
    r->gid = n->gid;
    r->mode = n->mode;
    r->depth = n->depth;
    r->tb = n->tb;
    r->ta = n->ta;
    r->tf = n->tf;
    r->tl = n->tl;
    r->partial = n->partial;
    r->err = n->err;
    r->flags = n->flags;
}

/* n's pending count reached zero: emit it and fold it upwards while parents complete. */
static void finish_chain(W *w, Worker *t, Node *n)
{
    for (;;) {
        if (!n->quiet) {
            Row r;
            row_of_node(&r, n);
            emit(t, &r);
        }
        Node *p = n->parent;
        if (p == NULL) {
            w->done = true;
            pthread_cond_broadcast(&w->work_cv);
            node_unref(w, n);
            return;
        }
        p->tb += n->tb;
        p->ta += n->ta;
        p->tf += n->tf;
        if (n->tl > p->tl)
            p->tl = n->tl;
        p->partial |= n->partial;
        p->pending--;
        node_unref(w, n);
        if (p->pending)
            return;
        n = p;
    }
}

/* Fold a finished listing of c into the shared state (under W.mu). */
static void apply_listing(W *w, Worker *t, Node *c)
{
    for (size_t i = 0; i < t->nsubs; i++)
        node_link(w, t->subs[i]);
    for (size_t i = 0; i < t->nunrefs; i++)
        node_unref(w, t->unrefs[i]);
    t->nunrefs = 0;
    c->tb += t->ltb;
    c->ta += t->lta;
    c->tf += t->ltf;
    if (t->ltl > c->tl)
        c->tl = t->ltl;
    if (t->lpartial)
        c->partial = 1;
    if (t->lerr)
        c->err = t->lerr;
    c->flags |= t->lflags;
    for (size_t i = 0; i < t->ncorr; i++) {
        Node *l = t->corr[i].node;
        l->tb -= t->corr[i].db;
        l->ta -= t->corr[i].da;
        l->tf -= t->corr[i].df;
    }
    t->ncorr = 0;
    size_t pushed = 0;
    if (t->nsubs) {
        if (c->parent == NULL) {
            /* the root's children: one lane each, in listing order */
            for (size_t i = 0; i < t->nsubs; i++) {
                if (w->nlanes == w->caplanes) {
                    size_t cap = w->caplanes ? w->caplanes * 2 : 64;
                    Lane *nl = realloc(w->lanes, cap * sizeof(Lane));
                    if (nl == NULL) {
                        t->oom = true;
                        break;
                    }
                    w->lanes = nl;
                    w->caplanes = cap;
                }
                uint32_t id = (uint32_t)w->nlanes;
                Lane *l = &w->lanes[id];
                memset(l, 0, sizeof(Lane));
                if (lane_push(l, t->subs[i]) < 0) {
                    t->oom = true;
                    break;
                }
                w->nlanes++;
                w->active_lanes++;
                if (w->budgeted)
                    w->level_count[0]++;
                t->subs[i]->lane = id;
                ready_push(w, id);
                pushed++;
            }
        } else {
            Lane *l = &w->lanes[c->lane];
            for (size_t i = t->nsubs; i-- > 0;) {
                if (lane_push(l, t->subs[i]) < 0) {
                    t->oom = true;
                    break;
                }
                t->subs[i]->lane = c->lane;
                pushed++;
            }
            if (pushed && !l->queued)
                ready_push(w, c->lane);
        }
        for (size_t i = 0; i < pushed && (int)i < w->idle; i++)
            pthread_cond_signal(&w->work_cv);
    }
    t->nsubs = 0;
    if (c->lane != NO_LANE) {
        Lane *l = &w->lanes[c->lane];
        l->inflight--;
        if (l->inflight == 0 && l->n == 0) {
            w->active_lanes--;
            if (w->budgeted) {
                w->level_count[l->started % w->nlevels]--;
                advance_round(w);
            }
        }
        /* the round may have moved on: let idle workers look again */
        if (w->budgeted && w->idle > 0)
            pthread_cond_broadcast(&w->work_cv);
    }
    c->pending += (int64_t)pushed - 1;
    if (c->pending == 0)
        finish_chain(w, t, c);
}

/* ---- budgets ---- */

static int64_t reserve_entries(W *w, int64_t k)
{
    if (w->max_entries <= 0) {
        atomic_fetch_add(&w->counted, k);
        return k;
    }
    long long cur = atomic_load(&w->counted);
    for (;;) {
        long long avail = (long long)w->max_entries - cur;
        if (avail <= 0)
            return 0;
        long long g = k < avail ? k : avail;
        if (atomic_compare_exchange_weak(&w->counted, &cur, cur + g))
            return g;
    }
}

static bool out_of_budget(W *w)
{
    if (w->max_entries > 0 && atomic_load(&w->counted) >= w->max_entries)
        return true;
    if (w->has_deadline) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > w->deadline.tv_sec ||
            (now.tv_sec == w->deadline.tv_sec && now.tv_nsec >= w->deadline.tv_nsec))
            return true;
    }
    return false;
}

/* ---- listing ---- */

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int dirent_ino_cmp(const void *a, const void *b)
{
    uint64_t x = (*(const struct linux_dirent64 *const *)a)->d_ino;
    uint64_t y = (*(const struct linux_dirent64 *const *)b)->d_ino;
    return (x > y) - (x < y);
}

static inline bool is_dot(const char *s)
{
    return s[0] == '.' && (s[1] == '\0' || (s[1] == '.' && s[2] == '\0'));
}

static uint8_t kind_of_mode(mode_t m)
{
    if (S_ISREG(m))
        return KIND_FILE;
    if (S_ISDIR(m))
        return KIND_DIR;
    if (S_ISLNK(m))
        return KIND_SYMLINK;
    return KIND_OTHER;
}

static uint8_t kind_of_dtype(unsigned char t)
{
    switch (t) {
    case DT_REG:
        return KIND_FILE;
    case DT_DIR:
        return KIND_DIR;
    case DT_LNK:
        return KIND_SYMLINK;
    default:
        return KIND_OTHER;
    }
}

/* A path component of two or more '*' alone is a "**" (git's rule). */
static bool is_globstar(const char *comp, size_t len)
{
    if (len < 2)
        return false;
    for (size_t i = 0; i < len; i++)
        if (comp[i] != '*')
            return false;
    return true;
}

/* Cut r->pat at its "**" components into the segments between them (runs of other components,
 * joined by '/'); consecutive "**" count as one. */
static int split_globstar(Rule *r)
{
    size_t len = strlen(r->pat);
    r->segbuf = malloc(len + 1);
    r->segs = malloc((len / 2 + 2) * sizeof(char *));
    r->seg_parts = malloc((len / 2 + 2) * sizeof(size_t));
    if (r->segbuf == NULL || r->segs == NULL || r->seg_parts == NULL)
        return -1;
    char *out = r->segbuf;
    bool open_seg = false; /* a segment is being written at out */
    const char *comp = r->pat;
    for (;;) {
        const char *slash = strchr(comp, '/');
        size_t clen = slash ? (size_t)(slash - comp) : strlen(comp);
        bool star = is_globstar(comp, clen);
        if (comp == r->pat)
            r->lead = star;
        if (!slash)
            r->trail = star;
        if (star && open_seg) {
            *out++ = '\0';
            open_seg = false;
        } else if (!star && open_seg) {
            *out++ = '/';
            r->seg_parts[r->nsegs - 1]++;
        } else if (!star) {
            r->segs[r->nsegs] = out;
            r->seg_parts[r->nsegs++] = 1;
            open_seg = true;
        }
        if (!star) {
            memcpy(out, comp, clen);
            out += clen;
        }
        if (!slash)
            break;
        comp = slash + 1;
    }
    if (open_seg)
        *out = '\0';
    return 0;
}

static bool globstar_room(Worker *t, size_t len)
{
    if (len + 1 > t->gtextcap) {
        char *p = realloc(t->gtext, len + 1);
        if (p == NULL)
            return false;
        t->gtext = p;
        t->gtextcap = len + 1;
    }
    /* at most len + 1 components; offsets and the two reach sets need one more each */
    size_t need = len + 2;
    if (need > t->gcap) {
        size_t *o = realloc(t->goff, need * sizeof(size_t));
        if (o != NULL)
            t->goff = o;
        bool *b = realloc(t->greach, 2 * need * sizeof(bool));
        if (b != NULL)
            t->greach = b;
        if (o == NULL || b == NULL)
            return false;
        t->gcap = need;
    }
    return true;
}

/* Match one segment against the components [j, e) of t->gtext (offsets t->goff). */
static bool segment_matches(const Rule *r, Worker *t, size_t s, size_t j, size_t e)
{
    char *end = t->gtext + t->goff[e] - 1; /* the '/' after component e - 1, or the NUL */
    char saved = *end;
    *end = '\0';
    bool hit = fnmatch(r->segs[s], t->gtext + t->goff[j], r->pathname ? FNM_PATHNAME : 0) == 0;
    *end = saved;
    return hit;
}

/* Match text against a rule with "**" components: each one matches zero or more whole
 * components (a trailing one: one or more), and the segments between them match runs of
 * whole components with fnmatch(3). */
static bool globstar_matches(const Rule *r, Worker *t, const char *text)
{
    size_t len = strlen(text);
    if (!globstar_room(t, len)) {
        t->oom = true;
        return false;
    }
    memcpy(t->gtext, text, len + 1);
    size_t m = 0; /* components; component k is gtext[goff[k] .. goff[k + 1] - 1) */
    t->goff[m++] = 0;
    for (size_t i = 0; i < len; i++)
        if (text[i] == '/')
            t->goff[m++] = i + 1;
    t->goff[m] = len + 1;
    bool *cur = t->greach, *next = t->greach + m + 1; /* where the next segment may start */
    for (size_t j = 0; j <= m; j++)
        cur[j] = r->lead ? j < m : j == 0;
    for (size_t s = 0; s < r->nsegs; s++) {
        bool seen = false, any = false;
        for (size_t j = 0; s > 0 && j <= m; j++) { /* an inner "**": skip any number */
            seen |= cur[j];
            cur[j] = seen && j < m;
        }
        memset(next, 0, (m + 1) * sizeof(bool));
        for (size_t j = 0; j < m; j++) {
            if (!cur[j])
                continue;
            size_t last = r->pathname && j + r->seg_parts[s] < m ? j + r->seg_parts[s] : m;
            for (size_t e = j + 1; e <= last; e++)
                if (segment_matches(r, t, s, j, e))
                    next[e] = any = true;
        }
        if (!any)
            return false;
        bool *swap = cur;
        cur = next;
        next = swap;
    }
    if (r->nsegs == 0)
        return m > 0;
    if (!r->trail)
        return cur[m];
    for (size_t e = 1; e < m; e++)
        if (cur[e])
            return true;
    return false;
}

static bool is_excluded(W *w, Worker *t, Node *c, const char *name, size_t nlen, bool is_dir)
{
    const char *rel = NULL;
    bool excluded = false;
    for (size_t i = 0; i < w->nrules; i++) {
        const Rule *r = &w->rules[i];
        if (r->dir_only && !is_dir)
            continue;
        const char *target = name;
        if (r->anchored) {
            if (rel == NULL) {
                if (c->parent == NULL) {
                    rel = name;
                } else {
                    const char *crel = c->path + w->rel_off;
                    size_t clen = c->path_len - w->rel_off;
                    size_t need = clen + 1 + nlen + 1;
                    if (need > t->relcap) {
                        char *p = realloc(t->rel, need);
                        if (p == NULL) {
                            t->oom = true;
                            return false;
                        }
                        t->rel = p;
                        t->relcap = need;
                    }
                    memcpy(t->rel, crel, clen);
                    t->rel[clen] = '/';
                    memcpy(t->rel + clen + 1, name, nlen + 1);
                    rel = t->rel;
                }
            }
            target = rel;
        }
        bool hit = r->globstar ? globstar_matches(r, t, target)
                               : fnmatch(r->pat, target, r->pathname ? FNM_PATHNAME : 0) == 0;
        if (t->oom)
            return false;
        if (hit)
            excluded = !r->negate;
    }
    return excluded;
}

/* struct statx as the kernel lays it out (libc headers may lack stx_mnt_id). */
struct mnt_statx {
    uint32_t mask, blksize;
    uint64_t attributes;
    uint32_t nlink, uid, gid;
    uint16_t mode, spare0;
    uint64_t ino, size, blocks, attributes_mask;
    uint64_t times[8];
    uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
    uint64_t mnt_id;
    uint64_t spare[14];
};
_Static_assert(offsetof(struct mnt_statx, mnt_id) == 144, "struct statx layout");
#define MNT_STATX_MNT_ID 0x1000U
#define MNT_AT_NO_AUTOMOUNT 0x800
#define MNT_AT_EMPTY_PATH 0x1000

/*
 * The mount id of `name` under `dirfd` ("" for dirfd itself; a mount on it counts): statx
 * STATX_MNT_ID, else the mnt_id line of /proc/self/fdinfo for an O_PATH handle.  False when it
 * cannot be told (the caller then treats it as another mount).  A bind mount of the same
 * filesystem has the same st_dev; only the mount id tells.
 */
static bool mount_id_at(int dirfd, const char *name, uint64_t *out)
{
#ifdef SYS_statx
    struct mnt_statx sx;
    memset(&sx, 0, sizeof sx);
    int flags = AT_SYMLINK_NOFOLLOW | MNT_AT_NO_AUTOMOUNT | (name[0] ? 0 : MNT_AT_EMPTY_PATH);
    if (syscall(SYS_statx, dirfd, name, flags, MNT_STATX_MNT_ID, &sx) == 0 &&
        (sx.mask & MNT_STATX_MNT_ID)) {
        *out = sx.mnt_id;
        return true;
    }
#endif
    int fd = name[0] ? openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)
                     : fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return false;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    int info = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = info < 0 ? -1 : read(info, buf, sizeof buf - 1);
    if (info >= 0)
        close(info);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    char *line = strstr(buf, "mnt_id:");
    if (line == NULL)
        return false;
    *out = strtoull(line + 7, NULL, 10);
    return true;
}

/* Whether directory `name` under `fd` is on another mount than the root (or cannot tell). */
static bool other_mount(W *w, int fd, const char *name)
{
    uint64_t id;
    return !w->root_mnt_known || !mount_id_at(fd, name, &id) || id != w->root_mnt;
}

static bool skipped(W *w, const char *name, size_t nlen, const struct stat *st)
{
    for (size_t i = 0; i < w->nskip_names; i++)
        if (w->skip_names[i].len == nlen && memcmp(w->skip_names[i].s, name, nlen) == 0)
            return true;
    size_t lo = 0, hi = w->nskip_ids;
    uint64_t dev = (uint64_t)st->st_dev, ino = (uint64_t)st->st_ino;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const Ident *m = &w->skip_ids[mid];
        if (m->dev == dev && m->ino == ino)
            return true;
        if (m->dev < dev || (m->dev == dev && m->ino < ino))
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static void add_sums(Worker *t, int64_t b, int64_t a, int64_t f, int64_t l)
{
    t->ltb += b;
    t->lta += a;
    t->ltf += f;
    if (l > t->ltl)
        t->ltl = l;
}

static void list_entry(W *w, Worker *t, Node *c, int fd, const struct linux_dirent64 *d)
{
    const char *name = d->d_name;
    size_t nlen = strlen(name);
    struct stat st;
    int rc;
    do
        rc = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW);
    while (rc != 0 && errno == EINTR);
    Row r;
    r.parent = c->path;
    r.plen = c->path_len;
    r.name = name;
    r.nlen = nlen;
    r.depth = c->depth + 1;
    if (rc != 0) {
        int e = errno ? errno : EIO;
        r.kind = kind_of_dtype(d->d_type);
        r.size = r.alloc = r.mtime = 0;
        r.ino = r.dev = r.nlink = 0;
        r.ctime = 0;
        r.uid = r.gid = r.mode = 0;
        r.tb = r.ta = r.tf = r.tl = 0;
        r.partial = r.kind == KIND_DIR;
        r.err = e;
        r.flags = 0;
        t->lpartial = true;
        if (!c->quiet_below)
            emit(t, &r);
        return;
    }
    uint8_t kind = kind_of_mode(st.st_mode);
    uint8_t flags = 0;
    if (w->nrules && is_excluded(w, t, c, name, nlen, kind == KIND_DIR))
        flags = FLAG_EXCLUDED;
    bool skip = false;
    int64_t size = (int64_t)st.st_size;
    int64_t alloc = (int64_t)st.st_blocks * 512;
    int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000LL + (int64_t)st.st_mtim.tv_nsec;
    int64_t files = 0;
    if (kind == KIND_DIR) {
        if (w->ofs && !flags &&
            ((uint64_t)st.st_dev != w->root_dev || other_mount(w, fd, name)))
            flags = FLAG_MOUNT_POINT;
        /* the store and quarantines: descended for their sums, nothing below them emitted */
        skip = !flags && skipped(w, name, nlen, &st);
        if (!flags) {
            Node *n = node_new(w, c, c->path, c->path_len, name, nlen, &st);
            if (n == NULL) {
                t->oom = true;
                return;
            }
            n->quiet_below |= skip;
            if (t->nsubs == t->capsubs) {
                size_t cap = t->capsubs ? t->capsubs * 2 : 64;
                Node **s = realloc(t->subs, cap * sizeof(Node *));
                if (s == NULL) {
                    t->oom = true;
                    return;
                }
                t->subs = s;
                t->capsubs = cap;
            }
            t->subs[t->nsubs++] = n;
            return;
        }
    } else if (!flags) {
        files = kind == KIND_FILE;
        if (st.st_nlink > 1) {
            Node *l = hl_register(w, t, (uint64_t)st.st_dev, (uint64_t)st.st_ino,
                                  (uint64_t)st.st_nlink, c);
            if (l == c) {
                add_sums(t, -size, -alloc, -files, 0);
            } else if (l != NULL) {
                if (t->ncorr == t->capcorr) {
                    size_t cap = t->capcorr ? t->capcorr * 2 : 64;
                    Corr *p = realloc(t->corr, cap * sizeof(Corr));
                    if (p == NULL) {
                        t->oom = true;
                        return;
                    }
                    t->corr = p;
                    t->capcorr = cap;
                }
                t->corr[t->ncorr++] = (Corr){l, size, alloc, files};
            }
        }
    }
    if (!(flags & FLAG_EXCLUDED)) /* an excluded entry is recorded, counted nowhere */
        add_sums(t, size, alloc, files, mtime);
    else if (kind == KIND_FILE)
        files = 1;
    if (c->quiet_below)
        return;
    r.kind = kind;
    r.size = size;
    r.alloc = alloc;
    r.mtime = mtime;
    r.ino = (uint64_t)st.st_ino;
    r.dev = (uint64_t)st.st_dev;
    r.nlink = (uint64_t)st.st_nlink;
    r.ctime = (int64_t)st.st_ctim.tv_sec * 1000000000LL + (int64_t)st.st_ctim.tv_nsec;
    r.uid = (uint32_t)st.st_uid;
    r.gid = (uint32_t)st.st_gid;
    r.mode = (uint32_t)st.st_mode;
    r.tb = size;
    r.ta = alloc;
    r.tf = files;
    r.tl = mtime;
    r.partial = 0;
    r.err = 0;
    r.flags = flags;
    emit(t, &r);
}

static void list_dir(W *w, Worker *t, Node *c)
{
    int fd;
    do
        fd = open(c->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        t->lerr = errno ? errno : EIO;
        t->lpartial = true;
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        t->lerr = errno ? errno : EIO;
        t->lpartial = true;
        close(fd);
        return;
    }
    if ((uint64_t)st.st_dev != c->dev || (uint64_t)st.st_ino != c->ino) {
        t->lerr = ENOENT;
        t->lpartial = true;
        close(fd);
        return;
    }
    for (;;) {
        if (atomic_load(&w->stop) || t->oom)
            break;
        long nread = syscall(SYS_getdents64, fd, t->dents, DENTS_BUF);
        if (nread < 0) {
            if (errno == EINTR)
                continue;
            t->lerr = errno ? errno : EIO;
            t->lpartial = true;
            break;
        }
        if (nread == 0)
            break;
        size_t k = 0;
        for (long off = 0; off < nread;) {
            const struct linux_dirent64 *d = (const void *)(t->dents + off);
            if (!is_dot(d->d_name) && k < DENTS_MAX)
                t->order[k++] = d;
            off += d->d_reclen;
        }
        /* Stat in inode order, as fts does for big directories: on ext4/xfs the inode table is
         * then read in ascending block order (fewer seeks cold), and the rows come out with
         * inodes and creation-ordered names and mtimes next to each other (a smaller file). */
        qsort(t->order, k, sizeof(*t->order), dirent_ino_cmp);
        /* a quiet listing emits no rows: it takes nothing from the entry budget */
        int64_t g = c->quiet_below ? (int64_t)k : k ? reserve_entries(w, (int64_t)k) : 0;
        for (int64_t i = 0; i < g; i++)
            list_entry(w, t, c, fd, t->order[i]);
        if (g < (int64_t)k) {
            t->lflags |= FLAG_BUDGET_CUT;
            t->lpartial = true;
            atomic_store(&w->budget_cut, true);
            break;
        }
    }
    close(fd);
}

/* ---- workers ---- */

static void *worker_main(void *arg)
{
    Worker *t = arg;
    W *w = t->w;
    if (w->cloc != (locale_t)0)
        uselocale(w->cloc); /* fnmatch on bytes, whatever the process locale */
    Node *c = NULL; /* the listing just read, to fold in before taking the next */
    for (;;) {
        if (atomic_load_explicit(&w->qfull, memory_order_relaxed)) {
            pthread_mutex_lock(&w->out_mu);
            while (w->nq >= QUEUE_MAX && !atomic_load(&w->stop))
                pthread_cond_wait(&w->space_cv, &w->out_mu);
            pthread_mutex_unlock(&w->out_mu);
        }
        if (atomic_load(&w->stop))
            break;
        /* One critical section per directory: fold in the last listing, take the next.  The
         * stream stays post-order because a listing's rows and the rows of the directories it
         * finished are shared (flushed) before the scheduler lock drops, and a directory can
         * only finish under that lock after all its children were folded in. */
        pthread_mutex_lock(&w->mu);
        if (c != NULL) {
            apply_listing(w, t, c);
            if (!t->oom && flush_chunk(w, t->chunk) < 0)
                t->oom = true;
            c = NULL;
            if (t->oom) {
                pthread_mutex_unlock(&w->mu);
                set_fatal(w, ENOMEM);
                break;
            }
        }
        while (!w->done && !atomic_load(&w->stop) && (c = sched_pop(w)) == NULL) {
            w->idle++;
            pthread_cond_wait(&w->work_cv, &w->mu);
            w->idle--;
        }
        pthread_mutex_unlock(&w->mu);
        if (c == NULL)
            break;
        t->ltb = t->lta = t->ltf = t->ltl = 0;
        t->lerr = 0;
        t->lflags = 0;
        t->lpartial = false;
        if (c->parent != NULL && out_of_budget(w)) {
            t->lflags = FLAG_BUDGET_CUT;
            t->lpartial = true;
            atomic_store(&w->budget_cut, true);
        } else {
            list_dir(w, t, c);
        }
        if (t->oom) {
            set_fatal(w, ENOMEM);
            break;
        }
    }
    if (!atomic_load(&w->stop) && flush_chunk(w, t->chunk) < 0)
        set_fatal(w, ENOMEM);
    if (atomic_load(&w->stop)) {
        pthread_mutex_lock(&w->mu);
        pthread_cond_broadcast(&w->work_cv);
        pthread_mutex_unlock(&w->mu);
    }
    pthread_mutex_lock(&w->out_mu);
    if (--w->alive == 0) {
        if (!atomic_load(&w->stop) && finish_batch_locked(w) < 0)
            set_fatal(w, ENOMEM);
        w->finished = true;
    }
    pthread_cond_broadcast(&w->data_cv);
    pthread_cond_broadcast(&w->space_cv);
    pthread_mutex_unlock(&w->out_mu);
    return NULL;
}

static void w_stop_and_join(W *w)
{
    atomic_store(&w->stop, true);
    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->work_cv);
    pthread_mutex_unlock(&w->mu);
    pthread_mutex_lock(&w->out_mu);
    pthread_cond_broadcast(&w->space_cv);
    pthread_mutex_unlock(&w->out_mu);
    for (int i = 0; i < w->nworkers; i++) {
        if (w->workers[i].started) {
            pthread_join(w->workers[i].tid, NULL);
            w->workers[i].started = false;
        }
    }
}

static void w_free(W *w)
{
    if (w == NULL)
        return;
    if (w->workers) {
        w_stop_and_join(w);
        for (int i = 0; i < w->nworkers; i++) {
            Worker *t = &w->workers[i];
            for (size_t j = 0; j < t->nsubs; j++)
                free(t->subs[j]); /* read but never folded in: not on the live list */
            free(t->unrefs);
            batch_free(t->chunk);
            free(t->dents);
            free(t->order);
            free(t->rel);
            free(t->gtext);
            free(t->goff);
            free(t->greach);
            free(t->subs);
            free(t->corr);
        }
        free(w->workers);
    }
    batch_free(w->cur);
    batch_free(w->curd);
    while (w->qhead) {
        Batch *b = w->qhead;
        w->qhead = b->next;
        batch_free(b);
    }
    for (size_t i = 0; i < w->nlanes; i++)
        free(w->lanes[i].stk);
    free(w->lanes);
    free(w->rhead);
    free(w->rtail);
    free(w->level_count);
    for (size_t i = 0; i < w->hl_nb; i++) {
        HLEnt *e = w->hl[i];
        while (e) {
            HLEnt *nx = e->next;
            free(e->occ);
            free(e);
            e = nx;
        }
    }
    free(w->hl);
    Node *n = w->all;
    while (n) {
        Node *nx = n->next_all;
        free(n);
        n = nx;
    }
    for (size_t i = 0; i < w->nrules; i++) {
        free(w->rules[i].pat);
        free(w->rules[i].segbuf);
        free(w->rules[i].segs);
        free(w->rules[i].seg_parts);
    }
    free(w->rules);
    for (size_t i = 0; i < w->nskip_names; i++)
        free(w->skip_names[i].s);
    free(w->skip_names);
    free(w->skip_ids);
    free(w->root);
    if (w->cloc != (locale_t)0)
        freelocale(w->cloc);
    if (w->sync_ok) {
        pthread_mutex_destroy(&w->mu);
        pthread_mutex_destroy(&w->hl_mu);
        pthread_mutex_destroy(&w->out_mu);
        pthread_cond_destroy(&w->work_cv);
        pthread_cond_destroy(&w->data_cv);
        pthread_cond_destroy(&w->space_cv);
    }
    free(w);
}

/* ------------------------------------------------------------------------------------------ */
/* Python: an owned column buffer                                                             */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    void *ptr;
    Py_ssize_t len;
} BufObject;

static void Buf_dealloc(BufObject *self)
{
    free(self->ptr);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Buf_getbuffer(BufObject *self, Py_buffer *view, int flags)
{
    static char empty[1];
    void *p = self->ptr ? self->ptr : empty;
    return PyBuffer_FillInfo(view, (PyObject *)self, p, self->len, 1, flags);
}

static PyBufferProcs Buf_as_buffer = {
    .bf_getbuffer = (getbufferproc)Buf_getbuffer,
    .bf_releasebuffer = NULL,
};

static Py_ssize_t Buf_length(BufObject *self)
{
    return self->len;
}

static PySequenceMethods Buf_as_sequence = {
    .sq_length = (lenfunc)Buf_length,
};

static PyTypeObject BufType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hygiene_nb.scan.walk._cwalk.Buffer",
    .tp_basicsize = sizeof(BufObject),
    .tp_dealloc = (destructor)Buf_dealloc,
    .tp_as_sequence = &Buf_as_sequence,
    .tp_as_buffer = &Buf_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A read-only column buffer owned by the walker core (zero-copy handover).",
};

/* Wrap ptr (taking ownership, even on failure). */
static PyObject *buf_take(void *ptr, size_t len)
{
    BufObject *b = PyObject_New(BufObject, &BufType);
    if (b == NULL) {
        free(ptr);
        return NULL;
    }
    b->ptr = ptr;
    b->len = (Py_ssize_t)len;
    return (PyObject *)b;
}

/* ------------------------------------------------------------------------------------------ */
/* Python: the Walker                                                                         */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    W *w;
    bool started;
    bool ended;
    bool busy;
} WalkerObject;

static void Walker_dealloc(WalkerObject *self)
{
    W *w = self->w;
    self->w = NULL;
    if (w != NULL) {
        Py_BEGIN_ALLOW_THREADS
        w_free(w);
        Py_END_ALLOW_THREADS
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int bytes_dup(PyObject *o, const char *what, char **out, size_t *len)
{
    char *s;
    Py_ssize_t n;
    if (!PyBytes_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes", what);
        return -1;
    }
    if (PyBytes_AsStringAndSize(o, &s, &n) < 0)
        return -1;
    if (memchr(s, '\0', (size_t)n) != NULL) {
        PyErr_Format(PyExc_ValueError, "%s contains a NUL byte", what);
        return -1;
    }
    *out = malloc((size_t)n + 1);
    if (*out == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(*out, s, (size_t)n);
    (*out)[n] = '\0';
    *len = (size_t)n;
    return 0;
}

static int ident_cmp(const void *a, const void *b)
{
    const Ident *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return 0;
}

static int Walker_init(WalkerObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"root", "one_file_system", "excludes", "skip_ids", "skip_names",
                             "max_entries", "max_seconds", "threads", "batch_rows", NULL};
    PyObject *root, *excludes = NULL, *skip_ids = NULL, *skip_names = NULL;
    int ofs = 0;
    long long max_entries = 0, batch_rows = 65536;
    double max_seconds = 0.0;
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|pOOOLdiL", kwlist, &root, &ofs, &excludes,
                                     &skip_ids, &skip_names, &max_entries, &max_seconds,
                                     &threads, &batch_rows))
        return -1;
    if (self->w != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Walker already initialised");
        return -1;
    }
    if (max_entries < 0 || max_seconds < 0 || threads < 0 || batch_rows <= 0 ||
        batch_rows > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "negative budget, threads or non-positive batch_rows");
        return -1;
    }
    W *w = calloc(1, sizeof(W));
    if (w == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (bytes_dup(root, "root", &w->root, &w->root_len) < 0)
        goto fail;
    if (w->root_len == 0 || w->root[0] != '/') {
        PyErr_SetString(PyExc_ValueError, "root must be an absolute path");
        goto fail;
    }
    w->rel_off = w->root_len + (w->root[w->root_len - 1] == '/' ? 0 : 1);
    w->ofs = ofs != 0;
    w->max_entries = max_entries;
    w->max_seconds = max_seconds;
    w->nthreads = threads ? (threads > MAX_THREADS ? MAX_THREADS : threads) : DEFAULT_THREADS;
    w->batch_rows = (size_t)batch_rows;
    w->budgeted = max_entries > 0 || max_seconds > 0;
    if (excludes != NULL && excludes != Py_None) {
        PyObject *seq = PySequence_Fast(excludes, "excludes must be a sequence");
        if (seq == NULL)
            goto fail;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        w->rules = calloc((size_t)n + 1, sizeof(Rule));
        if (w->rules == NULL) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *pat;
            int anchored, dir_only, negate, pathname, globstar;
            size_t plen;
            PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
            if (!PyTuple_Check(item) ||
                !PyArg_ParseTuple(item, "Oppppp", &pat, &anchored, &dir_only, &negate,
                                  &pathname, &globstar)) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError,
                                    "exclude rules are (pattern, anchored, dir_only, negate, "
                                    "pathname, globstar) tuples");
                Py_DECREF(seq);
                goto fail;
            }
            if (bytes_dup(pat, "exclude pattern", &w->rules[i].pat, &plen) < 0) {
                Py_DECREF(seq);
                goto fail;
            }
            w->nrules = (size_t)i + 1;
            w->rules[i].anchored = anchored;
            w->rules[i].dir_only = dir_only;
            w->rules[i].negate = negate;
            w->rules[i].pathname = pathname;
            w->rules[i].globstar = globstar;
            if (globstar && split_globstar(&w->rules[i]) < 0) {
                Py_DECREF(seq);
                PyErr_NoMemory();
                goto fail;
            }
            w->any_anchored |= anchored != 0;
        }
        Py_DECREF(seq);
    }
    if (skip_ids != NULL && skip_ids != Py_None) {
        PyObject *seq = PySequence_Fast(skip_ids, "skip_ids must be a sequence");
        if (seq == NULL)
            goto fail;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        w->skip_ids = calloc((size_t)n + 1, sizeof(Ident));
        if (w->skip_ids == NULL) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            unsigned long long dev, ino;
            PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
            if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "KK", &dev, &ino)) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "skip_ids are (dev, ino) tuples");
                Py_DECREF(seq);
                goto fail;
            }
            w->skip_ids[i].dev = dev;
            w->skip_ids[i].ino = ino;
        }
        w->nskip_ids = (size_t)n;
        Py_DECREF(seq);
        qsort(w->skip_ids, w->nskip_ids, sizeof(Ident), ident_cmp);
    }
    if (skip_names != NULL && skip_names != Py_None) {
        PyObject *seq = PySequence_Fast(skip_names, "skip_names must be a sequence");
        if (seq == NULL)
            goto fail;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        w->skip_names = calloc((size_t)n + 1, sizeof(Name));
        if (w->skip_names == NULL) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (bytes_dup(PySequence_Fast_GET_ITEM(seq, i), "skip name", &w->skip_names[i].s,
                          &w->skip_names[i].len) < 0) {
                Py_DECREF(seq);
                goto fail;
            }
            w->nskip_names = (size_t)i + 1;
        }
        Py_DECREF(seq);
    }
    w->cloc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) {
        PyErr_NoMemory();
        goto fail;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->hl_mu, NULL);
    pthread_mutex_init(&w->out_mu, NULL);
    pthread_cond_init(&w->work_cv, NULL);
    pthread_cond_init(&w->data_cv, &ca);
    pthread_cond_init(&w->space_cv, NULL);
    pthread_condattr_destroy(&ca);
    w->sync_ok = true;
    w->nlevels = w->budgeted ? (size_t)w->nthreads + 2 : 1;
    w->rhead = malloc(w->nlevels * sizeof(uint32_t));
    w->rtail = malloc(w->nlevels * sizeof(uint32_t));
    w->level_count = calloc(w->nlevels, sizeof(size_t));
    if (w->rhead == NULL || w->rtail == NULL || w->level_count == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (size_t i = 0; i < w->nlevels; i++)
        w->rhead[i] = w->rtail[i] = NO_LANE;
    atomic_init(&w->counted, 0);
    atomic_init(&w->errors, 0);
    atomic_init(&w->dirs, 0);
    atomic_init(&w->budget_cut, false);
    atomic_init(&w->stop, false);
    atomic_init(&w->fatal, 0);
    atomic_init(&w->qfull, false);
    self->w = w;
    return 0;
fail:
    w_free(w);
    return -1;
}

/* lstat the root, make its node and start the workers. */
static int walker_start(WalkerObject *self)
{
    W *w = self->w;
    struct stat st;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = lstat(w->root, &st);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        PyObject *fn = PyBytes_FromStringAndSize(w->root, (Py_ssize_t)w->root_len);
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, fn);
        Py_XDECREF(fn);
        return -1;
    }
    w->root_dev = (uint64_t)st.st_dev;
    if (w->ofs) {
        Py_BEGIN_ALLOW_THREADS
        w->root_mnt_known = mount_id_at(AT_FDCWD, w->root, &w->root_mnt);
        Py_END_ALLOW_THREADS
    }
    if (w->max_seconds > 0) {
        clock_gettime(CLOCK_MONOTONIC, &w->deadline);
        double whole = (double)(long long)w->max_seconds;
        w->deadline.tv_sec += (time_t)whole;
        w->deadline.tv_nsec += (long)((w->max_seconds - whole) * 1e9);
        if (w->deadline.tv_nsec >= 1000000000L) {
            w->deadline.tv_sec += 1;
            w->deadline.tv_nsec -= 1000000000L;
        }
        w->has_deadline = true;
    }
    Node *root = node_new(w, NULL, NULL, 0, w->root, w->root_len, &st);
    if (root == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    node_link(w, root);
    atomic_store(&w->counted, 1);
    w->root_task = root;
    w->workers = calloc((size_t)w->nthreads, sizeof(Worker));
    if (w->workers == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->nworkers = w->nthreads;
    for (int i = 0; i < w->nworkers; i++) {
        Worker *t = &w->workers[i];
        t->w = w;
        t->chunk = batch_new(CHUNK_ROWS);
        t->dents = malloc(DENTS_BUF);
        t->order = malloc(DENTS_MAX * sizeof(*t->order));
        if (t->chunk == NULL || t->dents == NULL || t->order == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int started = 0, err = 0;
    pthread_mutex_lock(&w->out_mu);
    for (int i = 0; i < w->nworkers; i++) {
        Worker *t = &w->workers[i];
        err = pthread_create(&t->tid, NULL, worker_main, t);
        if (err != 0)
            break;
        t->started = true;
        started++;
        w->alive++;
    }
    pthread_mutex_unlock(&w->out_mu);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started == 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return 0;
}

#define NBUFS 23 /* the buffers of one batch handed to Python, in WALK_SCHEMA order */

static PyObject *batch_to_tuple(Batch *b)
{
    size_t n = b->n;
    uint8_t *bits = calloc((n + 7) / 8 + 1, 1);
    if (bits == NULL) {
        batch_free(b);
        return PyErr_NoMemory();
    }
    for (size_t i = 0; i < n; i++)
        if (b->partial[i])
            bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    free(b->partial);
    void *ptrs[NBUFS] = {b->poff, b->pdata, b->noff, b->ndata, b->kind, b->size, b->alloc,
                         b->mtime, b->ino, b->dev, b->nlink, b->depth, b->tb, b->ta,
                         b->tf, b->tl, bits, b->err, b->flags, b->ctime, b->uid, b->gid,
                         b->mode};
    size_t lens[NBUFS] = {(n + 1) * 4, b->plen, (n + 1) * 4, b->nlen, n, n * 8, n * 8,
                          n * 8, n * 8, n * 8, n * 8, n * 4, n * 8, n * 8,
                          n * 8, n * 8, (n + 7) / 8, n * 4, n, n * 8, n * 4, n * 4,
                          n * 4};
    size_t nerr = b->nerr;
    free(b); /* the column arrays now belong to ptrs */
    PyObject *bufs = PyTuple_New(NBUFS);
    for (size_t i = 0; i < NBUFS; i++) {
        if (bufs == NULL) {
            free(ptrs[i]);
            continue;
        }
        PyObject *o = buf_take(ptrs[i], lens[i]);
        if (o == NULL) {
            Py_CLEAR(bufs);
            continue;
        }
        PyTuple_SET_ITEM(bufs, (Py_ssize_t)i, o);
    }
    if (bufs == NULL)
        return NULL;
    return Py_BuildValue("(nnN)", (Py_ssize_t)n, (Py_ssize_t)nerr, bufs);
}

static PyObject *Walker_next_batch(WalkerObject *self, PyObject *Py_UNUSED(ignored))
{
    W *w = self->w;
    if (w == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Walker not initialised");
        return NULL;
    }
    if (self->ended)
        Py_RETURN_NONE;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "next_batch() is already running in another thread");
        return NULL;
    }
    if (!self->started) {
        self->started = true;
        if (walker_start(self) < 0) {
            self->ended = true;
            return NULL;
        }
    }
    self->busy = true;
    for (;;) {
        Batch *b = NULL;
        int fatal = 0;
        bool end = false;
        Py_BEGIN_ALLOW_THREADS
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += 100 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec += 1;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&w->out_mu);
        while (w->qhead == NULL && !w->finished && atomic_load(&w->fatal) == 0) {
            if (pthread_cond_timedwait(&w->data_cv, &w->out_mu, &until) == ETIMEDOUT)
                break;
        }
        fatal = atomic_load(&w->fatal);
        if (fatal == 0 && w->qhead != NULL) {
            b = w->qhead;
            w->qhead = b->next;
            if (w->qhead == NULL)
                w->qtail = NULL;
            w->nq--;
            if (w->nq < QUEUE_MAX)
                atomic_store_explicit(&w->qfull, false, memory_order_relaxed);
            pthread_cond_broadcast(&w->space_cv);
        } else if (fatal == 0 && w->finished) {
            end = true;
        }
        pthread_mutex_unlock(&w->out_mu);
        if (end || fatal)
            w_stop_and_join(w);
        Py_END_ALLOW_THREADS
        if (b != NULL) {
            self->busy = false;
            return batch_to_tuple(b);
        }
        if (fatal) {
            self->busy = false;
            self->ended = true;
            errno = fatal;
            if (fatal == ENOMEM)
                return PyErr_NoMemory();
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (end) {
            self->busy = false;
            self->ended = true;
            Py_RETURN_NONE;
        }
        if (PyErr_CheckSignals() < 0) {
            self->busy = false;
            return NULL;
        }
    }
}

static PyObject *Walker_close(WalkerObject *self, PyObject *Py_UNUSED(ignored))
{
    W *w = self->w;
    if (w != NULL && self->started && !self->busy) {
        Py_BEGIN_ALLOW_THREADS
        w_stop_and_join(w);
        Py_END_ALLOW_THREADS
        self->ended = true;
    }
    Py_RETURN_NONE;
}

static PyObject *Walker_get_entries(WalkerObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLongLong(self->w ? atomic_load(&self->w->counted) : 0);
}

static PyObject *Walker_get_errors(WalkerObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLongLong(self->w ? atomic_load(&self->w->errors) : 0);
}

static PyObject *Walker_get_dirs(WalkerObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLongLong(self->w ? atomic_load(&self->w->dirs) : 0);
}

static PyObject *Walker_get_budget_cut(WalkerObject *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->w ? atomic_load(&self->w->budget_cut) : 0);
}

static PyObject *Walker_get_threads(WalkerObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLong(self->w ? self->w->nthreads : 0);
}

static PyGetSetDef Walker_getset[] = {
    {"entries", (getter)Walker_get_entries, NULL, "Entries listed so far (the root included).",
     NULL},
    {"errors", (getter)Walker_get_errors, NULL, "Rows emitted with errno != 0 so far.", NULL},
    {"dirs", (getter)Walker_get_dirs, NULL, "Directories queued for listing so far.", NULL},
    {"budget_cut", (getter)Walker_get_budget_cut, NULL, "True once a budget cut anything.",
     NULL},
    {"threads", (getter)Walker_get_threads, NULL, "Worker threads used.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Walker_methods[] = {
    {"next_batch", (PyCFunction)Walker_next_batch, METH_NOARGS,
     "next_batch() -> (rows, errors, buffers) | None\n\n"
     "Wait (GIL released) for the next batch. buffers is a 23-tuple of read-only buffers:\n"
     "parent offsets (int32), parent data, name offsets (int32), name data, kind (u8),\n"
     "size, alloc, mtime_ns (i64), inode, dev, nlink (u64), depth (i32), tree_bytes,\n"
     "tree_alloc, tree_files, tree_latest_mtime_ns (i64), partial (bitmap), errno (i32),\n"
     "flags (u8), ctime_ns (i64), uid, gid, mode (u32). None once the walk is complete.\n"
     "Starts the walk on the first call."},
    {"close", (PyCFunction)Walker_close, METH_NOARGS, "Stop the workers (the walk ends)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WalkerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hygiene_nb.scan.walk._cwalk.Walker",
    .tp_basicsize = sizeof(WalkerObject),
    .tp_dealloc = (destructor)Walker_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Walker(root, one_file_system=False, excludes=(), skip_ids=(), skip_names=(),\n"
              "       max_entries=0, max_seconds=0.0, threads=0, batch_rows=65536)\n\n"
              "A threaded walk of root (bytes, absolute) in the row contract of\n"
              "hygiene_nb.scan.walk.spec. excludes: (pattern, anchored, dir_only, negate, pathname,\n"
              "globstar) tuples; skip_ids: (st_dev, st_ino) tuples; threads=0 picks the default.",
    .tp_methods = Walker_methods,
    .tp_getset = Walker_getset,
    .tp_init = (initproc)Walker_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef cwalk_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "hygiene_nb.scan.walk._cwalk",
    .m_doc = "Threaded C core of the hygiene_nb disk walker (see hygiene_nb.scan.walk.spec).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__cwalk(void)
{
    if (PyType_Ready(&BufType) < 0 || PyType_Ready(&WalkerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&cwalk_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&WalkerType);
    if (PyModule_AddObject(m, "Walker", (PyObject *)&WalkerType) < 0) {
        Py_DECREF(&WalkerType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "DEFAULT_THREADS", DEFAULT_THREADS) < 0 ||
        PyModule_AddIntConstant(m, "MAX_THREADS", MAX_THREADS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
