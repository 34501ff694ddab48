/* util.c — the container module's tables (dtypes, opsets) and file helpers.
 * Files here are untrusted: every read is bounded before it is allocated. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pkg_internal.h"

static const struct {
    IrDType ir;
    Cml__DataType cml;
} dtypes[] = {
    {IR_DT_BOOL, CML__DATA_TYPE__BOOL},     {IR_DT_STRING, CML__DATA_TYPE__STRING},
    {IR_DT_FP16, CML__DATA_TYPE__FLOAT16},  {IR_DT_FP32, CML__DATA_TYPE__FLOAT32},
    {IR_DT_FP64, CML__DATA_TYPE__FLOAT64},  {IR_DT_INT8, CML__DATA_TYPE__INT8},
    {IR_DT_INT16, CML__DATA_TYPE__INT16},   {IR_DT_INT32, CML__DATA_TYPE__INT32},
    {IR_DT_INT64, CML__DATA_TYPE__INT64},   {IR_DT_INT4, CML__DATA_TYPE__INT4},
    {IR_DT_UINT8, CML__DATA_TYPE__UINT8},   {IR_DT_UINT16, CML__DATA_TYPE__UINT16},
    {IR_DT_UINT32, CML__DATA_TYPE__UINT32}, {IR_DT_UINT64, CML__DATA_TYPE__UINT64},
    {IR_DT_UINT4, CML__DATA_TYPE__UINT4},   {IR_DT_UINT2, CML__DATA_TYPE__UINT2},
    {IR_DT_UINT1, CML__DATA_TYPE__UINT1},   {IR_DT_UINT6, CML__DATA_TYPE__UINT6},
    {IR_DT_UINT3, CML__DATA_TYPE__UINT3},
};

bool pkg_dtype_to_cml(IrDType dt, Cml__DataType *out) {
    for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
        if (dtypes[i].ir == dt) {
            *out = dtypes[i].cml;
            return true;
        }
    return false;
}

bool pkg_dtype_from_cml(Cml__DataType t, IrDType *out) {
    for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
        if (dtypes[i].cml == t) {
            *out = dtypes[i].ir;
            return true;
        }
    return false;
}

/* MIL text names an opset by OS release, the spec by Core ML version. */
static const char *const opsets[][2] = {
    {"ios15", "CoreML5"},
    {"ios16", "CoreML6"},
    {"ios17", "CoreML7"},
    {"ios18", "CoreML8"},
};

const char *pkg_opset_to_cml(const char *opset) {
    for (size_t i = 0; i < sizeof opsets / sizeof *opsets; i++)
        if (strcmp(opsets[i][0], opset) == 0) return opsets[i][1];
    return NULL;
}

const char *pkg_opset_from_cml(const char *cml) {
    for (size_t i = 0; i < sizeof opsets / sizeof *opsets; i++)
        if (strcmp(opsets[i][1], cml) == 0) return opsets[i][0];
    return NULL;
}

int pkg_spec_version(const char *opset) {
    for (size_t i = 0; i < sizeof opsets / sizeof *opsets; i++)
        if (strcmp(opsets[i][0], opset) == 0) return 6 + (int)i;
    return 0;
}

char *pkg_read_file(DiagSink *d, const char *path, size_t max, size_t *len) {
    SrcLoc at = {diag_intern(d, path), 0, 0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            diag_error(d, at, "missing: %s", strerror(errno));
        else
            diag_syserror(d, at, "cannot read: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
        diag_error(d, at, S_ISREG(st.st_mode) ? "file too large (%lld bytes, at most %zu)" : "not a regular file",
                   (long long)st.st_size, max);
        close(fd);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != (size_t)st.st_size) {
        diag_syserror(d, at, "cannot read: %s", buf ? "short read" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[got] = 0;
    *len = got;
    return buf;
}

int pkg_write_bytes(DiagSink *d, const char *path, const void *data, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    size_t done = 0;
    while (fd >= 0 && done < len) {
        ssize_t w = write(fd, (const char *)data + done, len - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    if (fd < 0 || done != len || close(fd) != 0) {
        diag_syserror(d, pkg_at(d, path), "cannot write: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int pkg_copy_file(DiagSink *d, const char *src, const char *dst) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    struct stat st;
    int rc = -1;
    if (in >= 0 && out >= 0 && fstat(in, &st) == 0) {
        /* In-kernel copy: the weights never pass through user memory (and a
         * file system that shares extents shares them). */
        off_t left = st.st_size;
        while (left > 0) {
            ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
            if (n <= 0) break;
            left -= n;
        }
        if (left > 0) { /* no copy_file_range here: plain reads and writes */
            char buf[1 << 16];
            ssize_t n;
            while (left > 0 && (n = read(in, buf, sizeof buf)) > 0)
                if (write(out, buf, (size_t)n) != n)
                    break;
                else
                    left -= n;
        }
        rc = left == 0 ? 0 : -1;
    }
    int err = errno;
    if (in >= 0) close(in);
    if (out >= 0 && close(out) != 0) rc = -1;
    if (rc != 0) diag_syserror(d, pkg_at(d, dst), "cannot copy %s: %s", src, strerror(err));
    return rc;
}

int pkg_make_dirs(DiagSink *d, const char *root, const char *rel) {
    char path[4096];
    size_t n = (size_t)snprintf(path, sizeof path, "%s/", root);
    for (const char *p = rel; *p && n < sizeof path - 1; p++) {
        if (*p == '/') {
            path[n] = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST) {
                diag_syserror(d, pkg_at(d, path), "cannot create: %s", strerror(errno));
                return -1;
            }
        }
        path[n++] = *p;
    }
    return 0;
}

bool pkg_safe_string(const char *s) {
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\') return false;
    return true;
}

bool pkg_identifier(const char *s) {
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) return false;
    for (s++; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}
