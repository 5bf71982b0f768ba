/* C-side test of the hetsched C API: bad input from C (NULL pointers, bad
 * handles, invalid UTF-8, out-of-range values) returns clear codes and a
 * message, never a crash; a real runtime places and runs calls; goals; an
 * OpenCL implementation that runs a real kernel through the device's raw
 * handles (built with -DHS_TEST_OPENCL, where OpenCL's headers are
 * installed; a libhetsched without the `opencl` feature must say
 * HS_ERR_UNSUPPORTED instead); and, when argv[2] names a daemon socket,
 * the daemon client (units, views, prediction, dispatch gate, emulated
 * device) and the OpenCL implementation on the daemon's gated unit. Run by
 * run-tests.sh; HS_TEST_REQUIRE_OPENCL=1 makes a missing OpenCL device a
 * failure instead of a skip. */
#define _DEFAULT_SOURCE
#include <hetsched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HS_TEST_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif

#include "expect.h"

struct square {
    long in;
    long out;
};

static atomic_int cpu_runs, gpu_runs;

static void square_cpu(void *args, void *user) {
    (void)user;
    struct square *s = args;
    s->out = s->in * s->in;
    atomic_fetch_add(&cpu_runs, 1);
}

static void square_gpu(void *args, void *user) {
    (void)user;
    struct square *s = args;
    s->out = s->in * s->in;
    atomic_fetch_add(&gpu_runs, 1);
}

static uint64_t square_cost(const void *args, void *user) {
    (void)args;
    (void)user;
    return 200000; /* 0.2 ms on the emulated device */
}

static atomic_int tracked;

static double tracker(void *user) {
    (void)user;
    atomic_fetch_add(&tracked, 1);
    return 1.0;
}

/* OpenCL: out[i] = 3 * in[i] + 1 over n ints, run by a real kernel on the
 * runtime's queue. n == 0 makes clCreateBuffer fail (CL_INVALID_BUFFER_SIZE):
 * a failing OpenCL call that must fail only its own hetsched call. */
struct affine {
    size_t n;
    const int *in;
    int *out;
};

#ifdef HS_TEST_OPENCL
static atomic_int opencl_runs;

static const char *AFFINE_SRC =
    "__kernel void affine(__global const int *in, __global int *out) {\n"
    "    size_t i = get_global_id(0);\n"
    "    out[i] = 3 * in[i] + 1;\n"
    "}\n";

/* The program built on a context, kept across calls (calls on one unit get
 * the same context); the lock covers machines with several OpenCL units. */
struct affine_cache {
    pthread_mutex_t lock;
    cl_context context;
    cl_program program;
    cl_kernel kernel;
    int builds;
};

static void affine_cache_release(struct affine_cache *c) {
    if (c->kernel) clReleaseKernel(c->kernel);
    if (c->program) clReleaseProgram(c->program);
    c->kernel = NULL;
    c->program = NULL;
    c->context = NULL;
}

static cl_int affine_build(struct affine_cache *c, const HsOpenClDevice *dev) {
    cl_context ctx = (cl_context)dev->context;
    cl_device_id device = (cl_device_id)dev->device;
    if (c->context == ctx) return CL_SUCCESS;
    affine_cache_release(c);
    cl_int err;
    c->program = clCreateProgramWithSource(ctx, 1, &AFFINE_SRC, NULL, &err);
    if (err != CL_SUCCESS) return err;
    err = clBuildProgram(c->program, 1, &device, NULL, NULL, NULL);
    if (err != CL_SUCCESS) return err;
    c->kernel = clCreateKernel(c->program, "affine", &err);
    if (err != CL_SUCCESS) return err;
    c->context = ctx;
    c->builds++;
    return CL_SUCCESS;
}

static int affine_opencl(void *args, void *user, const HsOpenClDevice *dev) {
    struct affine *a = args;
    struct affine_cache *c = user;
    cl_context ctx = (cl_context)dev->context;
    cl_command_queue q = (cl_command_queue)dev->queue;
    pthread_mutex_lock(&c->lock);
    size_t bytes = a->n * sizeof(int);
    cl_mem in = NULL, out = NULL;
    cl_int err = affine_build(c, dev);
    if (err == CL_SUCCESS) in = clCreateBuffer(ctx, CL_MEM_READ_ONLY, bytes, NULL, &err);
    if (err == CL_SUCCESS) out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, bytes, NULL, &err);
    if (err == CL_SUCCESS) err = clEnqueueWriteBuffer(q, in, CL_FALSE, 0, bytes, a->in, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clSetKernelArg(c->kernel, 0, sizeof in, &in);
    if (err == CL_SUCCESS) err = clSetKernelArg(c->kernel, 1, sizeof out, &out);
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(q, c->kernel, 1, NULL, &a->n, NULL, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clEnqueueReadBuffer(q, out, CL_TRUE, 0, bytes, a->out, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(q);
    if (in) clReleaseMemObject(in);
    if (out) clReleaseMemObject(out);
    pthread_mutex_unlock(&c->lock);
    atomic_fetch_add(&opencl_runs, 1);
    return err;
}
#else
static int affine_opencl(void *args, void *user, const HsOpenClDevice *dev) {
    (void)args;
    (void)user;
    (void)dev;
    return -1;
}
#endif

static int never_cuda(void *args, void *user, const HsCudaDevice *dev) {
    (void)args;
    (void)user;
    (void)dev;
    return 1;
}

static void bad_input(void) {
    HsRuntime rt = 0;
    HsTask task = 0;
    EXPECT_STATUS(hs_runtime_connect(NULL, &rt), HS_ERR_NULL);
    EXPECT(error_mentions("name"));
    EXPECT_STATUS(hs_runtime_connect("x", NULL), HS_ERR_NULL);
    EXPECT_STATUS(hs_runtime_connect("", &rt), HS_ERR_INVALID);
    EXPECT_STATUS(hs_runtime_connect_with("x", NULL, &rt), HS_ERR_NULL);
    HsRuntimeOptions o = hs_runtime_options_default();
    o.monitor = 42;
    EXPECT_STATUS(hs_runtime_connect_with("x", &o, &rt), HS_ERR_INVALID);
    EXPECT(error_mentions("monitor"));
    o = hs_runtime_options_default();
    o.socket = "\xff\xfe";
    EXPECT_STATUS(hs_runtime_connect_with("x", &o, &rt), HS_ERR_UTF8);
    EXPECT(error_mentions("UTF-8"));

    EXPECT_STATUS(hs_task_new("\xc3\x28", &task), HS_ERR_UTF8);
    EXPECT_STATUS(hs_task_new(NULL, &task), HS_ERR_NULL);
    EXPECT_STATUS(hs_task_new("t", NULL), HS_ERR_NULL);

    /* Handles never given out, and handles of the wrong kind. */
    EXPECT_STATUS(hs_runtime_wait_all(0), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_runtime_wait_all(0xdeadbeefULL), HS_ERR_BAD_HANDLE);
    EXPECT(error_mentions("runtime"));
    EXPECT_STATUS(hs_task_new("t", &task), HS_OK);
    EXPECT_STATUS(hs_runtime_close(task), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_task_set_cpu(task, NULL, NULL), HS_ERR_NULL);
    EXPECT_STATUS(hs_task_add_emulated(task, "\xff", square_cost, square_gpu, NULL), HS_ERR_UTF8);
    EXPECT_STATUS(hs_task_add_emulated(task, "k", NULL, square_gpu, NULL), HS_ERR_NULL);
    EXPECT_STATUS(hs_task_set_sizes(task, NULL, NULL), HS_ERR_NULL);
    EXPECT_STATUS(hs_task_set_opencl(task, NULL, NULL), HS_ERR_NULL);
    EXPECT(error_mentions("opencl"));
    EXPECT_STATUS(hs_task_set_cuda(task, NULL, NULL), HS_ERR_NULL);
    EXPECT(error_mentions("cuda"));
    char name[4];
    EXPECT_STATUS(hs_task_name(task, name, sizeof name), HS_OK);
    EXPECT(strcmp(name, "t") == 0);
    EXPECT_STATUS(hs_task_name(task, NULL, 4), HS_ERR_NULL);
    EXPECT_STATUS(hs_task_free(task), HS_OK);
    EXPECT_STATUS(hs_task_free(task), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_task_set_cpu(task, square_cpu, NULL), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_task_set_opencl(task, affine_opencl, NULL), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_task_set_cuda(task, never_cuda, NULL), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_call_wait(77, NULL), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_call_discard(77), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_client_close(77), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_runtime_set_goal(77, 1.0, tracker, NULL, NULL, 0), HS_ERR_BAD_HANDLE);
    EXPECT(strcmp(hs_status_name(HS_ERR_UTF8), "HS_ERR_UTF8") == 0);
    EXPECT(strcmp(hs_status_name(HS_ERR_UNSUPPORTED), "HS_ERR_UNSUPPORTED") == 0);
    EXPECT(strcmp(hs_status_name(-5), "HS_UNKNOWN_STATUS") == 0);
    /* The version of the library linked is the workspace's (the Makefile's). */
    EXPECT(strcmp(hs_version(), HS_TEST_VERSION) == 0);

    HsClient cl;
    EXPECT_STATUS(hs_client_connect("c-test", "/nonexistent/hetsched.sock", &cl), HS_ERR_CONNECT);
    EXPECT(error_mentions("/nonexistent/hetsched.sock"));
    EXPECT_STATUS(hs_client_connect("c-test", "\xff", &cl), HS_ERR_UTF8);
}

static void runtime_runs_calls(const char *config) {
    HsRuntimeOptions o = hs_runtime_options_default();
    o.monitor = HS_MONITOR_EMBEDDED;
    o.config = config;
    o.persist_models = false;
    HsRuntime rt;
    EXPECT_STATUS(hs_runtime_connect_with("c-test", &o, &rt), HS_OK);
    HsRuntimeStatus st;
    EXPECT_STATUS(hs_runtime_status(rt, &st), HS_OK);
    EXPECT(!st.monitor_is_daemon);
    EXPECT(st.units >= 2);
    HsUnitInfo info;
    EXPECT_STATUS(hs_runtime_unit_info(rt, st.units, &info), HS_ERR_INVALID);
    EXPECT_STATUS(hs_runtime_unit_info(rt, 0, NULL), HS_ERR_NULL);

    HsTask task;
    EXPECT_STATUS(hs_task_new("c-square", &task), HS_OK);
    EXPECT_STATUS(hs_task_set_cpu(task, square_cpu, NULL), HS_OK);
    EXPECT_STATUS(hs_task_add_emulated(task, "emu-gpu", square_cost, square_gpu, NULL), HS_OK);

    enum { N = 40 };
    struct square sq[N];
    HsCall calls[N];
    for (int i = 0; i < N; i++) {
        sq[i] = (struct square){.in = i + 1, .out = -1};
        EXPECT_STATUS(hs_accelerate(rt, task, &sq[i], HS_ASYNC, &calls[i]), HS_OK);
    }
    EXPECT_STATUS(hs_accelerate(rt, task, &sq[0], 9, &calls[0]), HS_ERR_INVALID);
    EXPECT_STATUS(hs_accelerate(rt, task, &sq[0], HS_ASYNC, NULL), HS_ERR_NULL);
    for (int i = 0; i < N; i++) {
        HsRunInfo ri;
        EXPECT_STATUS(hs_call_wait(calls[i], &ri), HS_OK);
        EXPECT(ri.unit < st.units);
        EXPECT(sq[i].out == (long)(i + 1) * (i + 1));
    }
    EXPECT_STATUS(hs_call_wait(calls[0], NULL), HS_ERR_BAD_HANDLE);
    EXPECT(atomic_load(&cpu_runs) + atomic_load(&gpu_runs) == N);
    uint64_t completed = 0;
    for (uint32_t u = 0; u < st.units; u++) {
        EXPECT_STATUS(hs_runtime_unit_info(rt, u, &info), HS_OK);
        completed += info.completed;
    }
    EXPECT(completed == N);

    /* Sync: the handle is ready at once. */
    struct square one = {.in = 9, .out = 0};
    HsCall c;
    EXPECT_STATUS(hs_accelerate(rt, task, &one, HS_SYNC, &c), HS_OK);
    EXPECT_STATUS(hs_call_is_done(c), HS_OK);
    EXPECT_STATUS(hs_call_wait(c, NULL), HS_OK);
    EXPECT(one.out == 81);

    /* A task for a kind nobody has is refused, with the units listed. */
    HsTask nowhere;
    EXPECT_STATUS(hs_task_new("c-nowhere", &nowhere), HS_OK);
    EXPECT_STATUS(hs_task_add_emulated(nowhere, "fpga", square_cost, square_gpu, NULL), HS_OK);
    EXPECT_STATUS(hs_accelerate(rt, nowhere, &one, HS_ASYNC, &c), HS_ERR_NO_IMPLEMENTATION);
    EXPECT(error_mentions("emu-gpu"));
    EXPECT_STATUS(hs_task_free(nowhere), HS_OK);

    /* Goals: the tracker is polled on the optimizer's thread. */
    HsGoalStatus gs;
    EXPECT_STATUS(hs_runtime_goal_status(rt, &gs), HS_ERR_NOT_READY);
    EXPECT_STATUS(hs_runtime_set_goal(rt, -1.0, tracker, NULL, NULL, 20), HS_ERR_INVALID);
    EXPECT_STATUS(hs_runtime_set_goal(rt, 1.0, NULL, NULL, NULL, 20), HS_ERR_NULL);
    EXPECT_STATUS(hs_runtime_set_goal(rt, 1.0, tracker, NULL, NULL, 20), HS_OK);
    for (int i = 0; i < 100 && atomic_load(&tracked) < 3; i++) usleep(20000);
    EXPECT(atomic_load(&tracked) >= 3);
    EXPECT_STATUS(hs_runtime_goal_status(rt, &gs), HS_OK);
    EXPECT(gs.target == 1.0);
    EXPECT(gs.periods >= 1);
    EXPECT_STATUS(hs_runtime_clear_goal(rt), HS_OK);
    EXPECT_STATUS(hs_runtime_goal_status(rt, &gs), HS_ERR_NOT_READY);

    EXPECT_STATUS(hs_task_free(task), HS_OK);
    EXPECT_STATUS(hs_runtime_close(rt), HS_OK);
    EXPECT_STATUS(hs_runtime_close(rt), HS_ERR_BAD_HANDLE);
}

/* CUDA from C: registered where libhetsched has the `cuda` feature, else
 * refused with a message that names it. */
static void cuda_registration(void) {
    HsTask task;
    EXPECT_STATUS(hs_task_new("c-cuda", &task), HS_OK);
    HsStatus st = hs_task_set_cuda(task, never_cuda, NULL);
    if (st == HS_ERR_UNSUPPORTED) EXPECT(error_mentions("cuda"));
    else EXPECT_STATUS(st, HS_OK);
    EXPECT_STATUS(hs_task_free(task), HS_OK);
}

/* A task whose only implementation is OpenCL's runs a real kernel on an
 * OpenCL unit of a runtime with an embedded monitor, or (socket given) of
 * one connected to the daemon, whose `opencl0` unit gates every run. */
static void opencl_runs_kernels(const char *config, const char *socket) {
    const char *where = socket ? "daemon" : "embedded monitor";
    HsTask task;
    EXPECT_STATUS(hs_task_new("c-affine", &task), HS_OK);
#ifdef HS_TEST_OPENCL
    struct affine_cache cache = {.lock = PTHREAD_MUTEX_INITIALIZER};
    void *user = &cache;
#else
    void *user = NULL;
#endif
    HsStatus st = hs_task_set_opencl(task, affine_opencl, user);
    if (st == HS_ERR_UNSUPPORTED) {
        EXPECT(error_mentions("opencl"));
        printf("test_capi: libhetsched built without the opencl feature; OpenCL run skipped\n");
        EXPECT_STATUS(hs_task_free(task), HS_OK);
        return;
    }
    EXPECT_STATUS(st, HS_OK);
#ifndef HS_TEST_OPENCL
    (void)config;
    printf("test_capi: built without OpenCL headers; OpenCL run (%s) skipped\n", where);
    EXPECT_STATUS(hs_task_free(task), HS_OK);
#else
    HsRuntimeOptions o = hs_runtime_options_default();
    o.monitor = socket ? HS_MONITOR_DAEMON : HS_MONITOR_EMBEDDED;
    o.socket = socket;
    o.config = config;
    o.persist_models = false;
    HsRuntime rt;
    EXPECT_STATUS(hs_runtime_connect_with("c-test-opencl", &o, &rt), HS_OK);

    enum { CALLS = 6, N = 4096 };
    static int in[CALLS][N], out[CALLS][N];
    struct affine a[CALLS];
    HsCall calls[CALLS];
    for (int c = 0; c < CALLS; c++) {
        for (int i = 0; i < N; i++) {
            in[c][i] = c * N + i - 1000;
            out[c][i] = 0;
        }
        a[c] = (struct affine){.n = N, .in = in[c], .out = out[c]};
    }
    st = hs_accelerate(rt, task, &a[0], HS_ASYNC, &calls[0]);
    if (st == HS_ERR_NO_IMPLEMENTATION) {
        const char *req = getenv("HS_TEST_REQUIRE_OPENCL");
        if (req && strcmp(req, "1") == 0) {
            fprintf(stderr, "test_capi: no OpenCL unit (%s) though HS_TEST_REQUIRE_OPENCL=1: %s\n",
                    where, hs_last_error());
            failures++;
        } else {
            printf("test_capi: no OpenCL device (%s); OpenCL run skipped\n", where);
        }
        EXPECT_STATUS(hs_task_free(task), HS_OK);
        EXPECT_STATUS(hs_runtime_close(rt), HS_OK);
        return;
    }
    EXPECT_STATUS(st, HS_OK);
    for (int c = 1; c < CALLS; c++)
        EXPECT_STATUS(hs_accelerate(rt, task, &a[c], HS_ASYNC, &calls[c]), HS_OK);
    int wrong = 0;
    for (int c = 0; c < CALLS; c++) {
        HsRunInfo ri;
        EXPECT_STATUS(hs_call_wait(calls[c], &ri), HS_OK);
        HsUnitInfo info;
        EXPECT_STATUS(hs_runtime_unit_info(rt, ri.unit, &info), HS_OK);
        EXPECT(strncmp(info.name, "opencl", 6) == 0);
        EXPECT(!info.is_cpu && !info.emulated);
        for (int i = 0; i < N; i++) wrong += out[c][i] != 3 * in[c][i] + 1;
    }
    EXPECT(wrong == 0);
    EXPECT(cache.builds >= 1);

    /* A failing OpenCL call fails its own hetsched call, with the code. */
    struct affine empty = {.n = 0, .in = in[0], .out = out[0]};
    HsCall c;
    EXPECT_STATUS(hs_accelerate(rt, task, &empty, HS_SYNC, &c), HS_OK);
    EXPECT_STATUS(hs_call_wait(c, NULL), HS_ERR_TASK_FAILED);
    EXPECT(error_mentions("CL_INVALID_BUFFER_SIZE"));
    EXPECT(error_mentions("c-affine"));
    /* ... and only that call. */
    memset(out[1], 0, sizeof out[1]);
    EXPECT_STATUS(hs_accelerate(rt, task, &a[1], HS_SYNC, &c), HS_OK);
    EXPECT_STATUS(hs_call_wait(c, NULL), HS_OK);
    EXPECT(out[1][N - 1] == 3 * in[1][N - 1] + 1);

    if (socket) {
        /* Where the daemon lists the device as a unit, the runtime runs on
         * that unit (each run waits for its agent) rather than adding one
         * of its own: it has exactly the daemon's units. */
        HsClient cl;
        uint32_t daemon_units = 0, unit;
        EXPECT_STATUS(hs_client_connect("c-test-opencl-client", socket, &cl), HS_OK);
        EXPECT_STATUS(hs_client_unit_count(cl, &daemon_units), HS_OK);
        HsRuntimeStatus rs;
        EXPECT_STATUS(hs_runtime_status(rt, &rs), HS_OK);
        EXPECT(rs.monitor_is_daemon);
        if (hs_client_find_unit(cl, "opencl0", &unit) == HS_OK) {
            EXPECT(rs.units == daemon_units);
            printf("test_capi: OpenCL calls ran on the daemon's gated opencl0\n");
        } else {
            printf("test_capi: the daemon has no opencl0 unit (built without OpenCL?); "
                   "the calls ran on the runtime's own\n");
        }
        EXPECT_STATUS(hs_client_close(cl), HS_OK);
    }
    EXPECT(atomic_load(&opencl_runs) >= CALLS + 2);
    EXPECT_STATUS(hs_task_free(task), HS_OK);
    EXPECT_STATUS(hs_runtime_close(rt), HS_OK);
    pthread_mutex_lock(&cache.lock);
    affine_cache_release(&cache);
    pthread_mutex_unlock(&cache.lock);
    printf("test_capi: OpenCL kernel through the raw handles (%s): ok\n", where);
#endif
}

static void daemon_client(const char *socket) {
    HsClient cl;
    EXPECT_STATUS(hs_client_connect("c-test-client", socket, &cl), HS_OK);
    uint32_t n = 0, gpu = 0;
    EXPECT_STATUS(hs_client_unit_count(cl, &n), HS_OK);
    EXPECT(n >= 1);
    EXPECT_STATUS(hs_client_find_unit(cl, "emu-gpu", &gpu), HS_OK);
    EXPECT_STATUS(hs_client_find_unit(cl, "no-such-unit", &gpu), HS_ERR_INVALID);
    EXPECT(error_mentions("emu-gpu"));
    EXPECT_STATUS(hs_client_find_unit(cl, "emu-gpu", &gpu), HS_OK);
    HsUnitInfo info;
    EXPECT_STATUS(hs_client_unit_info(cl, gpu, &info), HS_OK);
    EXPECT(info.emulated && !info.is_cpu);
    EXPECT_STATUS(hs_client_unit_info(cl, n, &info), HS_ERR_INVALID);
    HsUnitView v;
    EXPECT_STATUS(hs_client_unit_view(cl, gpu, &v), HS_OK);
    EXPECT(v.max_utilisation > 0.0);
    double alone = 0.0, behind = 0.0;
    EXPECT_STATUS(hs_client_predict_ns(cl, gpu, 1e6, 0, 0, 0, 0.0, &alone), HS_OK);
    EXPECT(alone >= 1e6);
    /* Work of ours ahead of the call stretches the prediction. */
    EXPECT_STATUS(hs_client_predict_ns(cl, gpu, 1e6, 0, 0, 0, 5e6, &behind), HS_OK);
    EXPECT(behind > alone);
    EXPECT_STATUS(hs_client_predict_ns(cl, gpu, -1.0, 0, 0, 0, 0.0, &alone), HS_ERR_INVALID);
    HsDeviceDone done;
    EXPECT_STATUS(hs_client_run_device(cl, gpu, 2000000, 4096, 4096, &done), HS_OK);
    EXPECT(done.ran_ns >= 2000000);
    HsGrant g;
    EXPECT_STATUS(hs_client_request_dispatch(cl, gpu, 1000000, &g), HS_OK);
    EXPECT_STATUS(hs_client_task_completed(cl, &g, 1000000), HS_OK);
    EXPECT_STATUS(hs_client_task_completed(cl, NULL, 1), HS_ERR_NULL);
    EXPECT_STATUS(hs_client_request_dispatch(cl, gpu, 1, NULL), HS_ERR_NULL);
    EXPECT_STATUS(hs_client_close(cl), HS_OK);
    EXPECT_STATUS(hs_client_unit_count(cl, &n), HS_ERR_BAD_HANDLE);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CONFIG [DAEMON_SOCKET]\n", argv[0]);
        return 2;
    }
    bad_input();
    cuda_registration();
    runtime_runs_calls(argv[1]);
    opencl_runs_kernels(argv[1], NULL);
    if (argc > 2) {
        daemon_client(argv[2]);
        opencl_runs_kernels(argv[1], argv[2]);
    } else {
        printf("test_capi: no daemon socket given, daemon client part skipped\n");
    }
    if (failures) {
        fprintf(stderr, "test_capi: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_capi: all checks passed\n");
    return 0;
}
