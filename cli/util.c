/* util.c — the CLI's output, file and clock helpers. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "milc/osfile.h"

void cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("milc: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "milc %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'milc help %s'.\n", cmd);
    va_end(ap);
}

int cli_report(const Cli *cli, DiagSink *d) {
    int rc = d->system_errors ? EXIT_SYSTEM : diag_failed(d) ? EXIT_INPUT : EXIT_OK;
    if (d->count == 0 && !d->truncated) return rc;
    if (cli->json) {
        char *s = diag_render_json(d);
        if (s) { fprintf(stdout, "{\"diagnostics\":%s}\n", s); free(s); }
    } else if (!(cli->verbosity < 0 && rc == EXIT_OK)) {
        char *s = diag_render(d);
        if (s) { fputs(s, stderr); free(s); }
    }
    return rc;
}

char *cli_read_file(const char *path, size_t *len) {
    /* Never blocks on a FIFO, and reads into owned memory (a file truncated
     * meanwhile is an error, not a SIGBUS). */
    void *buf;
    size_t n;
    char err[600];
    int fd, rc = os_open_input(path, OS_REG, &fd, err, sizeof err);
    if (rc && rc != -EINVAL) cli_error("cannot open '%s': %s", path, strerror(-rc));
    if (rc == -EINVAL) cli_error("%s", err);
    if (rc) return NULL;
    rc = os_read_fd(fd, path, 0, &buf, &n, err, sizeof err);
    close(fd);
    if (rc) {
        cli_error("%s", err);
        return NULL;
    }
    if (len) *len = n;
    return buf;
}

int cli_write_file(const char *path, const void *data, size_t len) {
    char err[600];
    if (os_publish_file(path, data, len, 0666, err, sizeof err) == 0) return 0;
    cli_error("%s", err);
    return -1;
}

long long cli_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double cli_ms_since(long long t0) { return (double)(cli_now_ns() - t0) / 1e6; }

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void cli_rm_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }
