/* wait.c — os_wait / os_wake_all: a futex on Linux, os_sync_wait_on_address
 * (macOS 14.4+) or __ulock_wait on macOS, and elsewhere (and with
 * MILC_PORTABLE_OS) a condition variable per bucket of addresses. */
#include "os_internal.h"

#if OS_LINUX
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void os_wait(_Atomic uint32_t *addr, uint32_t val) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
void os_wake_all(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

#elif OS_MACOS
/* __ulock_wait is the private call libc++ and Chromium use; macOS 14.4
 * published os_sync_wait_on_address for the same thing. */
#include <errno.h>
#if __has_include(<os/os_sync_wait_on_address.h>)
#include <os/os_sync_wait_on_address.h>
#define OS_SYNC 1
#endif
extern int __ulock_wait(uint32_t operation, void *addr, uint64_t value, uint32_t timeout_us);
extern int __ulock_wake(uint32_t operation, void *addr, uint64_t wake_value);
enum { UL_COMPARE_AND_WAIT = 1, ULF_WAKE_ALL = 0x100, ULF_NO_ERRNO = 0x1000000 };

void os_wait(_Atomic uint32_t *addr, uint32_t val) {
#ifdef OS_SYNC
    if (__builtin_available(macOS 14.4, *)) {
        os_sync_wait_on_address((void *)addr, val, 4, OS_SYNC_WAIT_ON_ADDRESS_NONE);
        return;
    }
#endif
    __ulock_wait(UL_COMPARE_AND_WAIT | ULF_NO_ERRNO, (void *)addr, val, 0);
}
void os_wake_all(_Atomic uint32_t *addr) {
#ifdef OS_SYNC
    if (__builtin_available(macOS 14.4, *)) {
        os_sync_wake_by_address_all((void *)addr, 4, OS_SYNC_WAKE_BY_ADDRESS_NONE);
        return;
    }
#endif
    __ulock_wake(UL_COMPARE_AND_WAIT | ULF_WAKE_ALL | ULF_NO_ERRNO, (void *)addr, 0);
}

#else
/* Addresses hash to buckets of a mutex and a condition variable.  A waiter
 * checks the word under its bucket's lock and sleeps releasing it; a waker
 * takes the lock before broadcasting, so a change made before os_wake_all
 * is either seen by the check or followed by the broadcast: no lost wake-up.
 * Unrelated addresses in one bucket only wake each other spuriously. */
#include <pthread.h>

enum { BUCKETS = 64 };
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
} bucket[BUCKETS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void buckets_init(void) {
    for (int i = 0; i < BUCKETS; i++) {
        pthread_mutex_init(&bucket[i].mu, NULL);
        pthread_cond_init(&bucket[i].cv, NULL);
    }
}

static unsigned bucket_of(const void *addr) { return (unsigned)(((uintptr_t)addr >> 2) * 2654435761u >> 26) % BUCKETS; }

void os_wait(_Atomic uint32_t *addr, uint32_t val) {
    pthread_once(&once, buckets_init);
    unsigned b = bucket_of(addr);
    pthread_mutex_lock(&bucket[b].mu);
    if (atomic_load(addr) == val) pthread_cond_wait(&bucket[b].cv, &bucket[b].mu);
    pthread_mutex_unlock(&bucket[b].mu);
}

void os_wake_all(_Atomic uint32_t *addr) {
    pthread_once(&once, buckets_init);
    unsigned b = bucket_of(addr);
    pthread_mutex_lock(&bucket[b].mu);
    pthread_cond_broadcast(&bucket[b].cv);
    pthread_mutex_unlock(&bucket[b].mu);
}
#endif
