/* A StarPU application for the contention experiment (bench.sh): TASKS
 * independent tasks of one codelet with two implementations,
 *  - CPU: real work, ITERS_PER_US x CPU_US iterations of an integer hash
 *    (so it takes CPU_US on an idle core and longer when cores are shared);
 *  - device (StarPU's OpenCL worker): DEV_US of work on the emulated GPU
 *    the hetsched daemon serves (hs_client_run_device), shared by every
 *    process on the machine; the worker thread blocks meanwhile.
 * Its perfmodel is the application's own (STARPU_PER_ARCH): CPU_US on a
 * CPU, DEV_US on the device, i.e. each unit's time when nobody else uses
 * it. The application is written against StarPU only: which policy places
 * its tasks is chosen from outside (STARPU_SCHED, LD_PRELOAD).
 * With -start-at T (Unix time) it starts submitting at T, after StarPU's
 * start-up, so that concurrent applications start together.
 * Prints one line: `app NAME tasks N cpu C dev D on_cpu X on_device Y
 * late L start T0 end T1 seconds S`. */
#include <hetsched.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_us = 2000, dev_us = 200, iters_per_us = 100;
static HsClient client;
static uint32_t device_unit;
static volatile uint64_t sink;
static _Atomic long on_cpu, on_device;

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

static void run_device(void *buffers[], void *arg) {
    (void)buffers;
    (void)arg;
    if (hs_client_run_device(client, device_unit, (uint64_t)(dev_us * 1e3), 0, 0, NULL) != HS_OK) {
        fprintf(stderr, "hs_app: device work failed: %s\n", hs_last_error());
        exit(1);
    }
    on_device++;
}

static double cost(struct starpu_task *task, struct starpu_perfmodel_arch *arch, unsigned nimpl) {
    (void)task;
    (void)nimpl;
    return arch->devices[0].type == STARPU_CPU_WORKER ? cpu_us : dev_us;
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
    const char *name = "app", *unit = "emu-gpu";
    long tasks = 100;
    double start_at = 0;
    int calibrate = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-calibrate")) { calibrate = 1; continue; }
        if (!v) { fprintf(stderr, "hs_app: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "-name")) name = v;
        else if (!strcmp(a, "-tasks")) tasks = atol(v);
        else if (!strcmp(a, "-cpu-us")) cpu_us = atof(v);
        else if (!strcmp(a, "-dev-us")) dev_us = atof(v);
        else if (!strcmp(a, "-ipu")) iters_per_us = atof(v);
        else if (!strcmp(a, "-unit")) unit = v;
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
    if (hs_client_connect(name, getenv("HETSCHED_SOCKET"), &client) != HS_OK ||
        hs_client_find_unit(client, unit, &device_unit) != HS_OK) {
        fprintf(stderr, "hs_app: %s\n", hs_last_error());
        return 1;
    }
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
        struct starpu_task *t = starpu_task_create();
        t->cl = &cl;
        t->cl_arg = (void *)(uintptr_t)(i + 1);
        t->cl_arg_size = 0;
        if (starpu_task_submit(t) != 0) {
            fprintf(stderr, "hs_app: submit failed\n");
            return 1;
        }
    }
    starpu_task_wait_for_all();
    double t1 = now_s();
    starpu_shutdown();
    hs_client_close(client);
    printf("app %s tasks %ld cpu %.0f dev %.0f on_cpu %ld on_device %ld late %.3f start %.6f end %.6f "
           "seconds %.3f\n",
           name, tasks, cpu_us, dev_us, (long)on_cpu, (long)on_device, late, t0, t1, t1 - t0);
    return 0;
}
