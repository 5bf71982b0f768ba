/* hetsched scheduling policy for StarPU 1.3 (libhetsched_starpu.so).
 *
 * Use it one of two ways:
 *  - unmodified applications: LD_PRELOAD=libhetsched_starpu.so with
 *    STARPU_SCHED=hetsched (see README.md);
 *  - in code: conf.sched_policy = hetsched_starpu_policy(); before starpu_init. */
#ifndef HETSCHED_STARPU_H
#define HETSCHED_STARPU_H

#include <starpu.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The policy (init/deinit, push/pop, add/remove workers, exec hooks). */
struct starpu_sched_policy *hetsched_starpu_policy(void);

#ifdef __cplusplus
}
#endif

#endif
