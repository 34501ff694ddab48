/* npy.c — strict .npy reader and numpy-identical writer (see milc/npy.h).
 * The header is a Python dict literal; only the exact subset numpy writes
 * (plus harmless spacing and quote variants) is accepted, so a hostile file
 * cannot steer the parser anywhere interesting. */
#include "milc/npy.h"
#include "milc/osfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *descr, *name;
    size_t size;
} dtypes[NPY_DTYPE_COUNT] = {
    [NPY_DTYPE_BOOL] = {"|b1", "bool", 1},  [NPY_DTYPE_I8] = {"|i1", "int8", 1},
    [NPY_DTYPE_U8] = {"|u1", "uint8", 1},   [NPY_DTYPE_I16] = {"<i2", "int16", 2},
    [NPY_DTYPE_U16] = {"<u2", "uint16", 2}, [NPY_DTYPE_I32] = {"<i4", "int32", 4},
    [NPY_DTYPE_U32] = {"<u4", "uint32", 4}, [NPY_DTYPE_I64] = {"<i8", "int64", 8},
    [NPY_DTYPE_U64] = {"<u8", "uint64", 8}, [NPY_DTYPE_F16] = {"<f2", "fp16", 2},
    [NPY_DTYPE_F32] = {"<f4", "fp32", 4},   [NPY_DTYPE_F64] = {"<f8", "fp64", 8},
};

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

size_t npy_dtype_size(NpyDType t) { return (unsigned)t < NPY_DTYPE_COUNT ? dtypes[t].size : 0; }
const char *npy_dtype_descr(NpyDType t) { return (unsigned)t < NPY_DTYPE_COUNT ? dtypes[t].descr : NULL; }
const char *npy_dtype_name(NpyDType t) { return (unsigned)t < NPY_DTYPE_COUNT ? dtypes[t].name : NULL; }

const char *npy_strerror(int status) {
    switch (status) {
    case NPY_OK: return "success";
    case NPY_EFORMAT: return "invalid .npy file";
    case NPY_EUNSUPPORTED: return "unsupported .npy array";
    case NPY_EIO: return "I/O error";
    case NPY_ENOMEM: return "out of memory";
    case NPY_EINVAL: return "invalid argument";
    default: return "unknown error";
    }
}

static int fail(int status, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(int status, char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* ---------------------------------------------------------------- reader */

/* A cursor over the header dict; pos is reported as a file offset. */
typedef struct Cursor {
    const char *p, *end;
    size_t base; /* file offset of the header's first byte */
    const char *start;
} Cursor;

static size_t cur_off(const Cursor *c) { return c->base + (size_t)(c->p - c->start); }

static void skip_ws(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

static bool eat(Cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes; copies at most cap - 1 bytes. */
static bool parse_str(Cursor *c, char *out, size_t cap) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap) return false;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end) return false;
    c->p++;
    out[n] = 0;
    return true;
}

static bool parse_word(Cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return false;
    c->p += n;
    return true;
}

static const char *show(const Cursor *c) { return c->p < c->end ? "unexpected character" : "unexpected end of header"; }

int npy_read(const void *bytes, size_t n, NpyArray *out, char *err, size_t errlen) {
    const uint8_t *b = bytes;
    memset(out, 0, sizeof *out);
    if (n < 10) return fail(NPY_EFORMAT, err, errlen, "too short for a .npy file (%zu bytes)", n);
    if (memcmp(b, MAGIC, 6) != 0) return fail(NPY_EFORMAT, err, errlen, "bad magic (not a .npy file)");
    unsigned major = b[6], minor = b[7];
    size_t hdr_at, hdr_len;
    if (major == 1 && minor == 0) {
        hdr_at = 10;
        hdr_len = (size_t)b[8] | (size_t)b[9] << 8;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (n < 12) return fail(NPY_EFORMAT, err, errlen, "too short for a version %u.0 header (%zu bytes)", major, n);
        hdr_at = 12;
        hdr_len = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    } else {
        return fail(NPY_EUNSUPPORTED, err, errlen, "unsupported .npy version %u.%u", major, minor);
    }
    if (hdr_len > n - hdr_at)
        return fail(NPY_EFORMAT, err, errlen, "header of %zu bytes runs past the end of the file (%zu bytes)", hdr_len,
                    n);
    Cursor c = {(const char *)b + hdr_at, (const char *)b + hdr_at + hdr_len, hdr_at, (const char *)b + hdr_at};
    /* The header ends with '\n' (numpy pads with spaces before it). */
    if (hdr_len == 0 || c.end[-1] != '\n') return fail(NPY_EFORMAT, err, errlen, "header does not end with a newline");
    c.end--;

    char descr[32] = "";
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    if (!eat(&c, '{')) return fail(NPY_EFORMAT, err, errlen, "offset %zu: header: expected '{'", cur_off(&c));
    while (!eat(&c, '}')) {
        char key[32];
        size_t key_at = (skip_ws(&c), cur_off(&c));
        if (!parse_str(&c, key, sizeof key))
            return fail(NPY_EFORMAT, err, errlen, "offset %zu: header: expected a quoted key or '}'", key_at);
        if (!eat(&c, ':')) return fail(NPY_EFORMAT, err, errlen, "offset %zu: header: expected ':'", cur_off(&c));
        bool *seen;
        if (strcmp(key, "descr") == 0) {
            seen = &have_descr;
            size_t at = (skip_ws(&c), cur_off(&c));
            if (!parse_str(&c, descr, sizeof descr))
                return fail(NPY_EUNSUPPORTED, err, errlen, "offset %zu: header: 'descr' must be a simple dtype string",
                            at);
        } else if (strcmp(key, "fortran_order") == 0) {
            seen = &have_order;
            if (parse_word(&c, "False"))
                fortran = false;
            else if (parse_word(&c, "True"))
                fortran = true;
            else
                return fail(NPY_EFORMAT, err, errlen, "offset %zu: header: 'fortran_order' must be True or False",
                            cur_off(&c));
        } else if (strcmp(key, "shape") == 0) {
            seen = &have_shape;
            if (!eat(&c, '('))
                return fail(NPY_EFORMAT, err, errlen, "offset %zu: header: 'shape' must be a tuple", cur_off(&c));
            int rank = 0;
            bool comma = true; /* a dimension may follow */
            while (!eat(&c, ')')) {
                skip_ws(&c);
                if (!comma || c.p >= c.end || *c.p < '0' || *c.p > '9')
                    return fail(NPY_EFORMAT, err, errlen, "offset %zu: header: bad 'shape' tuple: %s", cur_off(&c),
                                show(&c));
                if (rank == NPY_MAX_RANK)
                    return fail(NPY_EUNSUPPORTED, err, errlen, "shape has more than %d dimensions", NPY_MAX_RANK);
                uint64_t v = 0;
                while (c.p < c.end && *c.p >= '0' && *c.p <= '9') {
                    unsigned digit = (unsigned)(*c.p - '0');
                    if (v > ((uint64_t)INT64_MAX - digit) / 10)
                        return fail(NPY_EFORMAT, err, errlen, "offset %zu: header: dimension too large", cur_off(&c));
                    v = v * 10 + digit;
                    c.p++;
                }
                out->dims[rank++] = (int64_t)v;
                comma = eat(&c, ',');
            }
            /* (3) is the integer 3 in Python, not a tuple: rank 1 needs (3,). */
            if (rank == 1 && !comma)
                return fail(NPY_EFORMAT, err, errlen,
                            "header: 'shape' (%" PRId64 ") is not a tuple; want (%" PRId64 ",)", out->dims[0],
                            out->dims[0]);
            out->rank = rank;
        } else {
            return fail(NPY_EFORMAT, err, errlen, "offset %zu: header: unknown key '%s'", key_at, key);
        }
        if (*seen) return fail(NPY_EFORMAT, err, errlen, "offset %zu: header: duplicate key '%s'", key_at, key);
        *seen = true;
        if (!eat(&c, ',')) {
            if (!eat(&c, '}'))
                return fail(NPY_EFORMAT, err, errlen, "offset %zu: header: expected ',' or '}'", cur_off(&c));
            break;
        }
    }
    skip_ws(&c);
    if (c.p != c.end) return fail(NPY_EFORMAT, err, errlen, "offset %zu: header: text after the dict", cur_off(&c));
    if (!have_descr || !have_order || !have_shape)
        return fail(NPY_EFORMAT, err, errlen, "header: missing '%s'",
                    !have_descr   ? "descr"
                    : !have_order ? "fortran_order"
                                  : "shape");

    int dt = -1;
    for (int i = 0; i < NPY_DTYPE_COUNT; i++) {
        const char *d = dtypes[i].descr;
        /* One-byte types carry no byte order: numpy writes '|', '<' is equivalent. */
        if (strcmp(descr, d) == 0 || (d[0] == '|' && descr[0] == '<' && strcmp(descr + 1, d + 1) == 0)) dt = i;
    }
    if (dt < 0) {
        if (descr[0] == '>')
            return fail(NPY_EUNSUPPORTED, err, errlen, "big-endian dtype '%s' is not supported", descr);
        return fail(NPY_EUNSUPPORTED, err, errlen, "unsupported dtype '%s'", descr);
    }
    out->fortran_order = fortran && out->rank > 1; /* rank 0 and 1: both orders are the same bytes */
    out->dtype = (NpyDType)dt;

    size_t count = 1, item = dtypes[dt].size;
    bool overflow = false;
    for (int i = 0; i < out->rank; i++) {
        uint64_t d = (uint64_t)out->dims[i];
        if (d == 0) {
            count = 0;
            overflow = false; /* a zero dimension makes any product zero */
            break;
        }
        if (!overflow && count > SIZE_MAX / d)
            overflow = true;
        else if (!overflow)
            count *= (size_t)d;
    }
    if (overflow || count > SIZE_MAX / item) return fail(NPY_EFORMAT, err, errlen, "shape has too many elements");
    size_t data_at = hdr_at + hdr_len, have = n - data_at;
    if (have != count * item)
        return fail(NPY_EFORMAT, err, errlen, "data is %zu bytes; %zu elements of '%s' need %zu", have, count,
                    dtypes[dt].descr, count * item);
    out->count = count;
    out->nbytes = count * item;
    out->data = b + data_at;
    return NPY_OK;
}

int npy_open(NpyFile *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    /* Read, not mapped: an input truncated meanwhile is an error, not SIGBUS;
     * a FIFO is refused without blocking. */
    void *map;
    size_t size;
    char oerr[512];
    int fd, orc = os_open_input(path, OS_REG, &fd, oerr, sizeof oerr);
    if (orc == -EINVAL) return fail(NPY_EIO, err, errlen, "%s: not a regular file", path);
    if (orc) return fail(NPY_EIO, err, errlen, "%s: cannot open: %s", path, strerror(-orc));
    orc = os_read_fd(fd, path, 0, &map, &size, oerr, sizeof oerr);
    close(fd);
    if (orc) return fail(orc == -ENOMEM ? NPY_ENOMEM : NPY_EIO, err, errlen, "%s", oerr);
    char msg[256];
    int rc = npy_read(map, size, &f->arr, msg, sizeof msg);
    if (rc != NPY_OK) {
        free(map);
        memset(f, 0, sizeof *f);
        return fail(rc, err, errlen, "%s: %s", path, msg);
    }
    f->map = map;
    f->size = size;
    size_t item = npy_dtype_size(f->arr.dtype);
    if ((uintptr_t)f->arr.data % item != 0 || f->arr.fortran_order) {
        /* Legal but odd header padding, or a Fortran-order array (np.save of
         * a transposed array): give consumers aligned data in C order. */
        f->copy = malloc(f->arr.nbytes ? f->arr.nbytes : 1);
        if (!f->copy) {
            npy_close(f);
            return fail(NPY_ENOMEM, err, errlen, "%s: out of memory", path);
        }
        npy_to_c_order(&f->arr, f->copy);
        f->arr.data = f->copy;
        f->arr.fortran_order = false;
    }
    return NPY_OK;
}

void npy_to_c_order(const NpyArray *a, void *dst) {
    size_t item = npy_dtype_size(a->dtype);
    if (!a->fortran_order) {
        memcpy(dst, a->data, a->nbytes);
        return;
    }
    if (a->count == 0) return;
    /* Walk the C-order positions with an odometer over the indices; the
     * element's Fortran offset moves by the stride of the index that ticks
     * (the first index is the fastest in Fortran order). */
    int64_t idx[NPY_MAX_RANK] = {0};
    size_t fstride[NPY_MAX_RANK], off = 0;
    for (int k = 0; k < a->rank; k++) fstride[k] = k ? fstride[k - 1] * (size_t)a->dims[k - 1] : 1;
    const uint8_t *src = a->data;
    uint8_t *out = dst;
    for (size_t i = 0; i < a->count; i++) {
        memcpy(out + i * item, src + off * item, item);
        for (int k = a->rank - 1; k >= 0; k--) {
            if (++idx[k] < a->dims[k]) {
                off += fstride[k];
                break;
            }
            off -= fstride[k] * (size_t)(a->dims[k] - 1);
            idx[k] = 0;
        }
    }
}

void npy_close(NpyFile *f) {
    free(f->map);
    free(f->copy);
    memset(f, 0, sizeof *f);
}

/* ---------------------------------------------------------------- writer */

long npy_header(NpyDType dtype, int rank, const int64_t *dims, char *buf, size_t cap) {
    if ((unsigned)dtype >= NPY_DTYPE_COUNT || rank < 0 || rank > NPY_MAX_RANK) return NPY_EINVAL;
    /* The dict exactly as numpy.save spells it. */
    char dict[96 + NPY_MAX_RANK * 22];
    size_t k =
        (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", dtypes[dtype].descr);
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) return NPY_EINVAL;
        k += (size_t)snprintf(dict + k, sizeof dict - k, i ? ", %" PRId64 : "%" PRId64, dims[i]);
    }
    k += (size_t)snprintf(dict + k, sizeof dict - k, "%s), }", rank == 1 ? "," : "");
    /* numpy leaves room to grow the first dimension in place (21 digits),
     * then pads preamble + header + '\n' to 64 with 1..64 spaces. */
    if (rank > 0) {
        char digits[24];
        int nd = snprintf(digits, sizeof digits, "%" PRId64, dims[0]);
        for (int i = nd; i < 21; i++) dict[k++] = ' ';
    }
    size_t total = 10 + k + 1 + (64 - (10 + k + 1) % 64);
    size_t hlen = total - 10;
    char pre[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, (char)(hlen & 0xff), (char)(hlen >> 8)};
    for (size_t i = 0; i < total && i < cap; i++)
        buf[i] = i < 10 ? pre[i] : i - 10 < k ? dict[i - 10] : i + 1 == total ? '\n' : ' ';
    return (long)total;
}

int npy_write_file(const char *path, NpyDType dtype, int rank, const int64_t *dims, const void *data, char *err,
                   size_t errlen) {
    char hdr[256 + NPY_MAX_RANK * 22];
    long hl = npy_header(dtype, rank, dims, hdr, sizeof hdr);
    if (hl < 0 || (size_t)hl > sizeof hdr)
        return fail(NPY_EINVAL, err, errlen, "%s: bad dtype, rank or dimension", path);
    size_t count = 1, item = npy_dtype_size(dtype);
    for (int i = 0; i < rank; i++) {
        if (dims[i] != 0 && count > SIZE_MAX / (uint64_t)dims[i])
            return fail(NPY_EINVAL, err, errlen, "%s: shape has too many elements", path);
        count *= (size_t)dims[i];
    }
    if (count > SIZE_MAX / item) return fail(NPY_EINVAL, err, errlen, "%s: shape has too many elements", path);
    size_t nbytes = count * item;

    /* Published whole or not at all; a planted link at path is replaced, not
     * followed (os_publish_*). */
    OsPublish pub;
    char oerr[512];
    int orc = os_publish_begin(&pub, path, 0666, oerr, sizeof oerr);
    if (!orc) orc = os_publish_write(&pub, hdr, (size_t)hl, oerr, sizeof oerr);
    if (!orc) orc = os_publish_write(&pub, data, nbytes, oerr, sizeof oerr);
    if (!orc) return os_publish_commit(&pub, oerr, sizeof oerr) ? fail(NPY_EIO, err, errlen, "%s", oerr) : NPY_OK;
    os_publish_abort(&pub);
    return fail(orc == -ENOMEM ? NPY_ENOMEM : NPY_EIO, err, errlen, "%s", oerr);
}
