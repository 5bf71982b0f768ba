/* The C tests' checks: a failed one is reported with the library's last
 * error and counted in `failures`; each test program is one file. */
#ifndef HS_TEST_EXPECT_H
#define HS_TEST_EXPECT_H

#include <hetsched.h>
#include <stdio.h>
#include <string.h>

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
static inline int error_mentions(const char *word) {
    const char *e = hs_last_error();
    return e && strstr(e, word);
}

#endif
