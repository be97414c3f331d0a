/* emulator/state: the emulator's world: assignments indexed by id, the queue
 * of available ones, a min-heap of lease expiries (so a claim never scans),
 * runs indexed by id, counts per status, and fencing. One mutex (e->mu)
 * guards all of it; functions here expect the caller to hold it unless
 * their comment says otherwise. */
#include "common/ids.h"
#include "common/timeutil.h"
#include "emulator/emu_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- hash map (FNV-1a, linear probing, never shrinks) ---- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

void emu_map_init(emu_map *m)
{
    memset(m, 0, sizeof *m);
}

void emu_map_free(emu_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

void *emu_map_get(const emu_map *m, const char *key)
{
    if (m->cap == 0) return NULL;
    for (size_t i = hash_str(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == NULL) return NULL;
        if (!strcmp(m->keys[i], key)) return m->vals[i];
    }
}

static void map_grow(emu_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 1024;
    const char **keys = calloc(ncap, sizeof *keys);
    void **vals = calloc(ncap, sizeof *vals);
    if (keys == NULL || vals == NULL) abort(); /* the emulator cannot run without memory */
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == NULL) continue;
        size_t j = hash_str(m->keys[i]) & (ncap - 1);
        while (keys[j] != NULL)
            j = (j + 1) & (ncap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = ncap;
}

void emu_map_put(emu_map *m, const char *key, void *val)
{
    if ((m->len + 1) * 2 > m->cap) map_grow(m);
    size_t i = hash_str(key) & (m->cap - 1);
    while (m->keys[i] != NULL) {
        if (!strcmp(m->keys[i], key)) {
            m->vals[i] = val;
            return;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->len++;
}

/* ---- lifecycle ---- */

int emu_state_init(emulator *e)
{
    if (pthread_mutex_init(&e->mu, NULL) != 0) return -1;
    emu_map_init(&e->assignments_by_id);
    emu_map_init(&e->runs_by_id);
    return 0;
}

void emu_state_free(emulator *e)
{
    for (size_t i = 0; i < e->nassignments; i++) {
        emu_assignment *a = e->assignments[i];
        json_decref(a->session);
        free(a->transcript);
        json_decref(a->definitions);
        json_decref(a->sources);
        free(a->runs);
        free(a);
    }
    for (size_t i = 0; i < e->nruns; i++) {
        emu_run *run = e->runs[i];
        json_decref(run->wire);
        free(run->submission_id);
        free(run->body);
        free(run);
    }
    free(e->assignments);
    free(e->runs);
    free(e->committed);
    free(e->heap);
    emu_map_free(&e->assignments_by_id);
    emu_map_free(&e->runs_by_id);
    pthread_mutex_destroy(&e->mu);
}

const char *emu_status_name(emu_as_status s)
{
    static const char *names[] = {"available", "leased", "planned", "completed", "skipped", "dead"};
    return s < AS_NSTATUS ? names[s] : "unknown";
}

void emu_state_set_status(emulator *e, emu_assignment *a, emu_as_status s)
{
    e->status_count[a->status]--;
    a->status = s;
    e->status_count[s]++;
}

/* ---- available queue ---- */

static void queue_push(emulator *e, emu_assignment *a, int front)
{
    if (a->queued) return;
    a->queued = 1;
    a->next = NULL;
    if (e->avail_head == NULL) {
        e->avail_head = e->avail_tail = a;
    } else if (front) {
        a->next = e->avail_head;
        e->avail_head = a;
    } else {
        e->avail_tail->next = a;
        e->avail_tail = a;
    }
}

emu_assignment *emu_state_pop_available(emulator *e)
{
    while (e->avail_head != NULL) {
        emu_assignment *a = e->avail_head;
        e->avail_head = a->next;
        if (e->avail_head == NULL) e->avail_tail = NULL;
        a->queued = 0;
        a->next = NULL;
        if (a->status == AS_AVAILABLE) return a;
    }
    return NULL;
}

emu_assignment *emu_state_add_assignment(emulator *e, json_t *session, char *transcript,
                                         size_t transcript_len, long event_count)
{
    emu_assignment *a = calloc(1, sizeof *a);
    if (a == NULL) abort();
    /* The id is chosen by the caller (it is inside the transcript). */
    const char *id = json_string_value(json_object_get(session, "assignment_id"));
    snprintf(a->id, sizeof a->id, "%s", id ? id : "");
    a->session = session;
    a->transcript = transcript;
    a->transcript_len = transcript_len;
    a->event_count = event_count;
    a->status = AS_AVAILABLE;
    pthread_mutex_lock(&e->mu);
    if (e->nassignments == e->capassignments) {
        size_t ncap = e->capassignments ? e->capassignments * 2 : 256;
        emu_assignment **p = realloc(e->assignments, ncap * sizeof *p);
        if (p == NULL) abort();
        e->assignments = p;
        e->capassignments = ncap;
    }
    e->assignments[e->nassignments++] = a;
    emu_map_put(&e->assignments_by_id, a->id, a);
    e->status_count[AS_AVAILABLE]++;
    queue_push(e, a, 0);
    pthread_mutex_unlock(&e->mu);
    return a;
}

emu_run *emu_state_add_run(emulator *e, emu_assignment *a, json_t *wire)
{
    emu_run *run = calloc(1, sizeof *run);
    if (run == NULL) abort();
    ids_uuid(run->id);
    json_object_set_new(wire, "evaluation_run_id", json_string(run->id));
    run->a = a;
    run->wire = wire;
    run->eval_key = json_string_value(json_object_get(wire, "eval_key"));
    run->eval_version = json_string_value(json_object_get(wire, "eval_version"));
    if (e->nruns == e->capruns) {
        size_t ncap = e->capruns ? e->capruns * 2 : 256;
        emu_run **p = realloc(e->runs, ncap * sizeof *p);
        emu_run **c = realloc(e->committed, ncap * sizeof *c);
        if (p == NULL || c == NULL) abort();
        e->runs = p;
        e->committed = c;
        e->capruns = ncap;
    }
    e->runs[e->nruns++] = run;
    emu_map_put(&e->runs_by_id, run->id, run);
    emu_run **ar = realloc(a->runs, (a->nruns + 1) * sizeof *ar);
    if (ar == NULL) abort();
    a->runs = ar;
    a->runs[a->nruns++] = run;
    e->pending_runs++;
    return run;
}

/* ---- lease expiry heap ---- */

static void heap_swap(emu_heap_item *h, size_t i, size_t j)
{
    emu_heap_item t = h[i];
    h[i] = h[j];
    h[j] = t;
}

void emu_state_heap_push(emulator *e, emu_assignment *a)
{
    if (e->heap_len == e->heap_cap) {
        size_t ncap = e->heap_cap ? e->heap_cap * 2 : 256;
        emu_heap_item *h = realloc(e->heap, ncap * sizeof *h);
        if (h == NULL) abort();
        e->heap = h;
        e->heap_cap = ncap;
    }
    size_t i = e->heap_len++;
    e->heap[i] = (emu_heap_item){a->lease_expires, a, a->generation};
    while (i > 0 && e->heap[(i - 1) / 2].expires > e->heap[i].expires) {
        heap_swap(e->heap, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static emu_heap_item heap_pop(emulator *e)
{
    emu_heap_item top = e->heap[0];
    e->heap[0] = e->heap[--e->heap_len];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->heap_len && e->heap[l].expires < e->heap[m].expires) m = l;
        if (r < e->heap_len && e->heap[r].expires < e->heap[m].expires) m = r;
        if (m == i) break;
        heap_swap(e->heap, i, m);
        i = m;
    }
    return top;
}

/* A lease ended without completing: back to the queue (front: it is the
 * oldest work), or dead once it has used its attempts. */
static void lease_ended(emulator *e, emu_assignment *a)
{
    atomic_fetch_add(&e->stats.lease_expirations, 1);
    if (a->attempts >= e->max_attempts) {
        emu_state_set_status(e, a, AS_DEAD);
    } else {
        emu_state_set_status(e, a, AS_AVAILABLE);
        queue_push(e, a, 1);
    }
}

void emu_state_sweep(emulator *e, double now)
{
    while (e->heap_len > 0 && e->heap[0].expires <= now) {
        emu_heap_item it = heap_pop(e);
        emu_assignment *a = it.a;
        /* Stale entries: renewed since, reclaimed, or finished. */
        if (it.generation != a->generation || it.expires != a->lease_expires) continue;
        if (a->status != AS_LEASED && a->status != AS_PLANNED) continue;
        lease_ended(e, a);
    }
}

void emu_state_expire(emulator *e, emu_assignment *a, double now)
{
    if (a->status != AS_LEASED && a->status != AS_PLANNED) return;
    a->lease_expires = now; /* heap entries for the old expiry are now stale */
    lease_ended(e, a);
}

int emu_fence(emu_req *r, emu_assignment *a, const char *worker_id, long generation,
              int allow_terminal)
{
    emulator *e = r->e;
    double now = time_now();
    int live = a->status == AS_LEASED || a->status == AS_PLANNED;
    int terminal = a->status == AS_COMPLETED || a->status == AS_SKIPPED;
    int owner =
        !strcmp(a->worker_id, worker_id) && a->generation == generation && a->instance == r->inst;
    if (owner && live && a->lease_expires <= now) {
        emu_state_expire(e, a, now);
        live = 0;
    }
    double ploss = atomic_load(&e->fault_lease_loss);
    if (owner && live && ploss > 0 && emu_roll(e) < ploss) {
        atomic_fetch_add(&e->stats.faults_lease_loss, 1);
        emu_state_expire(e, a, now);
        live = 0;
    }
    if (owner && (live || (terminal && allow_terminal))) return 0;
    atomic_fetch_add(&e->stats.lease_losses, 1);
    emu_reply_error(r, "lease_lost", "The assignment lease is no longer owned by this worker.");
    return -1;
}
