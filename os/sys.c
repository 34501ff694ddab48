/* sys.c — executable path, boot identity, huge-page memory and early
 * writeback, per OS, each with a POSIX fallback (taken everywhere under
 * MILC_OS_PORTABLE). */
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "os_internal.h"

#if OS_MACOS
#include <mach-o/dyld.h>
#include <sys/sysctl.h>
#include <sys/time.h>
#endif

#if !defined(MAP_ANONYMOUS) && defined(MAP_ANON)
#define MAP_ANONYMOUS MAP_ANON
#endif

void os_start_writeback(int fd, uint64_t off, uint64_t len) {
#if OS_LINUX && defined(SYNC_FILE_RANGE_WRITE)
    (void)sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd, (void)off, (void)len;
#endif
}

int os_cpu_count(void) {
#if OS_LINUX && defined(CPU_COUNT)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4096 ? 4096 : (int)n;
}

const char *os_flavour(void) { return OS_LINUX ? "linux" : OS_MACOS ? "macos" : "posix"; }

int os_exe_path(char *buf, size_t size) {
    if (!size) return -1;
#if OS_LINUX
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    if (n <= 0 || (size_t)n >= size - 1) return -1;
    buf[n] = 0;
    return 0;
#elif OS_MACOS
    char raw[4096], real[PATH_MAX];
    uint32_t n = sizeof raw;
    if (_NSGetExecutablePath(raw, &n) != 0 || !realpath(raw, real) || strlen(real) >= size) return -1;
    memcpy(buf, real, strlen(real) + 1);
    return 0;
#else
    /* POSIX has no such call: the caller falls back to what it knows */
    (void)buf;
    return -1;
#endif
}

int os_boot_id(char *buf, size_t size) {
#if OS_LINUX
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return -1;
    int ok = fgets(buf, (int)size, f) != NULL && strlen(buf) >= 32;
    fclose(f);
    return ok ? 0 : -1;
#elif OS_MACOS
    struct timeval tv;
    size_t len = sizeof tv;
    if (sysctlbyname("kern.boottime", &tv, &len, NULL, 0) != 0) return -1;
    return snprintf(buf, size, "boottime %lld.%06ld", (long long)tv.tv_sec, (long)tv.tv_usec) < (int)size ? 0 : -1;
#else
    (void)buf, (void)size;
    return -1;
#endif
}

void os_huge_hint(void *p, size_t len) {
#if OS_LINUX && defined(MADV_HUGEPAGE)
    madvise(p, len, MADV_HUGEPAGE); /* a hint: refusal changes nothing */
#else
    (void)p, (void)len;
#endif
}

enum { HUGE = 2 << 20 };
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Every page of [p, p + l) faulted in, zeroed. */
static void populate(void *p, size_t l) {
#if OS_LINUX
    if (madvise(p, l, MADV_POPULATE_WRITE) == 0) return;
#endif
    memset(p, 0, l); /* faults every page in now, not in the first use */
}

/* Small pages on purpose: on a VM that backs guest memory lazily, huge pages
 * come from memory the guest never used, and faulting 200 MB of them in took
 * 0.71 s of CPU (0.07 s in small pages the kernel recycles); a cold build
 * asks for new weight memory for every program. */
void *os_page_alloc(size_t n, size_t *len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), l = (n + page - 1) & ~(page - 1);
    void *p = mmap(NULL, l ? l : page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    *len = l ? l : page;
    return p;
}

void *os_huge_alloc(size_t n, size_t *len) {
    size_t l = (n + HUGE - 1) & ~(size_t)(HUGE - 1);
    unsigned char *raw = mmap(NULL, l + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    /* on a 2 MB boundary, so every page of it can be a huge page */
    unsigned char *p = (unsigned char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    if (raw + HUGE > p) munmap(p + l, (size_t)(raw + HUGE - p));
    os_huge_hint(p, l);
    populate(p, l);
    *len = l;
    return p;
}

void *os_reserve(size_t len) {
#ifdef MAP_NORESERVE
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
#else
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#endif
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return NULL;
    os_huge_hint(p, len);
    return p;
}

void os_populate(void *p, size_t n) {
    if (n == 0) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
#if OS_LINUX
    uintptr_t off = (uintptr_t)p & (page - 1);
    if (madvise((unsigned char *)p - off, n + off, MADV_POPULATE_WRITE) == 0) return;
#endif
    /* One write a page, of the byte already there, so the fallback changes no
     * byte it covers (madvise's populate does not either); and the last byte,
     * whose page steps of a page from an unaligned start can stop short of. */
    volatile unsigned char *v = p;
    for (size_t i = 0; i < n; i += page) v[i] = v[i];
    v[n - 1] = v[n - 1];
}

void os_unreserve(void *p, size_t len) {
    if (p) munmap(p, len);
}

void os_mem_discard(void *p, size_t len) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + len) & ~(page - 1);
    if (b <= a) return;
#if OS_LINUX && defined(MADV_DONTNEED)
    if (madvise((void *)a, b - a, MADV_DONTNEED) == 0) return;
#endif
    /* A fresh anonymous mapping over the range drops its pages anywhere;
     * untouched, it costs nothing.  A refusal only keeps the memory. */
    mmap((void *)a, b - a, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
}

void os_huge_free(void *p, size_t len) {
    if (p) munmap(p, len);
}
