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
#include "json.h"
#include "milc/cache.h"
#include "milc/osfile.h"

void cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("milc: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void cli_cache_error(int rc, const char *msg) {
    if (rc == CACHE_ECORRUPT)
        cli_error("%s; run `milc cache clear` to start the cache afresh", *msg ? msg : cache_strerror(rc));
    else
        cli_error("%s", *msg ? msg : cache_strerror(rc));
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
        cli_json_diags(stdout, d);
    } else if (!(cli->verbosity < 0 && rc == EXIT_OK)) {
        char *s = diag_render(d);
        if (s) {
            fputs(s, stderr);
            free(s);
        }
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

/* Length of the well-formed UTF-8 sequence at s that is not a C1 control
 * (U+0080..U+009F), or 0. */
static int utf8_printable(const unsigned char *s) {
    int n = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    uint32_t cp = n == 2   ? (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F)
                  : n == 3 ? (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F)
                  : n == 4 ? (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 |
                                 (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F)
                           : 0;
    /* Overlong forms, surrogates and beyond U+10FFFF are not UTF-8. */
    if (!n || cp < 0xA0 || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

void cli_print_text(FILE *f, const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    while (s && *s) {
        int n = *s >= 0x80 ? utf8_printable(s) : 0;
        if (n)
            fwrite(s, 1, (size_t)n, f), s += n;
        else if (*s >= 0x20 && *s < 0x7F && *s != '\\')
            fputc(*s++, f);
        else {
            const char *e = *s == '\n'   ? "\\n"
                            : *s == '\r' ? "\\r"
                            : *s == '\t' ? "\\t"
                            : *s == 0x1B ? "\\e"
                            : *s == '\\' ? "\\\\"
                                         : NULL;
            if (e)
                fputs(e, f);
            else
                fprintf(f, "\\x%02x", *s);
            s++;
        }
    }
}
