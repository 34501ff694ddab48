/* test_os.c — the OS layer (os/include/milc/ossys.h) in whichever flavour
 * this build has: a sleeper on a word wakes when it changes, the executable
 * path names this test, the boot identity is stable, huge-page and small-page
 * memory is zeroed and usable, and discarded pages read as zeros again.  CI runs it on Linux as built and with
 * -DMILC_PORTABLE_OS=ON (the POSIX fallbacks). */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "milc/ossys.h"
#include "test.h"

static _Atomic uint32_t word, woke;

static void *sleeper(void *arg) {
    while (atomic_load(&word) == 0) os_wait(&word, 0);
    atomic_store(&woke, 1);
    return arg;
}

/* A sleeper (blocked or about to be) wakes when the word changes: no lost
 * wake-up between its check and its sleep.  Many rounds, to meet the race. */
/* The CPUs a process may use: at least one, and on Linux its affinity mask,
 * so a process pinned to one CPU sizes its thread pools for one. */
TEST(cpu_count) {
    CHECK(os_cpu_count() >= 1);
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t all;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
    if (strcmp(os_flavour(), "linux") == 0) CHECK(os_cpu_count() == CPU_COUNT(&all));
    pid_t pid = fork();
    if (pid == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &all)) {
                CPU_SET(c, &one);
                break;
            }
        _exit(sched_setaffinity(0, sizeof one, &one) != 0 ? 2 : strcmp(os_flavour(), "linux") ? 0
                                                              : os_cpu_count() == 1 ? 0 : 1);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
#endif
}

TEST(wait_wake) {
    for (int round = 0; round < 200; round++) {
        atomic_store(&word, 0), atomic_store(&woke, 0);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, sleeper, NULL) == 0);
        if (round % 2) usleep(200); /* half the rounds: the sleeper is asleep by now */
        atomic_store(&word, 1);
        os_wake_all(&word);
        pthread_join(t, NULL);
        CHECK(atomic_load(&woke) == 1);
    }
    /* a wait on a word that already differs returns at once */
    atomic_store(&word, 5);
    os_wait(&word, 4);
    CHECK(1);
}

TEST(exe_and_boot) {
    char p[4096], b1[128], b2[128];
    if (!strcmp(os_flavour(), "posix")) {
        CHECK(os_exe_path(p, sizeof p) == -1 && os_boot_id(b1, sizeof b1) == -1);
        return;
    }
    CHECK(os_exe_path(p, sizeof p) == 0 && p[0] == '/' && strstr(p, "test_os") != NULL);
    CHECK(os_exe_path(p, 4) == -1); /* too small is an error, not a cut path */
    CHECK(os_boot_id(b1, sizeof b1) == 0 && os_boot_id(b2, sizeof b2) == 0 && !strcmp(b1, b2) && strlen(b1) > 8);
}

TEST(huge_alloc) {
    size_t len = 0;
    unsigned char *p = os_huge_alloc(5 << 20, &len);
    CHECK(p != NULL && len >= (5u << 20) && (uintptr_t)p % (2u << 20) == 0);
    if (!p) return;
    size_t nonzero = 0;
    for (size_t i = 0; i < len; i += 4096) nonzero += p[i] != 0;
    CHECK(nonzero == 0);
    memset(p, 0xab, len);
    os_huge_free(p, len);
}

TEST(page_alloc) {
    size_t len = 0, odd = (3u << 20) + 5;
    unsigned char *p = os_page_alloc(odd, &len);
    CHECK(p != NULL && len >= odd && (uintptr_t)p % 4096 == 0);
    if (!p) return;
    size_t nonzero = 0;
    for (size_t i = 0; i < len; i++) nonzero += p[i] != 0;
    CHECK(nonzero == 0);
    memset(p, 0xab, len);
    /* The whole pages inside [1 MB + 1, 2 MB + 1) go back: they read as zeros,
     * the partial pages at either end keep their bytes. */
    os_mem_discard(p + (1u << 20) + 1, 1u << 20);
    CHECK(p[(1u << 20) + 4095] == 0xab && p[(1u << 20) + 4096] == 0 && p[(2u << 20) - 1] == 0);
    CHECK(p[2u << 20] == 0xab && p[len - 1] == 0xab);
    os_huge_free(p, len);
}

/* Resident bytes of this process (Linux's /proc/self/statm), 0 if unknown
 * (or meaningless: under an emulator the host's kernel holds the pages). */
static size_t resident(void) {
#ifdef MILC_TEST_EMULATED
    return 0;
#else
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    if (!f) return 0;
    if (fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
    fclose(f);
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
#endif
}

/* A reservation costs address space only; os_populate faults in the piece
 * it is given, zeroed and writable, and nothing beyond it. */
TEST(reserve_and_populate) {
    const size_t len = (size_t)1 << 30, piece = 8u << 20;
    size_t r0 = resident();
    unsigned char *p = os_reserve(len);
    CHECK(p != NULL);
    if (!p) return;
    size_t r1 = resident();
    CHECK(!r0 || r1 < r0 + (16u << 20));
    os_populate(p + 100, piece);
    size_t r2 = resident();
    CHECK(!r0 || (r2 >= r1 + piece - 4096 && r2 < r1 + piece + (8u << 20)));
    size_t nonzero = 0;
    for (size_t i = 100; i < 100 + piece; i += 4096) nonzero += p[i] != 0;
    CHECK(nonzero == 0);
    memset(p + 100, 0x5a, piece);
    /* a populate over bytes already written keeps them, as madvise's does (the
     * portable fallback wrote zeros), and reaches the last page it covers */
    os_populate(p + 100 + piece - 1, 3 * 4096);
    CHECK(p[100 + piece - 1] == 0x5a && p[100] == 0x5a);
    CHECK(p[100 + piece + 3 * 4096 - 2] == 0);
    os_unreserve(p, len);
}

int main(void) {
    RUN(cpu_count);
    RUN(wait_wake);
    RUN(exe_and_boot);
    RUN(huge_alloc);
    RUN(page_alloc);
    RUN(reserve_and_populate);
    TEST_MAIN_END();
}
