/* Rinnegan's Listing 1 with the hetsched C API: ten checksum calls, each
 * with a CPU implementation and one on an emulated GPU served by the
 * monitor, placed by predicted turnaround. Build: `make -C crates/capi/c
 * example`; run with a daemon (HETSCHED_SOCKET) or alone (embedded
 * monitor; HETSCHED_CONFIG may name a config with [[emulated]] units). */
#include <hetsched.h>
#include <stdio.h>
#include <stdlib.h>

struct chunk {
    const unsigned char *data;
    size_t len;
    uint64_t sum;
};

static void sum_cpu(void *args, void *user) {
    (void)user;
    struct chunk *c = args;
    uint64_t s = 0;
    for (size_t i = 0; i < c->len; i++) s += c->data[i];
    c->sum = s;
}

/* The emulated GPU sums 8 bytes per ns; its answer is the CPU's. */
static uint64_t sum_gpu_cost(const void *args, void *user) {
    (void)user;
    return ((const struct chunk *)args)->len / 8 + 1;
}

static void sizes(const void *args, void *user, uint64_t *in, uint64_t *out) {
    (void)user;
    *in = ((const struct chunk *)args)->len;
    *out = sizeof(uint64_t);
}

#define CHECK(call)                                                              \
    do {                                                                         \
        HsStatus st_ = (call);                                                   \
        if (st_ != HS_OK) {                                                      \
            fprintf(stderr, "%s: %s: %s\n", #call, hs_status_name(st_),          \
                    hs_last_error());                                            \
            return 1;                                                            \
        }                                                                        \
    } while (0)

int main(void) {
    enum { N = 10, LEN = 1 << 20 };
    unsigned char *data = malloc(LEN);
    if (!data) return 1;
    for (size_t i = 0; i < LEN; i++) data[i] = (unsigned char)i;

    HsRuntime rt;
    CHECK(hs_runtime_connect("c-example", &rt));
    HsTask task;
    CHECK(hs_task_new("c-checksum", &task));
    CHECK(hs_task_set_cpu(task, sum_cpu, NULL));
    CHECK(hs_task_set_sizes(task, sizes, NULL));
    HsRuntimeStatus st;
    CHECK(hs_runtime_status(rt, &st));
    for (uint32_t u = 0; u < st.units; u++) {
        HsUnitInfo info;
        CHECK(hs_runtime_unit_info(rt, u, &info));
        if (!info.is_cpu && info.emulated)
            CHECK(hs_task_add_emulated(task, info.kind, sum_gpu_cost, sum_cpu, NULL));
    }

    struct chunk chunks[N];
    HsCall calls[N];
    for (int i = 0; i < N; i++) {
        chunks[i] = (struct chunk){data, LEN, 0};
        CHECK(hs_accelerate(rt, task, &chunks[i], HS_ASYNC, &calls[i]));
    }
    for (int i = 0; i < N; i++) {
        HsRunInfo ri;
        CHECK(hs_call_wait(calls[i], &ri));
        HsUnitInfo where;
        CHECK(hs_runtime_unit_info(rt, ri.unit, &where));
        printf("call %d: sum %llu on %s in %.3f ms\n", i, (unsigned long long)chunks[i].sum,
               where.name, ri.turnaround_ns / 1e6);
    }
    CHECK(hs_runtime_status(rt, &st));
    printf("monitor: %s\n", st.monitor_is_daemon ? "daemon" : "embedded");
    CHECK(hs_task_free(task));
    CHECK(hs_runtime_close(rt));
    free(data);
    return 0;
}
