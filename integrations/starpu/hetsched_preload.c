/* Selects the hetsched policy in unmodified StarPU applications: when this
 * library is preloaded and STARPU_SCHED=hetsched, starpu_init and
 * starpu_initialize hand StarPU our policy through starpu_conf.sched_policy
 * (StarPU 1.3 cannot load an external policy by name). With any other
 * STARPU_SCHED they pass straight through. */
#define _GNU_SOURCE
#include "hetsched_starpu.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*initialize_fn)(struct starpu_conf *, int *, char ***);

static int wanted(void) {
    const char *s = getenv("STARPU_SCHED");
    return s && strcmp(s, "hetsched") == 0;
}

int starpu_initialize(struct starpu_conf *user_conf, int *argc, char ***argv) {
    initialize_fn real = (initialize_fn)dlsym(RTLD_NEXT, "starpu_initialize");
    if (!real) {
        fprintf(stderr, "hetsched-starpu: libstarpu's starpu_initialize not found: %s\n",
                dlerror());
        return -ENOSYS;
    }
    if (!wanted()) return real(user_conf, argc, argv);
    /* StarPU copies the configuration, so a local one is enough. */
    struct starpu_conf conf;
    if (user_conf) conf = *user_conf;
    else starpu_conf_init(&conf);
    /* Keep StarPU from looking up "hetsched" among its own policies. */
    conf.sched_policy_name = NULL;
    conf.sched_policy = hetsched_starpu_policy();
    /* StarPU would still look the name up and warn that it does not know
     * it: hide it for the call (single-threaded: this is start-up). */
    char *saved = strdup(getenv("STARPU_SCHED"));
    unsetenv("STARPU_SCHED");
    int rc = real(&conf, argc, argv);
    if (saved) {
        setenv("STARPU_SCHED", saved, 1);
        free(saved);
    }
    return rc;
}

int starpu_init(struct starpu_conf *conf) { return starpu_initialize(conf, NULL, NULL); }
