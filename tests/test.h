/* test.h — a minimal unit-test harness: TEST(name) functions registered in
 * main via RUN(name); CHECK* record a failure with file:line and go on.
 * The closing line is "N passed, N failed" so any runner can read it. */
#ifndef MILC_TEST_H
#define MILC_TEST_H

#include <stdio.h>
#include <string.h>
#include <stdlib.h>

static int test_failures_;
static int test_cur_failed_;
static int test_passed_, test_failed_;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                                   \
            test_failures_++;                                                                                          \
            test_cur_failed_ = 1;                                                                                      \
        }                                                                                                              \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                                             \
    do {                                                                                                               \
        long long a_ = (long long)(a), b_ = (long long)(b);                                                            \
        if (a_ != b_) {                                                                                                \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, a_, b_);             \
            test_failures_++;                                                                                          \
            test_cur_failed_ = 1;                                                                                      \
        }                                                                                                              \
    } while (0)

#define CHECK_STR(a, b)                                                                                                \
    do {                                                                                                               \
        const char *a_ = (a), *b_ = (b);                                                                               \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed:\n--- got\n%s\n--- want\n%s\n", __FILE__, __LINE__, #a, #b,        \
                    a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                                           \
            test_failures_++;                                                                                          \
            test_cur_failed_ = 1;                                                                                      \
        }                                                                                                              \
    } while (0)

#define TEST(name) static void test_##name(void)
#define RUN(name)                                                                                                      \
    do {                                                                                                               \
        test_cur_failed_ = 0;                                                                                          \
        test_##name();                                                                                                 \
        if (test_cur_failed_) {                                                                                        \
            test_failed_++;                                                                                            \
            fprintf(stderr, "FAIL %s\n", #name);                                                                       \
        } else                                                                                                         \
            test_passed_++;                                                                                            \
    } while (0)
#define TEST_MAIN_END()                                                                                                \
    do {                                                                                                               \
        printf("%d passed, %d failed\n", test_passed_, test_failed_);                                                  \
        return test_failed_ ? 1 : 0;                                                                                   \
    } while (0)

#endif
