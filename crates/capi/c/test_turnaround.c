/* Parity of the placement formula from C: hs_turnaround gives the shared
 * table's figures (crates/core/tests/turnaround_cases.txt, the same the
 * core's and the Python package's tests check), and hs_client_turnaround,
 * which the StarPU policy's predict_us calls (exec and work ahead, no
 * bytes, no extra threads), is hs_turnaround over the unit's live view.
 *   test_turnaround CASES_FILE [DAEMON_SOCKET] */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdlib.h>

#include "expect.h"

static int close_to(double got, double want) {
    double scale = fabs(want) > 1.0 ? fabs(want) : 1.0;
    return fabs(got - want) <= 1e-9 * scale;
}

static int load_of(const char *name, uint32_t *load) {
    if (strcmp(name, "cpu") == 0) *load = HS_LOAD_RUNNABLE_THREADS;
    else if (strcmp(name, "backlog") == 0) *load = HS_LOAD_BACKLOG;
    else if (strcmp(name, "view") == 0) *load = HS_LOAD_VIEW;
    else return 0;
    return 1;
}

/* Every case of the table; returns how many were checked. */
static int table(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "test_turnaround: cannot open %s\n", path);
        failures++;
        return 0;
    }
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char name[64], load[16], want_t[32], want_r[32];
        char exec[32];
        unsigned slots;
        double dispatch, copy, ahead, a, b, c;
        if (line[0] == '#' || line[0] == '\n') continue;
        int got = sscanf(line, "%63s %15s %u %31s %lf %lf %lf %lf %lf %lf %31s %31s", name, load,
                         &slots, exec, &dispatch, &copy, &ahead, &a, &b, &c, want_t, want_r);
        HsTurnaroundInput in = {0};
        if (got != 12 || !load_of(load, &in.load)) {
            fprintf(stderr, "test_turnaround: bad line: %s", line);
            failures++;
            continue;
        }
        in.exec_ns = strtod(exec, NULL);
        in.dispatch_ns = dispatch;
        in.copy_ns = copy;
        in.ahead_ns = ahead;
        in.slots = slots;
        in.load_amount = a;
        in.view.guaranteed = a;
        in.view.wait_ns = b;
        in.view.max_utilisation = c;
        HsTurnaround t;
        if (strcmp(want_t, "-") == 0) {
            EXPECT_STATUS(hs_turnaround(&in, &t), HS_ERR_INVALID);
            EXPECT(error_mentions("exec_ns"));
        } else {
            EXPECT_STATUS(hs_turnaround(&in, &t), HS_OK);
            if (!close_to(t.turnaround_ns, strtod(want_t, NULL)) ||
                !close_to(t.rate_per_s, strtod(want_r, NULL))) {
                fprintf(stderr, "test_turnaround: %s gave %.17g ns, %.17g/s; want %s ns, %s/s\n",
                        name, t.turnaround_ns, t.rate_per_s, want_t, want_r);
                failures++;
            }
        }
        n++;
    }
    fclose(f);
    EXPECT(n >= 10);
    return n;
}

/* hs_client_turnaround on every unit of a live daemon, with the inputs the
 * StarPU policy gives it, against hs_turnaround over the view just read. */
static void live(const char *socket) {
    HsClient cl;
    EXPECT_STATUS(hs_client_connect("c-turnaround", socket, &cl), HS_OK);
    uint32_t n = 0;
    EXPECT_STATUS(hs_client_unit_count(cl, &n), HS_OK);
    EXPECT(n >= 2);
    const double len_ns = 2e6, ahead_ns = 3e6;
    for (uint32_t i = 0; i < n; i++) {
        HsUnitInfo info;
        HsUnitView v;
        HsTurnaround client, pure;
        EXPECT_STATUS(hs_client_unit_info(cl, i, &info), HS_OK);
        EXPECT_STATUS(hs_client_turnaround(cl, i, len_ns, 0, 0, 0, ahead_ns, &client), HS_OK);
        EXPECT_STATUS(hs_client_unit_view(cl, i, &v), HS_OK);
        HsTurnaroundInput in = {0};
        in.exec_ns = len_ns;
        in.ahead_ns = ahead_ns;
        in.slots = info.slots;
        in.load = info.is_cpu ? HS_LOAD_RUNNABLE_THREADS : HS_LOAD_VIEW;
        in.load_amount = v.runnable_threads;
        in.view = v;
        EXPECT_STATUS(hs_turnaround(&in, &pure), HS_OK);
        EXPECT(close_to(client.stretch, pure.stretch));
        EXPECT(close_to(client.ahead_ns, pure.ahead_ns));
        EXPECT(close_to(client.stretched_ns, pure.stretched_ns));
        /* What is left is the unit's dispatch cost: never negative. */
        EXPECT(client.turnaround_ns >= pure.turnaround_ns);
        EXPECT(client.ahead_ns >= ahead_ns);
        if (!info.is_cpu) {
            /* hs_client_predict_ns spreads its pending work over the streams. */
            double predicted = 0;
            double slots = info.slots ? info.slots : 1;
            EXPECT_STATUS(
                hs_client_predict_ns(cl, i, len_ns, 0, 0, 0, ahead_ns * slots, &predicted), HS_OK);
            EXPECT(close_to(predicted, client.turnaround_ns));
        }
    }
    HsTurnaround t;
    EXPECT_STATUS(hs_client_turnaround(cl, 0, NAN, 0, 0, 0, 0, &t), HS_ERR_INVALID);
    EXPECT_STATUS(hs_client_close(cl), HS_OK);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CASES_FILE [DAEMON_SOCKET]\n", argv[0]);
        return 2;
    }
    int n = table(argv[1]);
    if (argc > 2) live(argv[2]);
    else printf("test_turnaround: no daemon socket given, live part skipped\n");
    if (failures) {
        fprintf(stderr, "test_turnaround: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_turnaround: %d cases and the live views agree with the core\n", n);
    return 0;
}
