/* hetsched scheduling policy for StarPU 1.3: contention-aware placement.
 *
 * For every ready task and every worker that can run it, the policy takes
 * StarPU's own expected length for that worker's architecture
 * (starpu_task_expected_length with the task's perfmodel) and turns it into
 * a predicted turnaround with hetsched's view of the machine: the unit the
 * worker stands for (a CPU kind, or the device the daemon arbitrates) is
 * shared with other processes, and the daemon's pages say how much of it
 * this process can expect:
 *     turnaround = (work of ours ahead + length) x 100 / utilisation
 *                  + dispatch + transfer                  (Rinnegan §3.2)
 * computed by hetsched's one placement formula (hetsched_core::turnaround::
 * turnaround) through hs_client_turnaround; only StarPU's transfer
 * estimate is added here.
 * Tasks wait undecided in a central queue and are placed late, when the
 * worker predicted to finish them soonest has room (a short horizon of
 * queued work), so decisions use fresh views. When that worker is full, an
 * idle worker takes the task only if it would finish it before the best
 * worker got through everything waiting: a long queue spreads over units,
 * a short one waits for the fast unit. Tasks whose length is unknown (no
 * perfmodel, or a history model not calibrated yet) go to a shared queue
 * that any able worker takes from, as eager does, so the model calibrates.
 *
 * On a device worker mapped to a gated unit (a non-emulated device, or any
 * device with HETSCHED_STARPU_GATE=1), every task waits for the daemon's
 * dispatch gate before it runs and reports its completion after, so the
 * daemon arbitrates the device between processes and accounts shares.
 *
 * Environment: HETSCHED_SOCKET (daemon socket), HETSCHED_STARPU_DEVICE
 * (unit name or kind the device workers stand for; default: the first
 * non-CPU unit; a comma-separated list maps device workers by StarPU
 * device number, the N-th entry for device N and the last one for any
 * beyond, so that two OpenCL devices of different speed stand for two
 * different units), HETSCHED_STARPU_GATE (0/1, see above),
 * HETSCHED_STARPU_HORIZON_US (predicted work, stretched by contention, a
 * worker may hold queued before further tasks wait undecided; default
 * 10000), HETSCHED_STARPU_QUEUE (most tasks a worker may hold, default 64),
 * HETSCHED_STARPU_NAME (client name, default starpu:<program>),
 * HETSCHED_STARPU_VERBOSE=1 (per-worker counts at shutdown; 2: also
 * sampled predictions). */
#include "hetsched_starpu.h"

#include <hetsched.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HS_MAX_DEVICE_UNITS 16

/* A task waiting in one of our queues, with the length it was placed with. */
struct hs_node {
    struct starpu_task *task;
    double expected_us;
    struct hs_node *next;
};

struct hs_queue {
    struct hs_node *head, *tail;
    unsigned n;
};

/* Per StarPU worker. */
struct hs_worker {
    int present;
    int unit;            /* daemon unit index, -1: none */
    int gated;           /* wait for the daemon's gate before each task */
    struct hs_queue q;   /* tasks placed on this worker */
    double backlog_us;   /* their expected lengths */
    double run_expected_us, run_started; /* the task it runs now */
    /* Set on the worker's own thread between pre- and post-exec. */
    int holding;
    HsGrant grant;
    double started;
    unsigned long placed, ran, gate_errors;
};

struct hs_policy {
    pthread_mutex_t lock;
    struct hs_queue central; /* tasks not placed yet, oldest first */
    struct hs_queue shared;  /* tasks of unknown length: eager fallback */
    unsigned queue_max;      /* tasks a worker may hold beyond the one it runs */
    double horizon_us;       /* predicted work a worker may hold ahead */
    struct hs_worker w[STARPU_NMAXWORKERS];
    HsClient client;
    int connected;
    int cpu_unit, device_unit;
    /* HETSCHED_STARPU_DEVICE's units, by StarPU device number. */
    int device_units[HS_MAX_DEVICE_UNITS];
    unsigned ndevice_units;
    int verbose;
    unsigned long fallback_pushes, model_pushes;
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void q_push(struct hs_queue *q, struct hs_node *n) {
    n->next = NULL;
    if (q->tail) q->tail->next = n;
    else q->head = n;
    q->tail = n;
    /* Atomic only for queue_empty's unlocked read; the lock orders the rest. */
    __atomic_store_n(&q->n, q->n + 1, __ATOMIC_RELAXED);
}

/* Removes and returns the first node whose task `worker` can run. */
static struct hs_node *q_take(struct hs_queue *q, int worker, int check) {
    struct hs_node *prev = NULL;
    for (struct hs_node *n = q->head; n; prev = n, n = n->next) {
        if (check && !starpu_worker_can_execute_task_first_impl(worker, n->task, NULL)) continue;
        if (prev) prev->next = n->next;
        else q->head = n->next;
        if (q->tail == n) q->tail = prev;
        __atomic_store_n(&q->n, q->n - 1, __ATOMIC_RELAXED);
        return n;
    }
    return NULL;
}

/* An unlocked look, for idle workers' polling: a stale answer costs one
 * more poll (a task placed meanwhile also wakes its worker). */
static int queue_empty(const struct hs_queue *q) { return __atomic_load_n(&q->n, __ATOMIC_RELAXED) == 0; }

static int env_flag(const char *name, int dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    return strcmp(v, "0") != 0 && strcmp(v, "no") != 0 && strcmp(v, "false") != 0;
}

static const char *program_name(char *buf, size_t len) {
    const char *n = getenv("HETSCHED_STARPU_NAME");
    if (n && *n) return n;
    FILE *f = fopen("/proc/self/comm", "r");
    if (f) {
        if (fgets(buf, (int)len, f)) buf[strcspn(buf, "\n")] = 0;
        fclose(f);
        if (buf[0]) return buf;
    }
    return "starpu-app";
}

static void connect_daemon(struct hs_policy *p) {
    p->cpu_unit = p->device_unit = -1;
    char comm[64] = {0}, name[96];
    snprintf(name, sizeof name, "starpu:%s", program_name(comm, sizeof comm));
    HsStatus st = hs_client_connect(name, getenv("HETSCHED_SOCKET"), &p->client);
    if (st != HS_OK) {
        fprintf(stderr,
                "hetsched-starpu: no daemon (%s); placing with this process's own load only\n",
                hs_last_error());
        return;
    }
    p->connected = 1;
    uint32_t n = 0;
    hs_client_unit_count(p->client, &n);
    const char *want = getenv("HETSCHED_STARPU_DEVICE");
    if (want && *want) {
        char list[512], *save = NULL;
        snprintf(list, sizeof list, "%s", want);
        for (char *name = strtok_r(list, ",", &save);
             name && p->ndevice_units < HS_MAX_DEVICE_UNITS; name = strtok_r(NULL, ",", &save)) {
            uint32_t idx;
            if (hs_client_find_unit(p->client, name, &idx) == HS_OK) {
                p->device_units[p->ndevice_units++] = (int)idx;
            } else {
                /* A device number keeps its place in the list: -1, no unit. */
                fprintf(stderr, "hetsched-starpu: HETSCHED_STARPU_DEVICE: %s\n", hs_last_error());
                p->device_units[p->ndevice_units++] = -1;
            }
        }
        if (p->ndevice_units > 0) p->device_unit = p->device_units[0];
    }
    for (uint32_t i = 0; i < n; i++) {
        HsUnitInfo info;
        if (hs_client_unit_info(p->client, i, &info) != HS_OK) continue;
        if (info.is_cpu && p->cpu_unit < 0) p->cpu_unit = (int)i;
        if (!info.is_cpu && p->device_unit < 0 && !(want && *want)) p->device_unit = (int)i;
    }
}

static void hs_init(unsigned ctx) {
    struct hs_policy *p = calloc(1, sizeof *p);
    if (!p) {
        fprintf(stderr, "hetsched-starpu: out of memory\n");
        abort();
    }
    pthread_mutex_init(&p->lock, NULL);
    const char *vb = getenv("HETSCHED_STARPU_VERBOSE");
    p->verbose = vb ? atoi(vb) : 0;
    const char *qm = getenv("HETSCHED_STARPU_QUEUE");
    p->queue_max = qm && atoi(qm) > 0 ? (unsigned)atoi(qm) : 64;
    const char *hz = getenv("HETSCHED_STARPU_HORIZON_US");
    p->horizon_us = hz && atof(hz) > 0 ? atof(hz) : 10000.0;
    connect_daemon(p);
    starpu_sched_ctx_create_worker_collection(ctx, STARPU_WORKER_LIST);
    starpu_sched_ctx_set_policy_data(ctx, p);
}

static void hs_deinit(unsigned ctx) {
    struct hs_policy *p = starpu_sched_ctx_get_policy_data(ctx);
    if (p->verbose) {
        fprintf(stderr, "hetsched-starpu: %lu tasks placed by model, %lu by eager fallback\n",
                p->model_pushes, p->fallback_pushes);
        for (int i = 0; i < STARPU_NMAXWORKERS; i++) {
            if (!p->w[i].present && !p->w[i].ran) continue;
            char wname[64];
            starpu_worker_get_name(i, wname, sizeof wname);
            HsUnitInfo info = {0};
            if (p->connected && p->w[i].unit >= 0)
                hs_client_unit_info(p->client, (uint32_t)p->w[i].unit, &info);
            fprintf(stderr, "hetsched-starpu: worker %d (%s, unit %d %s%s): placed %lu, ran %lu\n",
                    i, wname, p->w[i].unit, info.name[0] ? info.name : "-",
                    p->w[i].gated ? ", gated" : "", p->w[i].placed, p->w[i].ran);
        }
    }
    if (p->connected) hs_client_close(p->client);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static void hs_add_workers(unsigned ctx, int *ids, unsigned n) {
    struct hs_policy *p = starpu_sched_ctx_get_policy_data(ctx);
    int force_gate = env_flag("HETSCHED_STARPU_GATE", -1);
    pthread_mutex_lock(&p->lock);
    for (unsigned i = 0; i < n; i++) {
        struct hs_worker *w = &p->w[ids[i]];
        w->present = 1;
        if (starpu_worker_get_type(ids[i]) == STARPU_CPU_WORKER) {
            w->unit = p->cpu_unit;
            w->gated = 0;
        } else {
            w->unit = p->device_unit;
            if (p->ndevice_units > 0) {
                int devid = starpu_worker_get_devid(ids[i]);
                unsigned k = devid < 0 ? 0 : (unsigned)devid;
                w->unit = p->device_units[k < p->ndevice_units ? k : p->ndevice_units - 1];
            }
            w->gated = 0;
            if (p->connected && w->unit >= 0) {
                HsUnitInfo info;
                int emulated = hs_client_unit_info(p->client, (uint32_t)w->unit, &info) == HS_OK &&
                               info.emulated;
                /* A device the daemon serves itself is used by the codelets
                 * directly (they submit to it); any other device is gated. */
                w->gated = force_gate >= 0 ? force_gate : !emulated;
            }
        }
    }
    pthread_mutex_unlock(&p->lock);
}

static void hs_remove_workers(unsigned ctx, int *ids, unsigned n) {
    struct hs_policy *p = starpu_sched_ctx_get_policy_data(ctx);
    pthread_mutex_lock(&p->lock);
    for (unsigned i = 0; i < n; i++) {
        struct hs_worker *w = &p->w[ids[i]];
        w->present = 0;
        /* Hand what it still held to the shared queue. */
        struct hs_node *node;
        while ((node = q_take(&w->q, ids[i], 0))) q_push(&p->central, node);
        w->backlog_us = 0;
    }
    pthread_mutex_unlock(&p->lock);
}

/* Predicted turnaround (µs) of `task` on worker `id`, or NaN if its length
 * there is unknown. Called with p->lock held. */
static double predict_us(struct hs_policy *p, struct starpu_task *task, int id, unsigned ctx,
                         unsigned impl, double *ahead_out) {
    if (!task->cl || !task->cl->model) return NAN;
    struct starpu_perfmodel_arch *arch = starpu_worker_get_perf_archtype(id, ctx);
    double len = starpu_task_expected_length(task, arch, impl);
    if (isnan(len) || len < 0) return NAN;
    double xfer = starpu_task_expected_data_transfer_time_for(task, (unsigned)id);
    if (isnan(xfer) || xfer < 0) xfer = 0;
    struct hs_worker *w = &p->w[id];
    /* Work of ours already ahead on this worker: what it queues, and what
     * is left of the task it runs. */
    double running_left = w->run_expected_us - (now_us() - w->run_started);
    if (w->run_expected_us <= 0 || running_left < 0) running_left = 0;
    double ahead_us = w->backlog_us + running_left;
    double exec_us = len;
    if (p->connected && w->unit >= 0 && len > 0) {
        /* Rinnegan's turnaround on the unit the worker stands for, by
         * hetsched's one placement formula (hetsched_core::turnaround::
         * turnaround, through hs_client_turnaround): dispatch + (ahead +
         * length) x stretch, the stretch (100 / utilisation) from the
         * daemon's view (others' queue on a device, runnable threads of
         * every process on the CPU cores). Every task of ours ahead of this
         * one is stretched alike: on a shared unit each waits its turn
         * among the other processes. StarPU's transfer estimate is added
         * below, so no bytes are passed. */
        HsTurnaround t;
        if (hs_client_turnaround(p->client, (uint32_t)w->unit, len * 1e3, 0, 0, 0, ahead_us * 1e3,
                                 &t) == HS_OK) {
            exec_us = (t.turnaround_ns - t.ahead_ns) / 1e3;
            ahead_us = t.ahead_ns / 1e3;
            if (p->verbose > 1 && (p->model_pushes % 200) == 0) {
                HsUnitView v;
                hs_client_unit_view(p->client, (uint32_t)w->unit, &v);
                fprintf(stderr,
                        "hetsched-starpu: worker %d len %.0f us ahead %.0f us stretch %.2f "
                        "(wait %.0f us, runnable %u)\n",
                        id, len, ahead_us, t.stretch, v.wait_ns / 1e3, v.runnable_threads);
            }
        }
    }
    if (ahead_out) *ahead_out = ahead_us;
    return ahead_us + exec_us + xfer;
}

static int dispatch_locked(struct hs_policy *p, unsigned ctx, int *woken) {
    struct starpu_worker_collection *workers = starpu_sched_ctx_get_worker_collection(ctx);
    int nwoken = 0;
    while (p->central.head) {
        struct hs_node *node = p->central.head;
        struct starpu_task *task = node->task;
        int best = -1, unknown = 0, alt = -1;
        double best_t = INFINITY, best_len = 0, best_ahead = 0;
        double t_of[STARPU_NMAXWORKERS], len_of[STARPU_NMAXWORKERS];
        struct starpu_sched_ctx_iterator it;
        workers->init_iterator_for_parallel_tasks(workers, &it, task);
        while (workers->has_next(workers, &it)) {
            int id = workers->get_next(workers, &it);
            unsigned impl;
            t_of[id] = INFINITY;
            if (!p->w[id].present || !starpu_worker_can_execute_task_first_impl(id, task, &impl))
                continue;
            double ahead = 0;
            double t = predict_us(p, task, id, ctx, impl, &ahead);
            if (isnan(t)) {
                unknown = 1;
                break;
            }
            struct starpu_perfmodel_arch *arch = starpu_worker_get_perf_archtype(id, ctx);
            t_of[id] = t;
            len_of[id] = starpu_task_expected_length(task, arch, impl);
            if (t < best_t) {
                best_t = t;
                best = id;
                best_ahead = ahead;
                best_len = len_of[id];
            }
        }
        if (unknown || best < 0) {
            /* Eager fallback: any able worker takes it. */
            q_take(&p->central, -1, 0);
            node->expected_us = 0;
            q_push(&p->shared, node);
            p->fallback_pushes++;
            workers->init_iterator(workers, &it);
            while (workers->has_next(workers, &it)) {
                int id = workers->get_next(workers, &it);
                if (nwoken < STARPU_NMAXWORKERS &&
                    starpu_worker_can_execute_task_first_impl(id, task, NULL))
                    woken[nwoken++] = id;
            }
            continue;
        }
        /* The best worker takes it while what it holds ahead is within the
         * horizon (at least one task). */
        int room = p->w[best].q.n == 0 ||
                   (p->w[best].q.n < p->queue_max && best_ahead < p->horizon_us);
        if (!room) {
            /* The best worker is full. Another worker with nothing queued
             * takes the task if it would finish it before the best worker
             * finished everything waiting here: each waiting task costs the
             * best worker this task's turnaround there (exec stretched by
             * the other processes' use of the unit), so a long queue
             * spreads and a short one waits for the faster unit. */
            double per_task = best_t - best_ahead;
            double drain = best_t + (double)(p->central.n - 1) * per_task;
            double alt_t = INFINITY;
            workers->init_iterator_for_parallel_tasks(workers, &it, task);
            while (workers->has_next(workers, &it)) {
                int id = workers->get_next(workers, &it);
                if (id == best || isinf(t_of[id]) || p->w[id].q.n > 0) continue;
                if (t_of[id] < drain && t_of[id] < alt_t) {
                    alt_t = t_of[id];
                    alt = id;
                }
            }
            if (alt < 0) break;
            best = alt;
            best_len = len_of[alt];
        }
        q_take(&p->central, -1, 0);
        node->expected_us = best_len;
        q_push(&p->w[best].q, node);
        p->w[best].backlog_us += best_len;
        p->w[best].placed++;
        p->model_pushes++;
        if (nwoken < STARPU_NMAXWORKERS) woken[nwoken++] = best;
    }
    return nwoken;
}

static void wake_all(const int *ids, int n, int self) {
    for (int i = 0; i < n; i++)
        if (ids[i] != self) starpu_wake_worker_relax_light(ids[i]);
}

static int hs_push(struct starpu_task *task) {
    unsigned ctx = task->sched_ctx;
    struct hs_policy *p = starpu_sched_ctx_get_policy_data(ctx);
    struct hs_node *node = malloc(sizeof *node);
    if (!node) return -ENOMEM;
    node->task = task;
    node->expected_us = 0;
    int woken[STARPU_NMAXWORKERS];
    pthread_mutex_lock(&p->lock);
    q_push(&p->central, node);
    starpu_push_task_end(task);
    int n = dispatch_locked(p, ctx, woken);
    pthread_mutex_unlock(&p->lock);
    wake_all(woken, n, -1);
    return 0;
}

static struct starpu_task *hs_pop(unsigned ctx) {
    struct hs_policy *p = starpu_sched_ctx_get_policy_data(ctx);
    int id = starpu_worker_get_id_check();
    struct starpu_task *task = NULL;
    int woken[STARPU_NMAXWORKERS];
    /* StarPU 1.3's idle workers poll pop_task in a loop; taking the lock
     * each time would hold up the application's push (by about 1 ms a task
     * on two shared cores). Nothing to take and nothing undecided: no lock. */
    if (queue_empty(&p->w[id].q) && queue_empty(&p->shared) && queue_empty(&p->central))
        return NULL;
    pthread_mutex_lock(&p->lock);
    struct hs_worker *w = &p->w[id];
    struct hs_node *n = q_take(&w->q, id, 0);
    if (n) {
        w->backlog_us -= n->expected_us;
        if (w->backlog_us < 0 || w->q.n == 0) w->backlog_us = 0;
        w->run_expected_us = n->expected_us;
    } else {
        n = q_take(&p->shared, id, 1);
        if (n) w->run_expected_us = 0;
    }
    if (n) w->run_started = now_us();
    /* Room opened on this worker: place what waits (maybe here). */
    int nw = dispatch_locked(p, ctx, woken);
    if (!n) {
        n = q_take(&w->q, id, 0);
        if (n) {
            w->backlog_us -= n->expected_us;
            if (w->backlog_us < 0 || w->q.n == 0) w->backlog_us = 0;
            w->run_expected_us = n->expected_us;
            w->run_started = now_us();
        }
    }
    pthread_mutex_unlock(&p->lock);
    wake_all(woken, nw, id);
    if (n) {
        task = n->task;
        free(n);
    }
    return task;
}

/* On the worker's thread, just before the task runs. */
static void hs_pre_exec(struct starpu_task *task, unsigned ctx) {
    struct hs_policy *p = starpu_sched_ctx_get_policy_data(ctx);
    int id = starpu_worker_get_id();
    if (id < 0) return;
    struct hs_worker *w = &p->w[id];
    w->started = now_us();
    if (!w->gated || !p->connected || w->unit < 0) return;
    double len = NAN;
    if (task->cl && task->cl->model) {
        struct starpu_perfmodel_arch *arch = starpu_worker_get_perf_archtype(id, ctx);
        len = starpu_task_expected_length(task, arch, starpu_task_get_implementation(task));
    }
    uint64_t expected_ns = isnan(len) || len < 0 ? 0 : (uint64_t)(len * 1e3);
    if (hs_client_request_dispatch(p->client, (uint32_t)w->unit, expected_ns, &w->grant) == HS_OK) {
        w->holding = 1;
        w->started = now_us();
    } else {
        w->gate_errors++;
        if (w->gate_errors == 1)
            fprintf(stderr, "hetsched-starpu: dispatch gate failed, running ungated: %s\n",
                    hs_last_error());
    }
}

/* On the worker's thread, just after the task ran: give the slot back
 * with the time it ran, so the daemon accounts this process's share. */
static void hs_post_exec(struct starpu_task *task, unsigned ctx) {
    (void)task;
    struct hs_policy *p = starpu_sched_ctx_get_policy_data(ctx);
    int id = starpu_worker_get_id();
    if (id < 0) return;
    struct hs_worker *w = &p->w[id];
    w->ran++;
    int woken[STARPU_NMAXWORKERS];
    pthread_mutex_lock(&p->lock);
    w->run_expected_us = 0;
    int nw = dispatch_locked(p, ctx, woken);
    pthread_mutex_unlock(&p->lock);
    wake_all(woken, nw, id);
    if (w->holding) {
        double ran_us = now_us() - w->started;
        hs_client_task_completed(p->client, &w->grant, (uint64_t)(ran_us * 1e3));
        w->holding = 0;
    }
}

static struct starpu_sched_policy hetsched_policy = {
    .init_sched = hs_init,
    .deinit_sched = hs_deinit,
    .add_workers = hs_add_workers,
    .remove_workers = hs_remove_workers,
    .push_task = hs_push,
    .pop_task = hs_pop,
    .pre_exec_hook = hs_pre_exec,
    .post_exec_hook = hs_post_exec,
    .policy_name = "hetsched",
    .policy_description = "contention-aware placement by predicted turnaround (hetsched daemon)",
    .worker_type = STARPU_WORKER_LIST,
};

struct starpu_sched_policy *hetsched_starpu_policy(void) { return &hetsched_policy; }
