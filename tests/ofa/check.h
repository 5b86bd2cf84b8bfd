/* The checks of uwarp's C tests of libibverbs and librdmacm: each counts, and a failure prints
 * the file, the line and what was found; main() reports the counts. Each test program includes
 * it once (the counters are its own). */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int failures;
static int checks;

#define CHECK(cond)                                                            \
  do {                                                                         \
    ++checks;                                                                  \
    if (!(cond)) {                                                             \
      ++failures;                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

/* A call that fails with an errno-valued result. */
#define CHECK_ERR(expr, want)                                                                      \
  do {                                                                                             \
    int got_ = (expr);                                                                             \
    ++checks;                                                                                      \
    if (got_ != (want)) {                                                                          \
      ++failures;                                                                                  \
      fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s)\n", __FILE__, __LINE__, #expr, \
              got_, strerror(got_), (want), strerror(want));                                       \
    }                                                                                              \
  } while (0)

/* A call that returns NULL and sets errno. */
#define CHECK_NULL_ERRNO(expr, want)                                                              \
  do {                                                                                            \
    errno = 0;                                                                                    \
    void* p_ = (void*)(expr);                                                                     \
    int e_ = errno;                                                                               \
    ++checks;                                                                                     \
    if (p_ != NULL || e_ != (want)) {                                                             \
      ++failures;                                                                                 \
      fprintf(stderr, "%s:%d: %s gave %p errno %d (%s), expected NULL errno %d (%s)\n", __FILE__, \
              __LINE__, #expr, p_, e_, strerror(e_), (want), strerror(want));                     \
    }                                                                                             \
  } while (0)

/* A call that returns -1 and sets errno. */
#define CHECK_ERRNO(expr, want)                                                                 \
  do {                                                                                          \
    errno = 0;                                                                                  \
    int got_ = (expr);                                                                          \
    int err_ = errno;                                                                           \
    ++checks;                                                                                   \
    if (got_ != -1 || err_ != (want)) {                                                         \
      ++failures;                                                                               \
      fprintf(stderr, "%s:%d: %s returned %d, errno %d (%s), expected -1 with errno %d (%s)\n", \
              __FILE__, __LINE__, #expr, got_, err_, strerror(err_), (want), strerror(want));   \
    }                                                                                           \
  } while (0)
