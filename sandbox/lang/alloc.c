/* sandbox/lang/alloc: the collector and the allocator policy of the value
 * runtime (value.h): the collector's kinds and initialisation, the
 * per-evaluation budget, vctx's life cycle, value and byte blocks, the list
 * builder, GMP's allocation hooks. */
#include "sandbox/lang/siphash.h"
#include "sandbox/lang/value_impl.h"

#include <gc/gc_inline.h>
#include <gc/gc_mark.h>
#include <stdlib.h>
#include <sys/mman.h>

/* ---- memory ----------------------------------------------------------- */

/* Values live in the Boehm collector's heap (libgc): whatever the evaluation
 * can no longer reach (a comprehension's temporaries, intermediate strings,
 * the list behind sum([...]) once consumed) is reclaimed while it runs. The
 * collector finds pointers conservatively on the C stack, in static data and
 * in its own heap, so every value pointer is kept in one of those (in
 * malloc'd memory only where it is registered: vctx itself is an
 * uncollectable block, the AST's cached constants are rooted through
 * vctx.roots, a big list builder's array is a root while it grows). GMP
 * allocates through the collector too, so a big int's limbs die with it.
 *
 * The budget (vlimits.max_alloc_bytes) caps the collector's heap: before the
 * heap may pass it the collector collects, so at the cap the heap holds live
 * bytes (plus fragmentation), not garbage. The collector is initialised on
 * the first context, which the jail's warm-up creates before the seccomp
 * filter is loaded; it starts no threads in a single-threaded process and
 * afterwards needs only memory calls (its getcontext() also reads the signal
 * mask, which the filter refuses harmlessly). */

/* The collector adds a byte to every request before it rounds it up to its
 * 16-byte granule (all interior pointers are recognised, and the byte keeps
 * a pointer just past an object from retaining the next one): a 16-byte
 * float would take 32 bytes, a 32-byte event 48. Requests here ask for
 * their own size in whole granules (GC_generic_malloc_many takes granules
 * as they are) or one byte less (GC_generic_malloc and kin add it back):
 * the block is at least `size` usable bytes (GC_size), and the cost is only
 * that a pointer just past one of our blocks, which nothing keeps, would
 * retain its neighbour. Blocks with pointers are therefore of our own
 * kinds (g_value_kind): the collector's NORMAL kind does not scan an
 * object's last word, where it expects the extra byte. */
static inline size_t gc_request(size_t size)
{
    return size ? size - 1 : 0;
}

/* The collector kind of GMP's blocks: only an object's first word is
 * scanned. GMP keeps the temporaries of a big operation (above its alloca
 * size) in a chain linked through each block's first word and walks it to
 * free them at the end of the operation; pointer-free blocks would hide
 * the chain, so a collection during the operation reclaimed a temporary
 * GMP was done with but had yet to free, and the walk then read and freed
 * whatever reused its memory. A limb array's first word scanned as a
 * pointer costs at most a retained block. */
static unsigned g_gmp_kind;

/* The bytes this process's evaluations have asked of the collector
 * (v_total_alloc_bytes), counted per request in whole granules as asked,
 * not as the collector accounts them (it counts a list that
 * GC_generic_malloc_many fills whole, at whatever length the heap's state
 * gives it), so that an evaluation's figure is the same in a fresh process
 * and in one that has evaluated before. */
static uint64_t g_allocated;

static void *gmp_alloc(size_t n)
{
    g_allocated += n;
    void *p = GC_generic_malloc(n, (int)g_gmp_kind);
    /* GMP cannot fail an allocation: past the heap cap, take the memory
     * from malloc (the kernel's RLIMIT_AS stays the backstop). The value
     * limits keep every GMP operand far below the cap. */
    return p ? p : malloc(n);
}

static void gmp_free(void *p, size_t n)
{
    (void)n;
    if (GC_base(p))
        GC_FREE(p);
    else
        free(p);
}

void vi_free_str(char *s)
{
    gmp_free(s, 0);
}

static void *gmp_realloc(void *p, size_t old, size_t n)
{
    if (GC_base(p)) {
        g_allocated += n;
        void *q = GC_REALLOC(p, n);
        if (q) return q;
    }
    void *q = gmp_alloc(n);
    if (q) memcpy(q, p, old < n ? old : n);
    gmp_free(p, old);
    return q;
}

#define GC_MIN_BYTES_BETWEEN ((size_t)4 << 20)

/* The collector kinds of v_alloc's blocks (cleared) and of an item array
 * that is filled completely before the next allocation (v_build_list; not
 * cleared). Both are scanned to their last word: the collector's own
 * NORMAL kind skips an object's last word, which it takes for the padding
 * of its extra byte (see gc_request). */
static unsigned g_value_kind, g_uncleared_kind;

/* The live-heap budget of the current context (GC_set_max_heap_size's
 * value), for on_heap_resize. */
static size_t g_budget;

/* Populating the collector's heap as it grows. A section the collector adds
 * (one mapping of a few hundred KiB) is new memory that the evaluation is
 * about to fill, and each of its pages would otherwise be a zero-fill fault
 * of its own; one MADV_POPULATE_WRITE over the section costs less. The
 * collector says only how big its heap became (on_heap_resize), not where
 * the section lies, so the mapping is found among the anonymous mappings
 * last made in this process: the sandbox image is linked with
 * --wrap=mmap (sandbox/jail/CMakeLists.txt), which routes the collector's
 * mmap calls through __wrap_mmap below; a mapping is taken for the section
 * only when its size is the heap's growth and the collector counts its
 * first byte as heap (the two names are the linker's, hence no module
 * prefix). Elsewhere (no --wrap: the sidecar binary, which links
 * the shared collector, and the tests) nothing is recorded and nothing is
 * populated. On the 7 MB transcript (eval --batch, 90 evaluations in
 * sessions of 6, CPU best of 5): filter_errors 304.9 -> 285.5 ms (page
 * faults ~830 -> ~330 per evaluation), sum_latency 239.4 -> 216.6, an
 * evaluation whose heap never grows (session.count) unchanged. Transparent
 * huge pages cannot help here: a section is smaller than one. A big heap
 * grows by a share of its size at a time, most of which it may never use
 * before the evaluation ends: only a section's first POPULATE_MAX bytes
 * (where the collector allocates from first) are populated. */
#define RECENT_MAPS 4
#define POPULATE_MAX ((size_t)4 << 20)
static struct {
    void *p;
    size_t len;
} g_recent[RECENT_MAPS];
static unsigned g_recent_next;
static GC_word g_heap_seen;

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
    __attribute__((weak));
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    void *p = __real_mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && fd == -1 && (flags & MAP_ANONYMOUS) && !(flags & MAP_FIXED) &&
        prot == (PROT_READ | PROT_WRITE)) {
        g_recent[g_recent_next % RECENT_MAPS].p = p;
        g_recent[g_recent_next % RECENT_MAPS].len = len;
        g_recent_next++;
    }
    return p;
}

static void populate_new_section(GC_word heap)
{
    size_t grown = heap > g_heap_seen ? (size_t)(heap - g_heap_seen) : 0;
    g_heap_seen = heap;
    if (grown == 0) return;
    for (unsigned i = 0; i < RECENT_MAPS; i++) {
        if (g_recent[i].len != grown || !GC_is_heap_ptr(g_recent[i].p)) continue;
        (void)madvise(g_recent[i].p, grown < POPULATE_MAX ? grown : POPULATE_MAX,
                      MADV_POPULATE_WRITE);
        g_recent[i].len = 0;
        return;
    }
}

/* Collections are scheduled after 1/divisor of the heap is allocated, so a
 * heap is up to that much garbage: fine while it is small, but near the
 * budget it would end the evaluation where CPython (which frees garbage at
 * once) completes. Past a quarter of the budget, collect twice as often
 * (a list of 10^7 fresh ints: heap 484 -> 436 MiB). */
static void on_heap_resize(GC_word heap)
{
    populate_new_section(heap);
    GC_set_free_space_divisor(heap > g_budget / 4 ? 6 : 3);
}

/* Free pointer-free blocks by 16-byte granules (v_alloc_bytes), as
 * vctx.spare holds blocks with pointers. The collector does not trace a
 * pointer-free block, so it would not see a list linked through them and
 * would reclaim the blocks under it: the lists are dropped when a
 * collection starts, and their blocks reclaimed as any garbage. */
static void *g_atomic_spare[VGRANULES];
#define ATOMIC_EXACT_MIN 384

static void on_collection(GC_EventType e)
{
    if (e == GC_EVENT_START) memset(g_atomic_spare, 0, sizeof g_atomic_spare);
}

/* The main program's data and bss, from the linker: every static value
 * pointer lives there (non-const statics), and nothing below it does. */
extern char __data_start[], _end[];

static void gc_init_once(void)
{
    static int done;
    if (done) return;
    done = 1;
    /* The collector's own root search costs every exec'd child more than
     * its evaluation: it probes page by page from the end of the data down
     * to the first unmapped page, which in the sandbox's static image is
     * the image's base, so the roots scanned at every collection (the one
     * at start-up included) were the whole 2.8 MB image (code, the unicode
     * tables) rather than its 300 KB of data and bss. So: no search
     * (no_dls: no loaded object's data is registered; shared libraries
     * hold no value pointers, as malloc'd memory holds none unregistered)
     * and the data and bss registered explicitly. The start-up collection
     * stays (an empty heap: cheap now): before its first collection the
     * collector collects at every heap expansion, so without it each
     * zygote-forked child would collect during its warm-up. */
    GC_set_no_dls(1);
    GC_INIT();
    GC_add_roots(__data_start, _end);
    GC_set_warn_proc(GC_ignore_warn_proc);
    g_heap_seen = GC_get_heap_size();
    GC_set_on_heap_resize(on_heap_resize);
    GC_set_on_collection_event(on_collection);
    /* A small heap is collected every few hundred kilobytes of allocation
     * (sum(range(10**7)): 2636 collections); GC_MIN_BYTES_BETWEEN makes
     * them rarer. A bigger heap is collected after a share of its live
     * pointer-holding bytes is allocated (the collector's own figure, with
     * the free-space divisor), so the minimum matters only while the live
     * heap is small. Each evaluation runs in a fresh child, and a session
     * evaluator allocates a few MB (bench_lang's: 1.5-3.2 MB over 20,000
     * events): under 4 MiB most finish without a collection. 1 MiB held a
     * quarter of the garbage (sum([len(str(i)) for i in range(10**5)]):
     * peak 5.3 -> 2.2 MiB) and was faster for a loop of pure garbage,
     * whose freed memory is reused while in cache, but gave those
     * evaluators one or two collections each of the live session values
     * (~1 ms); 8 MiB costs the same CPU as 4 and holds more garbage. The
     * heap grows only as it is used (an up-front heap would be populated in
     * every child by the jail's warm-up). A larger free-space divisor
     * (collecting a big heap more often) costs 10-25 % CPU where the heap
     * is mostly live (len([str(i) for i in range(10**6)])) for less garbage
     * where it is not (sum([len(str(i)) for i in range(10**6)]): 14.6 ->
     * 11.0 MiB). Choosing it by how much the last collection freed did
     * not help: that learns too late, once the heap has grown. */
    GC_set_min_bytes_allocd(GC_MIN_BYTES_BETWEEN);
    /* the descriptor's bitmap: the first word only, whatever the size */
    g_gmp_kind = GC_new_kind(GC_new_free_list(),
                             ((GC_word)1 << (sizeof(GC_word) * 8 - 1)) | GC_DS_BITMAP, 0, 0);
    mp_set_memory_functions(gmp_alloc, gmp_realloc, gmp_free);
    g_value_kind = GC_new_kind(GC_new_free_list(), GC_DS_LENGTH, 1, 1);
    g_uncleared_kind = GC_new_kind(GC_new_free_list(), GC_DS_LENGTH, 1, 0);
}

vctx *vctx_new(const vlimits *limits, const void *img, size_t img_len)
{
    gc_init_once();
    if (vi_shared_init()) return NULL;
    if (!siphash_seeded()) siphash_seed(); /* before any jail, see lang_hash_seed */
    vctx *c = GC_MALLOC_UNCOLLECTABLE(sizeof *c);
    if (c == NULL) return NULL;
    memset(c, 0, sizeof *c);
    vlimits d = {VLIMIT_STEPS, VLIMIT_ALLOC_BYTES, VLIMIT_STR_BYTES, VLIMIT_ITEMS, 0};
    if (limits) {
        if (limits->max_steps) d.max_steps = limits->max_steps;
        if (limits->max_alloc_bytes) d.max_alloc_bytes = limits->max_alloc_bytes;
        /* a str's length is 32 bits (struct val): no larger cap */
        if (limits->max_str_bytes && limits->max_str_bytes < VLIMIT_STR_BYTES)
            d.max_str_bytes = limits->max_str_bytes;
        if (limits->max_items) d.max_items = limits->max_items;
        if (limits->max_int_bits) d.max_int_bits = limits->max_int_bits;
    }
    /* One int may take a sixteenth of the budget: GMP's temporaries for an
     * operation are a few times its operands, and GMP cannot fail an
     * allocation, so bigger results are refused before they are computed. */
    if (!d.max_int_bits) d.max_int_bits = d.max_alloc_bytes / 2;
    if (d.max_int_bits < VLIMIT_INT_BITS_MIN) d.max_int_bits = VLIMIT_INT_BITS_MIN;
    c->lim = d;
    c->hot.max_steps = d.max_steps;
    c->img = img;
    c->img_len = img_len;
    GC_set_max_heap_size(d.max_alloc_bytes);
    g_budget = d.max_alloc_bytes;
    on_heap_resize(GC_get_heap_size());
    return c;
}

void vi_recycle(void)
{
    memset(g_atomic_spare, 0, sizeof g_atomic_spare);
    GC_gcollect();
}

size_t vi_heap_bytes(void)
{
    return GC_get_heap_size();
}

void vctx_free(vctx *c)
{
    if (c == NULL) return;
    GC_FREE(c->roots);
    GC_FREE(c);
}

size_t v_live_bytes(void)
{
    return GC_get_memory_use();
}

uint64_t v_total_alloc_bytes(void)
{
    return g_allocated;
}

/* Up to here (in bytes, whole granules) a block comes from a shared heap
 * block of same-sized blocks (the collector's small objects); above, from
 * whole heap blocks of its own. */
#define SMALL_MAX ((size_t)(VGRANULES - 1) * 16)

/* Not inlined: v_new allocates a value shorter than struct val (v_val_size),
 * which the compiler would otherwise flag at every field store. */
__attribute__((noinline)) void *v_alloc(vctx *c, size_t size)
{
    if (size <= SMALL_MAX) {
        /* Small blocks (values, argument arrays, item arrays) come from
         * per-granule lists the collector fills a heap block at a time
         * (GC_generic_malloc_many): most allocations are a pop, nearly as
         * cheap as a bump allocator, and the size is exact (GC_MALLOC
         * rounds a size between 512 and 2032 bytes up to its size class,
         * 800 -> 1024). The collector hands them out cleared but for the
         * link word (it clears what it sweeps, frees or takes fresh for
         * this kind). */
        size_t g = size ? (size + 15) / 16 : 1;
        void *p = c->spare[g];
        if (p == NULL) {
            GC_generic_malloc_many(g * 16, (int)g_value_kind, &c->spare[g]);
            if ((p = c->spare[g]) == NULL) {
                v_limit(c, "memory");
                return NULL;
            }
        }
        c->spare[g] = GC_NEXT(p);
        GC_NEXT(p) = NULL;
        g_allocated += g * 16;
        return p;
    }
    if (size > c->lim.max_alloc_bytes) {
        v_limit(c, "memory");
        return NULL;
    }
    g_allocated += size;
    void *p = GC_generic_malloc(gc_request(size), (int)g_value_kind);
    if (p == NULL) v_limit(c, "memory");
    return p;
}

void *v_alloc_bytes(vctx *c, size_t size)
{
    char *p;
    if (size > ATOMIC_EXACT_MIN && size <= SMALL_MAX) {
        /* As v_alloc's small blocks, from per-granule lists (GC_MALLOC_ATOMIC
         * rounds 400 bytes up to 448, 1360 to 2048), but shared and dropped
         * at every collection (on_collection). Below ATOMIC_EXACT_MIN its
         * rounding is small and its own lists are faster: refilling ours
         * after every collection made bench_lang's dict_build 1.0 -> 3.0 ms
         * in-process. */
        size_t g = (size + 15) / 16;
        if (g_atomic_spare[g] == NULL)
            GC_generic_malloc_many(g * 16, GC_I_PTRFREE, &g_atomic_spare[g]);
        if ((p = g_atomic_spare[g]) == NULL) {
            v_limit(c, "memory");
            return NULL;
        }
        g_atomic_spare[g] = GC_NEXT(p);
        p[size - 1] = 0;
        g_allocated += g * 16;
        return p;
    }
    if (size > c->lim.max_alloc_bytes) {
        v_limit(c, "memory");
        return NULL;
    }
    g_allocated += size;
    p = GC_MALLOC_ATOMIC(gc_request(size));
    if (p == NULL) {
        v_limit(c, "memory");
        return NULL;
    }
    if (size) p[size - 1] = 0;
    return p;
}

/* Gives a block back at once, when it has a heap block of its own (above
 * SMALL_MAX). A small block is left to the collector, which reclaims it
 * once unreachable: it came from a list GC_generic_malloc_many filled, and
 * freeing one explicitly corrupted the collector's heap in a process that
 * evaluates again (a set's first table, freed when the set grew, then a
 * later evaluation's collection crashed in the marker). */
void v_free(void *p)
{
    if (p != NULL && GC_base(p) == p && GC_size(p) > SMALL_MAX) GC_FREE(p);
}

void *v_realloc(vctx *c, void *p, size_t size)
{
    if (size > c->lim.max_alloc_bytes) {
        v_limit(c, "memory");
        return NULL;
    }
    g_allocated += size;
    void *q = GC_REALLOC(p, size ? size : 1);
    if (q == NULL) v_limit(c, "memory");
    return q;
}

int v_root(vctx *c, val *v)
{
    if (c->nroots == c->caproots) {
        size_t nc = c->caproots ? c->caproots * 2 : 16;
        val **n = v_realloc(c, c->roots, nc * sizeof *n);
        if (n == NULL) return -1;
        c->roots = n;
        c->caproots = nc;
    }
    c->roots[c->nroots++] = v;
    return 0;
}

/* A list whose length is not known in advance grows outside the collected
 * heap (registered as a root while it lives, once it holds a value pointer:
 * the collector scans every root at every collection and lets more garbage
 * pile up between collections the larger its roots are, so a growing list
 * of tagged ints is no root at all; sum([len(w) for ... in split()]) over
 * the 25 MiB session: heap 31 -> 23 MiB, 10 % less CPU): growing a block inside the
 * heap leaves every outgrown block behind as fragmentation (an 80 MB list
 * cost 330-480 MB of heap). Up to BUILD_MAP_BYTES the array is malloc'd; a
 * bigger one is its own mapping, grown by mremap (no copy, and nothing left
 * behind: the jail's malloc keeps freed memory resident, so the malloc'd
 * stage stays small). v_build_list then copies it into the list's
 * exact-size array, which comes uncleared from the collector (its fresh
 * pages untouched until written), unmapping each copied part of the
 * builder as it goes (a 256th of it, at least BUILD_MOVE_MIN): the list
 * exists about once, not twice, at the peak (500,000 items: 1 MiB parts
 * and a 1 MiB malloc'd stage had added 2 MiB to the list's 3.8). */
#define BUILD_MAP_BYTES ((size_t)64 << 10)
#define BUILD_MOVE_MIN ((size_t)64 << 10)
#define BUILD_MOVE_PARTS 256

int v_build_presize(vctx *c, vbuild *b, size_t n)
{
    b->v = v_items_alloc(c, n);
    if (b->v == NULL) return -1;
    b->cap = n ? n : 1;
    b->in_heap = true;
    return 0;
}

static size_t page_up(size_t n)
{
    return (n + 4095) & ~(size_t)4095;
}

/* Resizes the out-of-heap array to `cap` items (more than b->n). */
static int build_resize(vctx *c, vbuild *b, size_t cap)
{
    size_t bytes = cap * sizeof(val *);
    val **nv;
    bool map = bytes > BUILD_MAP_BYTES;
    if (map) bytes = page_up(bytes);
    if (b->v != NULL && !b->in_heap && b->rooted) GC_remove_roots(b->v, b->v + b->cap);
    if (map && b->mapped) {
        void *p = mremap(b->v, page_up(b->cap * sizeof(val *)), bytes, MREMAP_MAYMOVE);
        nv = p == MAP_FAILED ? NULL : p;
    } else if (map) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        nv = p == MAP_FAILED ? NULL : p;
        if (nv != NULL) memcpy(nv, b->v, b->n * sizeof *nv);
    } else {
        nv = b->in_heap ? malloc(bytes) : realloc(b->v, bytes);
        if (nv != NULL && b->in_heap) memcpy(nv, b->v, b->n * sizeof *nv);
    }
    if (nv == NULL) {
        if (b->v != NULL && !b->in_heap && b->rooted) GC_add_roots(b->v, b->v + b->cap);
        v_limit(c, "memory");
        return -1;
    }
    if (b->in_heap)
        v_free(b->v); /* only the builder referenced it */
    else if (map && !b->mapped)
        free(b->v);
    b->v = nv;
    b->cap = map ? bytes / sizeof(val *) : cap;
    b->in_heap = false;
    b->mapped = map;
    for (size_t i = 0; i < b->n && !b->rooted; i++) /* from the heap's 16-slot start */
        b->rooted = !v_is_tagged(b->v[i]);
    if (b->rooted) GC_add_roots(b->v, b->v + b->cap);
    return 0;
}

int v_build_push(vctx *c, vbuild *b, val *x)
{
    /* Small lists (most splits and filtered comprehensions) stay in a
     * 16-slot array in the heap: no malloc, no root registration. */
    if (b->v == NULL && v_build_presize(c, b, 16)) return -1;
    if (b->n == b->cap) {
        /* CPython's list growth (about 1/8 over the need) past the first
         * doubling; a mapping grows by at least a quarter (fewer mremaps) */
        size_t nc = b->in_heap ? b->cap * 2 : b->cap + (b->cap >> 3) + (b->cap < 9 ? 3 : 6) + 1;
        if (b->mapped) nc = b->cap + (b->cap >> 2);
        if (v_check_items(c, nc) || build_resize(c, b, nc)) return -1;
    }
    b->v[b->n++] = x;
    if (!b->in_heap && !b->rooted && !v_is_tagged(x)) {
        b->rooted = true;
        GC_add_roots(b->v, b->v + b->cap);
    }
    return 0;
}

void v_build_free(vbuild *b)
{
    if (b->v && !b->in_heap) {
        if (b->rooted) GC_remove_roots(b->v, b->v + b->cap);
        if (b->mapped)
            munmap(b->v, b->cap * sizeof(val *));
        else
            free(b->v);
    }
    memset(b, 0, sizeof *b);
}

/* Copies a mapped builder's items into `arr`, unmapping each copied part
 * of the builder (whole pages) so the two never both hold the whole list.
 * The builder is no longer a root: `arr` holds what it held. */
static void build_move_out(vbuild *b, val **arr)
{
    if (b->rooted) GC_remove_roots(b->v, b->v + b->cap);
    size_t step =
        page_up(b->n * sizeof(val *) / BUILD_MOVE_PARTS) / sizeof(val *); /* whole pages */
    if (step < BUILD_MOVE_MIN / sizeof(val *)) step = BUILD_MOVE_MIN / sizeof(val *);
    size_t done = 0;
    while (b->n - done > step) {
        memcpy(arr + done, b->v + done, step * sizeof *arr);
        munmap(b->v + done, step * sizeof *arr);
        done += step;
    }
    memcpy(arr + done, b->v + done, (b->n - done) * sizeof *arr);
    munmap(b->v + done, (b->cap - done) * sizeof *arr);
    memset(b, 0, sizeof *b);
}

val *v_build_list(vctx *c, vbuild *b)
{
    if (b->in_heap && b->n == b->cap) {
        val *r = v_list_take(c, b->v, b->n);
        memset(b, 0, sizeof *b);
        return r;
    }
    if (!b->mapped) {
        val *r = v_list(c, b->v, b->n);
        v_build_free(b);
        return r;
    }
    val *r = v_check_items(c, b->n) ? NULL : v_new(c, VT_LIST);
    if (r != NULL) g_allocated += b->n * sizeof(val *);
    val **arr = r == NULL
                    ? NULL
                    : GC_generic_malloc(gc_request(b->n * sizeof(val *)), (int)g_uncleared_kind);
    if (arr == NULL) {
        v_build_free(b);
        return v_limit(c, "memory");
    }
    /* The block's tail past the items (granule rounding) is scanned too. */
    size_t tail = GC_size(arr) - b->n * sizeof(val *);
    memset(arr + b->n, 0, tail);
    r->u.seq.items = arr;
    r->u.seq.len = b->n;
    build_move_out(b, arr);
    return r;
}

char *v_strdup(vctx *c, const char *s, size_t len)
{
    if (len == SIZE_MAX) {
        v_limit(c, "memory");
        return NULL;
    }
    char *p = v_alloc_bytes(c, len + 1);
    if (p == NULL) return NULL;
    memcpy(p, s, len);
    p[len] = 0;
    return p;
}

mpz_ptr vi_mpz_new(vctx *c)
{
    mpz_ptr z = v_alloc(c, sizeof *z);
    if (z) mpz_init(z);
    return z;
}

int v_check_items(vctx *c, size_t n)
{
    if (n > c->lim.max_items) {
        v_limit(c, "memory");
        return -1;
    }
    return 0;
}

int v_check_strlen(vctx *c, size_t blen)
{
    if (blen > c->lim.max_str_bytes) {
        v_limit(c, "memory");
        return -1;
    }
    return 0;
}

val **v_items_alloc(vctx *c, size_t n)
{
    if (v_check_items(c, n)) return NULL;
    return v_alloc(c, (n ? n : 1) * sizeof(val *));
}

val **v_items_alloc_filled(vctx *c, size_t n)
{
    if (v_check_items(c, n)) return NULL;
    size_t size = (n ? n : 1) * sizeof(val *);
    if (size > c->lim.max_alloc_bytes) {
        v_limit(c, "memory");
        return NULL;
    }
    if (size <= SMALL_MAX) return v_alloc(c, size);
    g_allocated += size;
    val **p = GC_generic_malloc(gc_request(size), (int)g_uncleared_kind);
    if (p == NULL) v_limit(c, "memory");
    return p;
}
