/* weights.c — produce the weight file: deterministic random values at a
 * real model's initialization scale, computed tables (RoPE, causal mask), or
 * tensors of a safetensors checkpoint mapped by the template's source and
 * transform attributes.  Values are generated straight into the writer's
 * buffer: generation must never be the slow step of emit. */
#include "gen_internal.h"

#include "milc/assert.h"
#include "milc/blob.h"
#include "milc/half.h"
#include "milc/osfile.h"
#include "milc/safetensors.h"
#include "milc/ossys.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- random ---- */

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Counter-based: element i of a tensor is a pure function of (key, i), so
 * the loop carries no state and vectorizes (32-bit lanes: AVX2 does 8 at a
 * time).  Each 32-bit hash gives one approximately normal value: the sum of
 * its four bytes (Irwin–Hall, n = 4) is bell-shaped with 1021 levels and
 * bounded tails (±3.45 σ) — what an initializer needs, far cheaper than
 * Box–Muller.  The hash is a bijection of the counter (xor-shift-multiply). */
#define IH_MEAN   510.0f             /* 4 * 255 / 2 */
#define IH_INV_SD (1.0f / 147.7971f) /* 1 / sqrt(4 * (256^2 - 1) / 12) */

static inline uint32_t hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* n values from element first on; first..first+n must not cross a multiple
 * of 2^32 (chunks of CHUNK elements never do).  Inlined into each variant
 * below, so each gets the vector width its target allows. */
static inline __attribute__((always_inline)) void normal_core(float *restrict dst, size_t n, uint64_t key,
                                                              uint64_t first, float sd) {
    uint32_t k = (uint32_t)mix64(key + (first >> 32));
    uint32_t base = (uint32_t)first;
    float scale = sd * IH_INV_SD;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = hash32((base + (uint32_t)i) ^ k);
        uint32_t s = (r & 0xffu) + ((r >> 8) & 0xffu) + ((r >> 16) & 0xffu) + (r >> 24);
        dst[i] = ((float)s - IH_MEAN) * scale;
    }
}

static void fill_normal(float *restrict dst, size_t n, uint64_t key, uint64_t first, float sd) {
    normal_core(dst, n, key, first, sd);
}

/* ---- fp16 output, at the CPU's best ----
 *
 * The build targets baseline x86-64 (SSE2: no 32-bit vector multiply, no
 * half conversion): the random fill made 0.6 GB/s of fp16 per core.  The two
 * hot loops get an AVX2+F16C twin picked at run time (2 GB/s, bench_gen);
 * both round to nearest even, so the bytes are the same on every CPU (the
 * cache key is over them). */

enum { CHUNK = 4096 };

static void f32_to_f16_portable(const float *src, uint16_t *dst, size_t n) { float_to_half_n(src, dst, n); }

static void normal_f16_portable(uint16_t *dst, size_t n, uint64_t key, uint64_t first, float sd) {
    float t[CHUNK];
    normal_core(t, n, key, first, sd);
    float_to_half_n(t, dst, n);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define GEN_X86_TWINS 1
__attribute__((target("avx2,f16c"))) static void f32_to_f16_avx2(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = float_to_half(src[i]);
}

__attribute__((target("avx2,f16c"))) static void normal_f16_avx2(uint16_t *dst, size_t n, uint64_t key, uint64_t first,
                                                                 float sd) {
    float t[CHUNK];
    normal_core(t, n, key, first, sd);
    f32_to_f16_avx2(t, dst, n);
}

/* The same loop 16 lanes wide (the hash's multiplies are the cost). */
__attribute__((target("avx512f"))) static void normal_f16_avx512(uint16_t *dst, size_t n, uint64_t key, uint64_t first,
                                                                   float sd) {
    float t[CHUNK];
    normal_core(t, n, key, first, sd);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(t + i), _MM_FROUND_TO_NEAREST_INT));
    float_to_half_n(t + i, dst + i, n - i);
}
#endif

/* bf16 -> fp16, a checkpoint's hot loop: bf16 is an fp32's top half, so
 * widen and round as above (the same bytes on every CPU). */
static void bf16_to_f16_portable(const uint16_t *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        dst[i] = float_to_half(f);
    }
}

#ifdef GEN_X86_TWINS
__attribute__((target("avx2,f16c"))) static void bf16_to_f16_avx2(const uint16_t *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i))), 16);
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_castsi256_ps(w), _MM_FROUND_TO_NEAREST_INT));
    }
    bf16_to_f16_portable(src + i, dst + i, n - i);
}

__attribute__((target("avx512f"))) static void bf16_to_f16_avx512(const uint16_t *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i))), 16);
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(_mm512_castsi512_ps(w), _MM_FROUND_TO_NEAREST_INT));
    }
    bf16_to_f16_portable(src + i, dst + i, n - i);
}
#endif

static void (*f32_to_f16)(const float *, uint16_t *, size_t) = f32_to_f16_portable;
static void (*normal_f16)(uint16_t *, size_t, uint64_t, uint64_t, float) = normal_f16_portable;
static void (*bf16_to_f16)(const uint16_t *, uint16_t *, size_t) = bf16_to_f16_portable;

static pthread_once_t select_once = PTHREAD_ONCE_INIT;

/* The loops of level (0 portable, 1 AVX2+F16C, 2 AVX-512) or the best
 * below it this CPU runs. */
static void select_level(int level) {
    f32_to_f16 = f32_to_f16_portable, normal_f16 = normal_f16_portable, bf16_to_f16 = bf16_to_f16_portable;
#ifdef GEN_X86_TWINS
    /* F16C from CPUID itself: clang's __builtin_cpu_supports does not know it. */
    unsigned a, b, c, d;
    bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
    if (level >= 1 && __builtin_cpu_supports("avx2") && f16c)
        f32_to_f16 = f32_to_f16_avx2, normal_f16 = normal_f16_avx2, bf16_to_f16 = bf16_to_f16_avx2;
    if (level >= 2 && __builtin_cpu_supports("avx512f")) bf16_to_f16 = bf16_to_f16_avx512, normal_f16 = normal_f16_avx512;
#else
    (void)level;
#endif
}

static void select_default(void) { select_level(2); }

void gen_fill_select(int level) {
    pthread_once(&select_once, select_default); /* so the default never comes after */
    select_level(level);
}

int gen_bf16_variants(GenConvertFn out[], const char *names[], int max) {
    int n = 0;
    if (n < max) out[n] = bf16_to_f16_portable, names[n++] = "portable";
#ifdef GEN_X86_TWINS
    unsigned a, b, c, d;
    bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
    if (n < max && __builtin_cpu_supports("avx2") && f16c) out[n] = bf16_to_f16_avx2, names[n++] = "avx2";
    if (n < max && __builtin_cpu_supports("avx512f")) out[n] = bf16_to_f16_avx512, names[n++] = "avx512";
#endif
    return n;
}

/* ---- computed initializers ---- */

/* Values of elements [first, first + n) of weight w (as floats), n <= CHUNK.
 * Tables index the last two dims: [.., hd, P] for RoPE, [.., Q, K] for the
 * mask; they are made a row segment at a time (a division per element made
 * a causal mask at --seq 8192 take seconds). */
static void init_chunk(const GenWeight *w, uint64_t seed, uint64_t first, size_t n, float *dst) {
    const char *in = w->init;
    if (!strcmp(in, "normal")) {
        fill_normal(dst, n, mix64(seed ^ w->seed_key), first, (float)w->args[0]);
        return;
    }
    float c = !strcmp(in, "ones") ? 1.0f : !strcmp(in, "fill") ? (float)w->args[0] : 0.0f;
    bool rope = !strcmp(in, "rope_cos") || !strcmp(in, "rope_sin");
    bool sign = !strcmp(in, "rope_sign"), mask = !strcmp(in, "causal_mask");
    if (!rope && !sign && !mask) {
        for (size_t k = 0; k < n; k++) dst[k] = c;
        return;
    }
    int64_t rows = w->rank >= 2 ? w->shape[w->rank - 2] : 1, cols = w->rank >= 1 ? w->shape[w->rank - 1] : 1;
    for (size_t k = 0; k < n;) {
        uint64_t i = first + k;
        int64_t r = (int64_t)((i / (uint64_t)cols) % (uint64_t)rows), col = (int64_t)(i % (uint64_t)cols);
        size_t m = (size_t)(cols - col) < n - k ? (size_t)(cols - col) : n - k; /* to the row's end */
        float *o = dst + k;
        if (rope) {
            /* rotate-half convention (Hugging Face Llama): frequency index
             * j mod hd/2; rope_sin carries the sign of rotate_half, -sin on
             * the first half, so the graph needs one concat, no negation. */
            int64_t half = rows / 2, j = half ? r % half : 0;
            double inv = pow(w->args[0], -2.0 * (double)j / (double)rows);
            for (size_t q = 0; q < m; q++) {
                double ang = (double)(col + (int64_t)q) * inv;
                o[q] = in[5] == 'c' ? (float)cos(ang) : (float)(r < half ? -sin(ang) : sin(ang));
            }
        } else if (sign) {
            /* all dims 1 but hd: -1 on the first half */
            for (size_t q = 0; q < m; q++) o[q] = i + q < w->count / 2 ? -1.0f : 1.0f;
        } else {
            /* 0 up to the diagonal (col <= r), -1e4 after */
            size_t zeros = r >= col ? (size_t)(r - col + 1) : 0;
            if (zeros > m) zeros = m;
            for (size_t q = 0; q < zeros; q++) o[q] = 0.0f;
            for (size_t q = zeros; q < m; q++) o[q] = -1e4f;
        }
        k += m;
    }
}

/* n values of dtype (fp16 or fp32) into out. */
static void store(void *out, uint32_t dtype, const float *v, size_t n) {
    if (dtype == MILBLOB_FP16)
        f32_to_f16(v, (uint16_t *)out, n);
    else
        memcpy(out, v, n * sizeof(float));
}

/* Elements [first, first + n) of a computed weight, n <= CHUNK. */
void gen_init_piece(const GenWeight *w, uint64_t seed, uint64_t first, size_t n, void *out) {
    pthread_once(&select_once, select_default);
    if (w->dtype == MILBLOB_FP16 && !strcmp(w->init, "normal")) {
        normal_f16((uint16_t *)out, n, mix64(seed ^ w->seed_key), first, (float)w->args[0]);
        return;
    }
    float buf[CHUNK];
    init_chunk(w, seed, first, n, buf);
    store(out, w->dtype, buf, n);
}

/* ---- safetensors (read by milc_blob's reader) ---- */

/* The tensor named name, or the one whose name ends in ".name" (checkpoints
 * saved from a wrapper add a "transformer." or "model." prefix); NULL when
 * missing or ambiguous. */
static const SafetensorsTensor *st_find(const SafetensorsFile *f, const char *name) {
    const SafetensorsTensor *hit = safetensors_find(f, name);
    if (hit) return hit;
    size_t nl = strlen(name);
    for (size_t i = 0; i < f->count; i++) {
        const char *tn = f->tensors[i].name;
        size_t l = strlen(tn);
        if (l > nl && tn[l - nl - 1] == '.' && !strcmp(tn + l - nl, name)) {
            if (hit) return NULL;
            hit = &f->tensors[i];
        }
    }
    return hit;
}

/* A checkpoint's tensors are little-endian, as milc's weight file: an
 * element is its bytes as they are. */
static inline float st_get(SafetensorsDType dt, const uint8_t *data, uint64_t i) {
    const uint8_t *p = data + i * (dt == ST_DTYPE_F32 ? 4 : 2);
    if (dt == ST_DTYPE_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    if (dt == ST_DTYPE_F16) return half_to_float(h);
    uint32_t u = (uint32_t)h << 16; /* bf16 is the top half of an fp32 */
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- a source read once ---- */

/* What tells that an open checkpoint is still the file that was hashed:
 * written in place, it gets a new mtime and ctime (the ctime also when a
 * tool sets the mtime back); truncated, a new size.  One replaced by a
 * rename is another inode, and the descriptor held goes on reading the old
 * one, so the digest still names what is read: the old inode's ctime moves
 * then (its link count drops), its bytes do not, so a ctime is compared
 * only while the link count stays. */
typedef struct FileId {
    dev_t dev;
    ino_t ino;
    off_t size;
    nlink_t nlink;
    struct timespec mtime, ctime;
} FileId;

static FileId file_id(const struct stat *sb) {
    return (FileId){sb->st_dev, sb->st_ino, sb->st_size, sb->st_nlink, sb->st_mtim, sb->st_ctim};
}

static bool same_time(struct timespec a, struct timespec b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

static bool same_id(const FileId *a, const FileId *b) {
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && same_time(a->mtime, b->mtime) &&
           (a->nlink != b->nlink || same_time(a->ctime, b->ctime));
}

struct GenWeights {
    bool random;
    bool keyed; /* digest holds the source's digest (gen_weights_id may be asked) */
    uint64_t seed;
    uint8_t digest[16];
    int fd;             /* a checkpoint: open as long as the source is */
    FileId id;          /* its identity when hashed */
    char *path;         /* its name, for messages (owned: see src_at) */
    SafetensorsFile st; /* its header; the tensors' data is read when used */
};

/* The checkpoint's name as a location in the sink d that reports now.  Not
 * one interned once at open: the sink that opened a checkpoint may be gone
 * before a later stage reports into another (a request opens the weights
 * into a scratch sink), and a location must live as long as its sink. */
static SrcLoc src_at(const GenWeights *src, DiagSink *d) { return (SrcLoc){diag_intern(d, src->path), 0, 0}; }

/* n bytes at off of fd: 0, the errno of a failed read, or -1 if the file
 * ended early (it was cut while milc used it: an I/O error, never a fault,
 * as nothing is mapped).  Reports nothing, so any thread may call it. */
static int pread_full(int fd, void *buf, size_t n, uint64_t off) {
    for (size_t got = 0; got < n;) {
        ssize_t k = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return errno;
        if (k == 0) return -1;
        got += (size_t)k;
    }
    return 0;
}

/* pread_full's outcome as a diagnostic about the checkpoint at `at`. */
static int read_failed(int rc, SrcLoc at, DiagSink *d) {
    if (rc > 0)
        diag_syserror(d, at, "read error: %s", strerror(rc));
    else if (rc < 0)
        diag_syserror(d, at, "weights: the file shrank while it was read");
    return rc ? -1 : 0;
}

/* n bytes at off of the checkpoint, or an error in d. */
static int ck_read(const GenWeights *src, void *buf, size_t n, uint64_t off, DiagSink *d) {
    int rc = pread_full(src->fd, buf, n, off);
    return rc ? read_failed(rc, src_at(src, d), d) : 0;
}

/* The checkpoint is the file that was hashed, or an error. */
static int ck_unchanged(const GenWeights *src, DiagSink *d) {
    struct stat sb;
    if (fstat(src->fd, &sb) != 0) {
        diag_syserror(d, src_at(src, d), "cannot stat weights: %s", strerror(errno));
        return -1;
    }
    FileId now = file_id(&sb);
    if (same_id(&now, &src->id)) return 0;
    diag_syserror(d, src_at(src, d),
                  "weights: the file was changed while milc read it (build again once it is written)");
    return -1;
}

/* A 2-D strided view of a source tensor after transforms. */
typedef struct View {
    int rank; /* 1 or 2, for messages */
    int64_t rows, cols, rs, cs;
    uint64_t off;
} View;

static void shape_str(char *buf, size_t n, int rank, const int64_t *shape) {
    int k = snprintf(buf, n, "[");
    for (int i = 0; i < rank; i++) k += snprintf(buf + k, n - (size_t)k, "%s%" PRId64, i ? ", " : "", shape[i]);
    snprintf(buf + k, n - (size_t)k, "]");
}

/* The view of tensor t of f that weight w maps, checked against w's shape. */
static int map_view(const GenWeight *w, const SafetensorsFile *f, const SafetensorsTensor **tp, View *vp, DiagSink *d) {
    const SafetensorsTensor *t = st_find(f, w->source);
    char ws[128], ts[128];
    shape_str(ws, sizeof ws, w->rank, w->shape);
    if (!t) {
        diag_error(d, w->loc, "weight '%s': tensor '%s' not found in %s", w->name, w->source, f->name);
        return -1;
    }
    if (t->dtype != ST_DTYPE_F32 && t->dtype != ST_DTYPE_F16 && t->dtype != ST_DTYPE_BF16) {
        diag_error(d, w->loc, "weight '%s': tensor '%s' has dtype %s; F32, F16 or BF16 expected", w->name, t->name,
                   safetensors_dtype_name(t->dtype));
        return -1;
    }
    shape_str(ts, sizeof ts, t->rank, t->dims);
    if (t->rank > 2 || t->rank < 1) {
        diag_error(d, w->loc, "weight '%s': tensor '%s' has shape %s; rank 1 or 2 expected", w->name, t->name, ts);
        return -1;
    }
    View v =
        t->rank == 2 ? (View){2, t->dims[0], t->dims[1], t->dims[1], 1, 0} : (View){1, 1, t->dims[0], t->dims[0], 1, 0};
    /* transforms: "split(axis, parts, index)" and "t", left to right */
    const char *p = w->transform ? w->transform : "";
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        int axis, parts, index, used = 0;
        if (sscanf(p, "split(%d ,%d ,%d )%n", &axis, &parts, &index, &used) == 3 && used > 0) {
            int64_t *dim = (v.rank == 1 || axis == 1) ? &v.cols : &v.rows;
            int64_t stride = (v.rank == 1 || axis == 1) ? v.cs : v.rs;
            if (axis < 0 || axis >= v.rank || parts < 1 || index < 0 || index >= parts || *dim % parts != 0) {
                diag_error(d, w->loc, "weight '%s': cannot split(%d, %d, %d) tensor '%s' of shape %s", w->name, axis,
                           parts, index, t->name, ts);
                return -1;
            }
            *dim /= parts;
            v.off += (uint64_t)(*dim * index * stride);
            p += used;
        } else if (*p == 't' && (p[1] == 0 || p[1] == ' ' || p[1] == ',')) {
            if (v.rank == 2) {
                int64_t r = v.rows;
                v.rows = v.cols;
                v.cols = r;
                int64_t s = v.rs;
                v.rs = v.cs;
                v.cs = s;
            }
            p++;
        } else {
            diag_error(d, w->loc, "weight '%s': unknown transform at '%s' (split(axis, parts, index), t)", w->name, p);
            return -1;
        }
    }
    /* The mapped tensor must be the weight's shape up to dims of size 1. */
    int64_t a[8], b[2];
    int na = 0, nb = 0;
    for (int i = 0; i < w->rank; i++)
        if (w->shape[i] != 1) a[na++] = w->shape[i];
    if (v.rank == 2 && v.rows != 1) b[nb++] = v.rows;
    if (v.cols != 1) b[nb++] = v.cols;
    bool ok = na == nb;
    for (int i = 0; ok && i < na; i++) ok = a[i] == b[i];
    if (!ok) {
        char vs[64];
        int64_t vsh[2] = {v.rows, v.cols};
        shape_str(vs, sizeof vs, v.rank, v.rank == 2 ? vsh : vsh + 1);
        diag_error(d, w->loc, "weight '%s': tensor '%s' has shape %s (%s after '%s'), the template needs %s", w->name,
                   t->name, ts, vs, w->transform ? w->transform : "", ws);
        return -1;
    }
    *tp = t, *vp = v;
    return 0;
}

/* Elements per piece of a contiguous run: read and converted while in L2,
 * and few enough syscalls per gigabyte not to count. */
enum { PIECE = 128 * 1024 };

/* n elements of source dtype sdt at src as out's dtype (they differ). */
static void convert(SafetensorsDType sdt, const void *src, uint32_t dtype, void *out, size_t n) {
    if (sdt == ST_DTYPE_BF16 && dtype == MILBLOB_FP16)
        bf16_to_f16(src, out, n);
    else if (sdt == ST_DTYPE_F32 && dtype == MILBLOB_FP16)
        f32_to_f16(src, out, n);
    else
        for (size_t i = 0; i < n; i++) { /* to fp32: exact */
            float f = st_get(sdt, src, i);
            memcpy((uint8_t *)out + 4 * i, &f, 4);
        }
}

/* A view whose rows are runs of the file (no transpose): each run read
 * piece by piece by pread, straight into the writer's buffer when the
 * dtypes agree, else into a staging buffer and converted from there. */
static int map_runs(const GenWeight *w, const GenWeights *src, const SafetensorsTensor *t, const View *v,
                    MilBlobWriter *wr, DiagSink *d) {
    size_t es = w->dtype == MILBLOB_FP16 ? 2 : 4, ss = safetensors_dtype_size(t->dtype);
    bool same = es == ss && (t->dtype == ST_DTYPE_F32 || t->dtype == ST_DTYPE_F16); /* bf16 is 2 bytes, not fp16 */
    int64_t rows = v->rows, cols = v->cols;
    if (v->rs == v->cols) cols *= rows, rows = 1; /* the rows follow each other: one run */
    uint8_t *stage = same ? NULL : malloc((size_t)PIECE * ss);
    if (!same && !stage) {
        diag_syserror(d, src_at(src, d), "out of memory");
        return -1;
    }
    int rc = 0;
    for (int64_t r = 0; r < rows && rc == 0; r++) {
        for (int64_t c0 = 0; c0 < cols; c0 += PIECE) {
            size_t n = (size_t)(cols - c0 < PIECE ? cols - c0 : PIECE);
            uint64_t off = t->offset + (v->off + (uint64_t)(r * v->rs + c0)) * ss;
            void *out = milblob_writer_take(wr, n * es);
            if (!out) break; /* a sticky writer error: finish reports it */
            if (same)
                rc = ck_read(src, out, n * es, off, d);
            else if ((rc = ck_read(src, stage, n * ss, off, d)) == 0)
                convert(t->dtype, stage, w->dtype, out, n);
            if (rc) break;
        }
    }
    free(stage);
    return rc;
}

/* A transposed view: the bytes it spans read whole (at most the tensor:
 * GPT-2's Conv1D weights, a few MB), then gathered element by element. */
static int map_strided(const GenWeight *w, const GenWeights *src, const SafetensorsTensor *t, const View *v,
                       MilBlobWriter *wr, DiagSink *d) {
    size_t es = w->dtype == MILBLOB_FP16 ? 2 : 4, ss = safetensors_dtype_size(t->dtype);
    uint64_t span = (uint64_t)((v->rows - 1) * v->rs + (v->cols - 1) * v->cs + 1) * ss;
    uint8_t *data = malloc(span ? (size_t)span : 1);
    if (!data) {
        diag_syserror(d, src_at(src, d), "out of memory reading tensor '%s' (%" PRIu64 " bytes)", t->name, span);
        return -1;
    }
    int rc = ck_read(src, data, (size_t)span, t->offset + v->off * ss, d);
    for (int64_t r = 0; r < v->rows && rc == 0; r++) {
        for (int64_t c0 = 0; c0 < v->cols; c0 += CHUNK) {
            size_t n = (size_t)(v->cols - c0 < CHUNK ? v->cols - c0 : CHUNK);
            void *out = milblob_writer_take(wr, n * es);
            if (!out) break;
            float buf[CHUNK];
            for (size_t c = 0; c < n; c++)
                buf[c] = st_get(t->dtype, data, (uint64_t)(r * v->rs + (c0 + (int64_t)c) * v->cs));
            store(out, w->dtype, buf, n);
        }
    }
    free(data);
    return rc;
}

/* Weight w from its checkpoint tensor, streamed into the writer's blob. */
static int map_source(const GenWeight *w, const GenWeights *src, MilBlobWriter *wr, DiagSink *d) {
    const SafetensorsTensor *t;
    View v;
    if (map_view(w, &src->st, &t, &v, d) != 0) return -1;
    if (v.rows == 0 || v.cols == 0) return 0;
    return v.cs == 1 ? map_runs(w, src, t, &v, wr, d) : map_strided(w, src, t, &v, wr, d);
}

/* "random" / "random:SEED" → seed; -1 if the source is not random. */
static int parse_random(const char *src, uint64_t *seed, bool *bad) {
    *bad = false;
    if (!src) {
        *seed = 0;
        return 0;
    }
    if (strncmp(src, "random", 6) != 0 || (src[6] && src[6] != ':')) return -1;
    *seed = 0;
    if (!src[6]) return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(src + 7, &end, 10);
    if (end == src + 7 || *end || errno || src[7] == '-') {
        *bad = true;
        return 0;
    }
    *seed = v;
    return 0;
}

static void digest_random(uint64_t seed, uint8_t out[16]) {
    char canon[40];
    snprintf(canon, sizeof canon, "random:%" PRIu64, seed);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(canon, strlen(canon)));
    memcpy(out, c.digest, 16);
}

/* A checkpoint's digest: XXH3-128 of "file:", its size (8 bytes, little
 * endian), then the XXH3-128 of each DIGEST_PIECE of its bytes in order.
 * The pieces are hashed on up to DIGEST_THREADS threads (one per core):
 * the digest is one full pass over the file, once per build, and one core
 * reads and hashes a cached file at about half the speed cp copies it.  The
 * value does not depend on the thread count. */
enum { DIGEST_PIECE = 16u << 20, DIGEST_BLK = 512u << 10, DIGEST_THREADS = 4 };

typedef struct {
    int fd;
    uint64_t size, first, step; /* pieces first, first + step, ... */
    uint8_t (*out)[16];
    int rc;     /* pread_full's, the first that failed */
    bool nomem; /* no buffer to read into: nothing read */
} DigestPart;

static void *digest_part(void *arg) {
    DigestPart *p = arg;
    uint8_t *buf = malloc(DIGEST_BLK);
    XXH3_state_t *st = XXH3_createState();
    p->nomem = !buf || !st;
    uint64_t npieces = (p->size + DIGEST_PIECE - 1) / DIGEST_PIECE;
    for (uint64_t i = p->first; i < npieces && !p->rc && !p->nomem; i += p->step) {
        XXH3_128bits_reset(st);
        uint64_t end = (i + 1) * (uint64_t)DIGEST_PIECE < p->size ? (i + 1) * (uint64_t)DIGEST_PIECE : p->size;
        for (uint64_t off = i * (uint64_t)DIGEST_PIECE; off < end && !p->rc; off += DIGEST_BLK) {
            size_t n = end - off < DIGEST_BLK ? (size_t)(end - off) : DIGEST_BLK;
            if (!(p->rc = pread_full(p->fd, buf, n, off))) XXH3_128bits_update(st, buf, n);
        }
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
        memcpy(p->out[i], c.digest, 16);
    }
    XXH3_freeState(st);
    free(buf);
    return NULL;
}

static int digest_fd(int fd, uint64_t size, const char *path, uint8_t out[16], DiagSink *d) {
    SrcLoc at = {diag_intern(d, path), 0, 0};
    uint64_t npieces = (size + DIGEST_PIECE - 1) / DIGEST_PIECE;
    uint8_t(*pieces)[16] = malloc((size_t)(npieces ? npieces : 1) * 16);
    if (!pieces) {
        diag_syserror(d, at, "out of memory");
        return -1;
    }
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL); /* a hint: a cold file reads ahead further */
    long ncpu = os_cpu_count();
    int nth = ncpu < 1 ? 1 : ncpu > DIGEST_THREADS ? DIGEST_THREADS : (int)ncpu;
    if ((uint64_t)nth > npieces) nth = npieces ? (int)npieces : 1;
    DigestPart part[DIGEST_THREADS];
    pthread_t th[DIGEST_THREADS];
    bool started[DIGEST_THREADS] = {false};
    for (int t = 0; t < nth; t++) part[t] = (DigestPart){fd, size, (uint64_t)t, (uint64_t)nth, pieces, 0, false};
    for (int t = 1; t < nth; t++) started[t] = pthread_create(&th[t], NULL, digest_part, &part[t]) == 0;
    digest_part(&part[0]);
    for (int t = 1; t < nth; t++)
        if (started[t])
            pthread_join(th[t], NULL);
        else
            digest_part(&part[t]); /* no thread: its share on this one */
    int rc = 0;
    for (int t = 0; t < nth && rc == 0; t++) rc = read_failed(part[t].rc, at, d);
    for (int t = 0; t < nth && rc == 0; t++)
        if (part[t].nomem) rc = -1, diag_syserror(d, at, "out of memory for the buffers that hash the checkpoint");
    if (rc == 0) {
        XXH3_state_t *st = XXH3_createState();
        MILC_ASSERT(st != NULL);
        XXH3_128bits_reset(st);
        uint8_t head[13] = {'f', 'i', 'l', 'e', ':'};
        for (int b = 0; b < 8; b++) head[5 + b] = (uint8_t)(size >> 8 * b);
        XXH3_128bits_update(st, head, sizeof head);
        XXH3_128bits_update(st, pieces, (size_t)npieces * 16);
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
        XXH3_freeState(st);
        memcpy(out, c.digest, 16);
    }
    free(pieces);
    return rc;
}

/* path opened for reading: a regular file (O_NONBLOCK: a FIFO must not
 * wait for a writer; the regular-file check then refuses it). */
static int open_regular(const char *path, SrcLoc at, int *fd, struct stat *sb, DiagSink *d) {
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (*fd < 0) {
        diag_error(d, at, "cannot open weights: %s", strerror(errno));
        return -1;
    }
    if (fstat(*fd, sb) != 0)
        diag_syserror(d, at, "cannot stat weights: %s", strerror(errno));
    else if (!S_ISREG(sb->st_mode))
        diag_error(d, at, "weights: not a regular file");
    else
        return 0;
    close(*fd);
    *fd = -1;
    return -1;
}

/* A checkpoint: its header parsed, its bytes hashed when it keys a build,
 * the descriptor kept.  The tensors are read when a program needs them (a
 * chunk reads its own layers), so memory does not grow with the checkpoint. */
static int checkpoint_open(GenWeights *w, const char *path, DiagSink *d) {
    struct stat sb;
    if (open_regular(path, src_at(w, d), &w->fd, &sb, d) != 0) return -1;
    w->id = file_id(&sb);
    if (safetensors_read_header(&w->st, diag_intern(d, w->path), w->fd, (uint64_t)sb.st_size, d) != 0) return -1;
    w->st.name = w->path; /* later messages name it after the opening sink is gone */
    if (w->keyed && digest_fd(w->fd, (uint64_t)sb.st_size, w->path, w->digest, d) != 0) return -1;
    return ck_unchanged(w, d);
}

static int weights_open(const char *source, bool keyed, GenWeights **out, DiagSink *d) {
    *out = NULL;
    GenWeights *w = calloc(1, sizeof *w);
    if (!w) {
        diag_syserror(d, (SrcLoc){0}, "out of memory");
        return -1;
    }
    w->fd = -1;
    w->keyed = keyed;
    bool bad;
    w->random = parse_random(source, &w->seed, &bad) == 0;
    if (bad) {
        diag_error(d, (SrcLoc){0}, "bad weight source '%s': random:SEED takes a decimal unsigned seed", source);
        free(w);
        return -1;
    }
    if (w->random) {
        digest_random(w->seed, w->digest);
        *out = w;
        return 0;
    }
    if (!(w->path = strdup(source))) {
        diag_syserror(d, (SrcLoc){0}, "out of memory");
        free(w);
        return -1;
    }
    if (checkpoint_open(w, source, d) != 0) {
        gen_weights_close(w);
        return -1;
    }
    *out = w;
    return 0;
}

int gen_weights_open(const char *source, GenWeights **out, DiagSink *d) { return weights_open(source, true, out, d); }

/* The digest is one full pass over a checkpoint, 0.45 of a cp of it: a
 * program written to a directory (emit) keys nothing and skips it. */
int gen_weights_open_unkeyed(const char *source, GenWeights **out, DiagSink *d) {
    return weights_open(source, false, out, d);
}

void gen_weights_id(const GenWeights *w, uint8_t out[16]) {
    MILC_ASSERT(w->keyed);
    memcpy(out, w->digest, 16);
}

void gen_weights_close(GenWeights *w) {
    if (!w) return;
    safetensors_close(&w->st);
    if (w->fd >= 0) close(w->fd);
    free(w->path);
    free(w);
}

/* Weight w computed (random or a table), streamed into the writer's blob. */
static void init_weight(const GenWeight *w, uint64_t seed, MilBlobWriter *wr) {
    size_t es = w->dtype == MILBLOB_FP16 ? 2 : 4;
    for (uint64_t i = 0; i < w->count; i += CHUNK) {
        size_t n = (size_t)(w->count - i < CHUNK ? w->count - i : CHUNK);
        void *out = milblob_writer_take(wr, n * es);
        if (!out) return; /* a sticky writer error: finish reports it */
        gen_init_piece(w, seed, i, n, out);
    }
}

/* Every weight of p into wr, streamed: the writer's memory is a few MiB
 * whatever a weight's size (--seq picks a mask's).  0, or -1 after a
 * diagnostic (a writer error is sticky: its finish reports it). */
static int fill_all(const GenProgram *p, const GenWeights *src, MilBlobWriter *wr, DiagSink *d) {
    pthread_once(&select_once, select_default);
    for (int i = 0; i < p->nweights; i++) {
        const GenWeight *w = &p->weights[i];
        uint64_t off = milblob_writer_begin(wr, w->dtype, w->count * (w->dtype == MILBLOB_FP16 ? 2 : 4));
        if (off == UINT64_MAX) return 0;
        MILC_ASSERT(off == w->offset); /* expand.c laid out the same file */
        if (!src->random && w->source) {
            if (map_source(w, src, wr, d) != 0) return -1;
        } else {
            init_weight(w, src->seed, wr);
        }
    }
    /* What was read is what was hashed: the key names these weights. */
    return src->random ? 0 : ck_unchanged(src, d);
}

int gen_weights_write(const GenProgram *p, const GenWeights *src, const char *path, bool scratch, uint8_t digest[16],
                      DiagSink *d) {
    MilBlobWriter *wr = milblob_writer_open(path, d);
    if (!wr) return -1;
    if (scratch) milblob_writer_scratch(wr);
    if (fill_all(p, src, wr, d) != 0) {
        milblob_writer_abort(wr);
        return -1;
    }
    if (digest) milblob_writer_digest(wr, digest);
    return milblob_writer_finish(wr, d);
}

int gen_weights_make(const GenProgram *p, const GenWeights *src, const GenOptions *o, MilBlobImage *out,
                     uint8_t digest[16], DiagSink *d) {
    MilBlobWriter *wr = milblob_writer_open_mem(p->blob_end, d);
    if (!wr) return -1;
    if (o->grow) milblob_writer_on_grow(wr, o->grow, o->grow_ctx);
    if (fill_all(p, src, wr, d) != 0) {
        milblob_writer_abort(wr);
        return -1;
    }
    milblob_writer_digest(wr, digest);
    return milblob_writer_finish_mem(wr, out, d);
}

int gen_weights_digest(const char *weights, uint8_t out[16], DiagSink *d) {
    uint64_t seed;
    bool bad;
    if (parse_random(weights, &seed, &bad) == 0) {
        if (bad) {
            diag_error(d, (SrcLoc){0}, "bad weight source '%s'", weights);
            return -1;
        }
        digest_random(seed, out);
        return 0;
    }
    SrcLoc at = {diag_intern(d, weights), 0, 0};
    int fd;
    struct stat sb;
    if (open_regular(weights, at, &fd, &sb, d) != 0) return -1;
    int rc = digest_fd(fd, (uint64_t)sb.st_size, weights, out, d);
    close(fd);
    return rc;
}
