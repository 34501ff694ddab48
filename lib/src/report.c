/* report.c — the library's messages, scratch directories and clock (lib.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "milc/lib.h"
#include "milc/rt.h"

static LibSink process_sink;
static _Thread_local const LibSink *thread_sink;

void lib_set_sink(const LibSink *s) { process_sink = s ? *s : (LibSink){0}; }

const LibSink *lib_sink_push(const LibSink *s) {
    const LibSink *prev = thread_sink;
    thread_sink = s;
    return prev;
}

void lib_sink_pop(const LibSink *prev) { thread_sink = prev; }

static void vreport(int level, const char *fmt, va_list ap) {
    const LibSink *s = thread_sink ? thread_sink : &process_sink;
    if (!s->report) return;
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    s->report(s->ctx, level, msg);
}

void lib_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(MILC_MSG_ERROR, fmt, ap);
    va_end(ap);
}

void lib_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(MILC_MSG_WARNING, fmt, ap);
    va_end(ap);
}

/* ---- scratch ------------------------------------------------------------- */

static int default_make(const char *root, const char *prefix, char *out, size_t n) {
    if ((size_t)snprintf(out, n, "%s/%s-%ld-XXXXXX", root, prefix, (long)getpid()) >= n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdtemp(out) ? 0 : -1;
}

/* Everything under the directory open as fd, not following links: only a
 * tree this process made (a scratch directory) is ever removed this way. */
static void remove_under(int fd) {
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) continue;
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (sub < 0) continue;
        remove_under(sub);
        unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

static void default_remove(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0) return;
    remove_under(fd);
    rmdir(dir);
}

static LibScratch scratch = {default_make, default_remove};

void lib_set_scratch(const LibScratch *s) { scratch = s ? *s : (LibScratch){default_make, default_remove}; }
int lib_scratch_make(const char *root, const char *prefix, char *out, size_t n) {
    return scratch.make(root, prefix, out, n);
}
void lib_scratch_remove(const char *dir) { scratch.remove(dir); }

/* ---- clock and CPU ------------------------------------------------------- */

long long lib_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double lib_ms_since(long long t0) { return (double)(lib_now_ns() - t0) / 1e6; }

static int cpu = -1;

int lib_cpu(void) {
    if (cpu < 0) cpu = (int)rt_cpu_best();
    return cpu;
}

void lib_set_cpu(int c) { cpu = c; }

bool lib_parse_size(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || s[0] == '-') return false;
    int shift = 0;
    if (*end) {
        const char *units = "KMGT", *u = strchr(units, end[0] & ~0x20);
        if (!u || end[1]) return false;
        shift = 10 * (int)(u - units + 1);
    }
    if (v == 0 || v > (UINT64_MAX >> shift)) return false;
    *out = (uint64_t)v << shift;
    return true;
}
