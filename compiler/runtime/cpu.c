/* cpu.c — which kernel variants this build carries and this CPU runs: CPUID
 * (with the OS's XSAVE state: a CPU with AVX under an OS that does not save
 * the wide registers cannot run them) on x86-64; NEON is baseline on AArch64.
 * A variant the CPU lacks is refused with a message, never run to a SIGILL. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "rt_internal.h"

#ifdef __APPLE__
#include <sys/sysctl.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define RT_X86 1
#endif

extern const RtKernels rt_kernels_scalar;
#ifdef RT_HAVE_AVX2
extern const RtKernels rt_kernels_avx2;
#endif
#ifdef RT_HAVE_AVX512
extern const RtKernels rt_kernels_avx512;
#endif
#ifdef RT_HAVE_NEON
extern const RtKernels rt_kernels_neon;
#endif

static const char *const names[RT_CPU_COUNT_] = {"auto", "scalar", "avx2", "avx512", "neon"};

const char *rt_cpu_name(RtCpu v) { return (unsigned)v < RT_CPU_COUNT_ ? names[v] : "?"; }

int rt_cpu_parse(const char *name, RtCpu *out, char *err, size_t errlen) {
    for (int v = 0; v < RT_CPU_COUNT_; v++)
        if (name && !strcmp(name, names[v])) {
            *out = (RtCpu)v;
            return RT_OK;
        }
    return rt_errf(err, errlen, RT_EINVAL, "unknown kernel variant '%s' (known: auto, avx512, avx2, neon, scalar)",
                   name ? name : "");
}

/* The built-in table of v, or NULL when this build has none. */
static const RtKernels *table(RtCpu v) {
    switch (v) {
    case RT_CPU_SCALAR: return &rt_kernels_scalar;
#ifdef RT_HAVE_AVX2
    case RT_CPU_AVX2: return &rt_kernels_avx2;
#endif
#ifdef RT_HAVE_AVX512
    case RT_CPU_AVX512: return &rt_kernels_avx512;
#endif
#ifdef RT_HAVE_NEON
    case RT_CPU_NEON: return &rt_kernels_neon;
#endif
    default: return NULL;
    }
}

#ifdef RT_X86
/* XCR0: the register state the OS saves on a context switch. */
static uint64_t xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

/* What of v's instruction set the CPU lacks ("" when nothing). */
static const char *x86_missing(RtCpu v) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return "CPUID";
    bool avx = c >> 28 & 1, fma = c >> 12 & 1, f16c = c >> 29 & 1, osxsave = c >> 27 & 1;
    uint64_t x = osxsave ? xcr0() : 0;
    if (!avx || !osxsave || (x & 6) != 6) return "AVX (or the OS's support for 256-bit state)";
    if (!fma || !f16c) return "FMA or F16C";
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return "CPUID leaf 7";
    if (!(b >> 5 & 1)) return "AVX2";
    if (v == RT_CPU_AVX2) return "";
    bool f = b >> 16 & 1, dq = b >> 17 & 1, bw = b >> 30 & 1, vl = b >> 31 & 1;
    if (!f || !dq || !bw || !vl) return "AVX-512 F, DQ, BW and VL";
    if ((x & 0xe0) != 0xe0) return "the OS's support for AVX-512 state";
    return "";
}
#endif

/* "" if this CPU runs v's instructions, else what it lacks. */
static const char *cpu_missing(RtCpu v) {
    switch (v) {
    case RT_CPU_SCALAR: return "";
#ifdef RT_X86
    case RT_CPU_AVX2:
    case RT_CPU_AVX512: return x86_missing(v);
#endif
#if defined(__aarch64__)
    case RT_CPU_NEON: return ""; /* Advanced SIMD and fp16 conversion are baseline ARMv8-A */
#endif
    default: return "an instruction set of another architecture";
    }
}

RtCpu rt_cpu_best(void) {
    static const RtCpu order[] = {RT_CPU_AVX512, RT_CPU_AVX2, RT_CPU_NEON};
    for (size_t i = 0; i < sizeof order / sizeof *order; i++)
        if (table(order[i]) && !*cpu_missing(order[i])) return order[i];
    return RT_CPU_SCALAR;
}

int rt_cpu_check(RtCpu v, char *err, size_t errlen) {
    if (v == RT_CPU_AUTO) return RT_OK;
    if ((unsigned)v >= RT_CPU_COUNT_) return rt_errf(err, errlen, RT_ECPU, "kernel variant %d unknown", (int)v);
    char runs[64] = "";
    for (int w = RT_CPU_COUNT_ - 1; w > RT_CPU_AUTO; w--)
        if (table((RtCpu)w) && !*cpu_missing((RtCpu)w))
            snprintf(runs + strlen(runs), sizeof runs - strlen(runs), "%s%s", *runs ? ", " : "", names[w]);
    if (!table(v))
        return rt_errf(err, errlen, RT_ECPU, "kernel variant %s is not built into this milc (it runs: %s)", names[v],
                       runs);
    const char *miss = cpu_missing(v);
    if (*miss)
        return rt_errf(err, errlen, RT_ECPU, "kernel variant %s needs %s, which this CPU lacks (it runs: %s)", names[v],
                       miss, runs);
    return RT_OK;
}

/* ---- cache sizes and the blocking they give ---- */

RtBlocking rt_block = {.kc = 64, .mb = 120};

#ifdef RT_X86
/* L1 data and L2 sizes from CPUID's cache descriptors: leaf 4 (Intel) or
 * 0x8000001D (AMD), one subleaf per cache, in one format. */
static void cpuid_caches(size_t *l1d, size_t *l2) {
    unsigned a, b, c, d, leaf = 4, max = __get_cpuid_max(0x80000000u, NULL);
    if (max >= 0x8000001Du && __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c >> 22 & 1)) leaf = 0x8000001Du;
    for (unsigned i = 0; i < 16 && __get_cpuid_count(leaf, i, &a, &b, &c, &d); i++) {
        unsigned type = a & 31, level = a >> 5 & 7;
        if (type == 0) break;
        size_t size = (size_t)((b >> 22) + 1) * ((b >> 12 & 0x3ff) + 1) * ((b & 0xfff) + 1) * ((size_t)c + 1);
        if (level == 1 && type == 1 && !*l1d) *l1d = size;
        if (level == 2 && (type == 3 || type == 2) && !*l2) *l2 = size;
    }
}
#endif

#ifdef __APPLE__
static size_t sysctl_size(const char *name) {
    uint64_t v = 0;
    size_t len = sizeof v;
    return sysctlbyname(name, &v, &len, NULL, 0) == 0 ? (size_t)v : 0;
}
#endif

/* The sizes where the OS says them (glibc's sysconf, macOS's sysctl, with
 * the performance cores' on Apple Silicon), else CPUID; 0 when unknown. */
static void cache_sizes(size_t *l1d, size_t *l2) {
    *l1d = *l2 = 0;
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
    long s1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), s2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    *l1d = s1 > 0 ? (size_t)s1 : 0, *l2 = s2 > 0 ? (size_t)s2 : 0;
#elif defined(__APPLE__)
    *l1d = sysctl_size("hw.perflevel0.l1dcachesize"), *l2 = sysctl_size("hw.perflevel0.l2cachesize");
    if (!*l1d) *l1d = sysctl_size("hw.l1dcachesize");
    if (!*l2) *l2 = sysctl_size("hw.l2cachesize");
#endif
#ifdef RT_X86
    if (!*l1d || !*l2) cpuid_caches(l1d, l2);
#endif
}

static int64_t clamp_down(int64_t v, int64_t lo, int64_t hi, int64_t step) {
    v = v < lo ? lo : v > hi ? hi : v;
    return v / step * step;
}

static void blocking_init(void) {
    size_t l1d, l2;
    cache_sizes(&l1d, &l2);
    rt_block.l1d = l1d, rt_block.l2 = l2;
    if (l1d) rt_block.kc = clamp_down((int64_t)(l1d * 2 / 3 / (RT_PANEL * sizeof(float))), 32, RT_KC_MAX, 16);
    if (l2)
        rt_block.mb = clamp_down((int64_t)(l2 / 4 / ((size_t)rt_block.kc * sizeof(float))), 24, RT_MB_MAX, RT_TILE_M);
}

int rt_cpu_kernels(RtCpu v, const RtKernels **out, char *err, size_t errlen) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, blocking_init);
    if (v == RT_CPU_AUTO) v = rt_cpu_best();
    int rc = rt_cpu_check(v, err, errlen);
    *out = rc ? NULL : table(v);
    return rc;
}
