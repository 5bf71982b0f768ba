/* C-side test of the hetsched C API: bad input from C (NULL pointers, bad
 * handles, invalid UTF-8, out-of-range values) returns clear codes and a
 * message, never a crash; a real runtime places and runs calls; goals; and,
 * when argv[1] names a daemon socket, the daemon client (units, views,
 * prediction, dispatch gate, emulated device). Run by run-tests.sh. */
#define _DEFAULT_SOURCE
#include <hetsched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;

#define EXPECT(cond)                                                              \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: expected %s (last error: %s)\n", __FILE__,    \
                    __LINE__, #cond, hs_last_error() ? hs_last_error() : "none"); \
            failures++;                                                           \
        }                                                                         \
    } while (0)

#define EXPECT_STATUS(call, want)                                                 \
    do {                                                                          \
        HsStatus got_ = (call);                                                   \
        if (got_ != (want)) {                                                     \
            fprintf(stderr, "%s:%d: %s gave %s, expected %s (last error: %s)\n",  \
                    __FILE__, __LINE__, #call, hs_status_name(got_),              \
                    hs_status_name(want), hs_last_error() ? hs_last_error() : ""); \
            failures++;                                                           \
        }                                                                         \
    } while (0)

/* The last error message mentions `word`. */
static int error_mentions(const char *word) {
    const char *e = hs_last_error();
    return e && strstr(e, word);
}

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
    char name[4];
    EXPECT_STATUS(hs_task_name(task, name, sizeof name), HS_OK);
    EXPECT(strcmp(name, "t") == 0);
    EXPECT_STATUS(hs_task_name(task, NULL, 4), HS_ERR_NULL);
    EXPECT_STATUS(hs_task_free(task), HS_OK);
    EXPECT_STATUS(hs_task_free(task), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_task_set_cpu(task, square_cpu, NULL), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_call_wait(77, NULL), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_call_discard(77), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_client_close(77), HS_ERR_BAD_HANDLE);
    EXPECT_STATUS(hs_runtime_set_goal(77, 1.0, tracker, NULL, NULL, 0), HS_ERR_BAD_HANDLE);
    EXPECT(strcmp(hs_status_name(HS_ERR_UTF8), "HS_ERR_UTF8") == 0);
    EXPECT(strcmp(hs_status_name(-5), "HS_UNKNOWN_STATUS") == 0);

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
    runtime_runs_calls(argv[1]);
    if (argc > 2) daemon_client(argv[2]);
    else printf("test_capi: no daemon socket given, daemon client part skipped\n");
    if (failures) {
        fprintf(stderr, "test_capi: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_capi: all checks passed\n");
    return 0;
}
