/* A StarPU application for the contention experiment (bench.sh): TASKS
 * independent tasks of one codelet with two implementations,
 *  - CPU: real work, ITERS_PER_US x CPU_US iterations of an integer hash
 *    (so it takes CPU_US on an idle core and longer when cores are shared);
 *  - device (StarPU's OpenCL workers): work on an emulated GPU the hetsched
 *    daemon serves (hs_client_run_device), shared by every process on the
 *    machine; the worker thread blocks meanwhile. With several OpenCL
 *    devices (-unit U0,U1 -dev-us D0,D1), OpenCL device i's work goes to
 *    unit Ui and takes Di there, so one device can be a slower unit.
 * Its perfmodel is the application's own (STARPU_PER_ARCH): CPU_US on a
 * CPU, Di on OpenCL device i, i.e. each unit's time when nobody else uses
 * it. The application is written against StarPU only: which policy places
 * its tasks is chosen from outside (STARPU_SCHED, LD_PRELOAD).
 * With -in-flight K it keeps at most K tasks submitted and unfinished, as
 * an application whose next task waits for an earlier result (0: submit
 * them all at once).
 * With -start-at T (Unix time) it starts submitting at T, after StarPU's
 * start-up, so that concurrent applications start together.
 * Prints one line: `app NAME tasks N cpu C dev D0,D1 on_cpu X on_device Y
 * late L start T0 end T1 seconds S by_device Y0,Y1` (Y: all devices). */
#include <hetsched.h>
#include <semaphore.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEVICES 8

static double cpu_us = 2000, iters_per_us = 100;
/* Per OpenCL device (StarPU's devid); devices beyond the lists use the
 * last entry. */
static double dev_us[MAX_DEVICES] = {200};
static uint32_t device_unit[MAX_DEVICES];
static int ndev_us, nunits;
static HsClient client;
static volatile uint64_t sink;
static _Atomic long on_cpu, on_device[MAX_DEVICES];
static sem_t slots; /* -in-flight: submissions left before one must finish */
static int windowed;

static uint64_t work(uint64_t iters, uint64_t seed) {
    uint64_t x = seed | 1;
    for (uint64_t i = 0; i < iters; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

static void run_cpu(void *buffers[], void *arg) {
    (void)buffers;
    uint64_t seed = (uint64_t)(uintptr_t)arg;
    sink = work((uint64_t)(cpu_us * iters_per_us), seed);
    on_cpu++;
}

static int clamp_dev(int devid, int n) { return devid < 0 ? 0 : devid < n ? devid : n - 1; }

static void run_device(void *buffers[], void *arg) {
    (void)buffers;
    (void)arg;
    int devid = starpu_worker_get_devid(starpu_worker_get_id_check());
    uint64_t ns = (uint64_t)(dev_us[clamp_dev(devid, ndev_us)] * 1e3);
    if (hs_client_run_device(client, device_unit[clamp_dev(devid, nunits)], ns, 0, 0, NULL) !=
        HS_OK) {
        fprintf(stderr, "hs_app: device work failed: %s\n", hs_last_error());
        exit(1);
    }
    on_device[clamp_dev(devid, MAX_DEVICES)]++;
}

static double cost(struct starpu_task *task, struct starpu_perfmodel_arch *arch, unsigned nimpl) {
    (void)task;
    (void)nimpl;
    if (arch->devices[0].type == STARPU_CPU_WORKER) return cpu_us;
    return dev_us[clamp_dev(arch->devices[0].devid, ndev_us)];
}

/* A task finished: the next may be submitted (-in-flight). */
static void task_done(void *arg) {
    (void)arg;
    if (windowed) sem_post(&slots);
}

/* Splits a comma-separated list into at most MAX_DEVICES entries. */
static int split_list(char *list, char **out) {
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && n < MAX_DEVICES;
         tok = strtok_r(NULL, ",", &save))
        out[n++] = tok;
    return n;
}

static struct starpu_perfmodel model = {
    .type = STARPU_PER_ARCH,
    .arch_cost_function = cost,
    .symbol = "hs_app",
};

static struct starpu_codelet cl = {
    .cpu_funcs = {run_cpu},
    .opencl_funcs = {run_device},
    .nbuffers = 0,
    .model = &model,
    .name = "hs_app",
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    const char *name = "app";
    char units_arg[256] = "emu-gpu", dev_arg[256] = "200";
    long tasks = 100, in_flight = 0;
    double start_at = 0;
    int calibrate = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-calibrate")) { calibrate = 1; continue; }
        if (!v) { fprintf(stderr, "hs_app: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "-name")) name = v;
        else if (!strcmp(a, "-tasks")) tasks = atol(v);
        else if (!strcmp(a, "-cpu-us")) cpu_us = atof(v);
        else if (!strcmp(a, "-dev-us")) snprintf(dev_arg, sizeof dev_arg, "%s", v);
        else if (!strcmp(a, "-ipu")) iters_per_us = atof(v);
        else if (!strcmp(a, "-unit")) snprintf(units_arg, sizeof units_arg, "%s", v);
        else if (!strcmp(a, "-in-flight")) in_flight = atol(v);
        else if (!strcmp(a, "-start-at")) start_at = atof(v);
        else { fprintf(stderr, "hs_app: unknown option %s\n", a); return 2; }
        i++;
    }
    if (calibrate) {
        /* Iterations of `work` per microsecond on an idle core. */
        uint64_t n = 1000000;
        double t0 = now_s();
        sink = work(n, 7);
        while (now_s() - t0 < 0.2) { n *= 2; t0 = now_s(); sink = work(n, 7); }
        printf("%.1f\n", n / ((now_s() - t0) * 1e6));
        return 0;
    }
    char dev_list[256], *items[MAX_DEVICES];
    snprintf(dev_list, sizeof dev_list, "%s", dev_arg);
    ndev_us = split_list(dev_list, items);
    for (int i = 0; i < ndev_us; i++) dev_us[i] = atof(items[i]);
    if (ndev_us == 0) {
        fprintf(stderr, "hs_app: -dev-us needs at least one value\n");
        return 2;
    }
    if (hs_client_connect(name, getenv("HETSCHED_SOCKET"), &client) != HS_OK) {
        fprintf(stderr, "hs_app: %s\n", hs_last_error());
        return 1;
    }
    nunits = split_list(units_arg, items);
    for (int i = 0; i < nunits; i++) {
        if (hs_client_find_unit(client, items[i], &device_unit[i]) != HS_OK) {
            fprintf(stderr, "hs_app: %s\n", hs_last_error());
            return 1;
        }
    }
    if (nunits == 0) {
        fprintf(stderr, "hs_app: -unit needs at least one unit\n");
        return 2;
    }
    windowed = in_flight > 0;
    if (windowed) sem_init(&slots, 0, (unsigned)in_flight);
    if (starpu_init(NULL) != 0) {
        fprintf(stderr, "hs_app: starpu_init failed\n");
        return 1;
    }
    /* Every application of a run starts submitting at the same instant,
     * after StarPU's (policy-independent) start-up. */
    double late = 0;
    if (start_at > 0) {
        double wait = start_at - now_s();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
        } else {
            late = -wait;
        }
    }
    double t0 = now_s();
    for (long i = 0; i < tasks; i++) {
        if (windowed)
            while (sem_wait(&slots) != 0) {} /* EINTR only */
        struct starpu_task *t = starpu_task_create();
        t->cl = &cl;
        t->cl_arg = (void *)(uintptr_t)(i + 1);
        t->cl_arg_size = 0;
        t->callback_func = task_done;
        if (starpu_task_submit(t) != 0) {
            fprintf(stderr, "hs_app: submit failed\n");
            return 1;
        }
    }
    starpu_task_wait_for_all();
    double t1 = now_s();
    int ndevices = (int)starpu_opencl_worker_get_count();
    starpu_shutdown();
    hs_client_close(client);
    long device_total = 0;
    char by_device[128] = "";
    for (int i = 0; i < MAX_DEVICES; i++) device_total += on_device[i];
    for (int i = 0; i < (ndevices > 0 ? ndevices : 1) && i < MAX_DEVICES; i++) {
        size_t len = strlen(by_device);
        snprintf(by_device + len, sizeof by_device - len, "%s%ld", i ? "," : "", (long)on_device[i]);
    }
    printf("app %s tasks %ld cpu %.0f dev %s on_cpu %ld on_device %ld late %.3f start %.6f end %.6f "
           "seconds %.3f by_device %s\n",
           name, tasks, cpu_us, dev_arg, (long)on_cpu, device_total, late, t0, t1, t1 - t0,
           by_device);
    return 0;
}
