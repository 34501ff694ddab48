/* fuzz_url.c — libFuzzer target: a --remote URL (redis:// or unix://) as the
 * CLI hands it to remote_url_parse.  A URL is accepted with fields that name
 * exactly one endpoint (a host and port, or an absolute socket path that fits
 * a sockaddr_un), each string NUL-terminated inside its field and free of
 * control characters; or refused with CACHE_EINVAL and a sentence. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "milc/remote.h"

static void check_text(const char *s, size_t cap) {
    size_t n = strnlen(s, cap);
    if (n == cap) abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *url = malloc(size + 1);
    if (!url) return 0;
    memcpy(url, data, size);
    url[size] = 0;
    RemoteUrl u;
    char err[600] = "";
    int rc = remote_url_parse(url, &u, err, sizeof err);
    if (rc != 0) {
        if (rc != CACHE_EINVAL || !strstr(err, "malformed remote URL")) abort();
    } else {
        check_text(u.user, sizeof u.user), check_text(u.pass, sizeof u.pass);
        check_text(u.host, sizeof u.host), check_text(u.path, sizeof u.path);
        int sock = u.path[0] != 0;
        if (sock ? u.path[0] != '/' || !u.path[1] || u.host[0] || u.port : !u.host[0] || u.port < 1 || u.port > 65535)
            abort();
        if (u.db < 0 || u.db > 65535 || (u.user[0] && !u.pass[0])) abort();
    }
    free(url);
    return 0;
}
