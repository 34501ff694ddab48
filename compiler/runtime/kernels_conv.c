/* kernels_conv.c — convolution and pooling over 1 to 3 spatial dims.
 * A 2-D convolution with one group runs on the GEMM tile of kernels_gemm.c
 * (PAD_NHWC moves x channels last once; CONV_GEMM's A operand is then x as
 * it lies, no im2col copy); grouped (depthwise) and transposed convolutions run
 * directly, one output channel per part, as shifted multiply-adds along the
 * innermost spatial dim (contiguous at stride 1: the variant's flags
 * vectorise them).  Compiled once per kernel variant, inside
 * kernels_variant.c, after kernels_gemm.c (gemm_range) and kernels_misc.c (split). */

/* Geometry with every one of the 3 spatial slots filled (unused: 1). */
typedef struct {
    int64_t in[3], out[3], k[3], s[3], d[3], p[3];
    int64_t nin, nout, ntap; /* products */
} Geo;

static void geo_init(Geo *g, const RtConvParams *p, const RtBuf *x) {
    g->nin = g->nout = g->ntap = 1;
    for (int i = 0; i < 3; i++) {
        bool used = i < p->nsp;
        g->in[i] = used ? x->dims[2 + i] : 1;
        g->out[i] = p->out[i], g->k[i] = p->k[i], g->s[i] = p->stride[i], g->d[i] = p->dil[i], g->p[i] = p->pad_lo[i];
        g->nin *= g->in[i], g->nout *= g->out[i], g->ntap *= g->k[i];
    }
}

/* For i = o·s + off: the outputs o in [*lo, *hi) whose i lies in [0, n), o < out. */
static void line_range(int64_t off, int64_t s, int64_t n, int64_t out, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = off > n - 1 ? 0 : (n - 1 - off) / s + 1;
    *lo = a < out ? a : out;
    *hi = b < out ? b : out;
    if (*hi < *lo) *hi = *lo;
}

/* Tap number t as (j0, j1, j2). */
static void tap3(const Geo *g, int64_t t, int64_t *j) {
    j[2] = t % g->k[2], t /= g->k[2];
    j[1] = t % g->k[1], j[0] = t / g->k[1];
}

#ifdef __AVX2__
/* dst[j·ld + i] = src[i·ls + j] for i, j < 8. */
static void transpose8(const float *src, int64_t ls, float *dst, int64_t ld) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * ls);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    /* r[0..3]: columns 0,1,2,3 (lane 0) and 4,5,6,7 (lane 1) of rows 0-3; r[4..7] of rows 4-7 */
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(dst + j * ld, _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
        _mm256_storeu_ps(dst + (j + 4) * ld, _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
    }
}
#endif

/* x [B, C, H, W] -> y [B, Hp, Wp, C], zero outside x (one part: rows of y). */
static void rt_k_pad_nhwc(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtConvParams *p = &op->p.conv;
    const RtBuf *xb = BUF_IN(0), *yb = BUF_OUT(0);
    int64_t C = xb->dims[1], H = xb->dims[2], W = xb->dims[3], Hp = yb->dims[1], Wp = yb->dims[2], r0, r1;
    const float *x = IN(0);
    float *y = OUT(0);
    split(yb->dims[0] * Hp, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t b = r / Hp, h = r % Hp - p->pad_lo[0], lo, hi;
        float *dst = y + r * Wp * C;
        if (h < 0 || h >= H) {
            memset(dst, 0, (size_t)(Wp * C) * sizeof(float));
            continue;
        }
        line_range(-p->pad_lo[1], 1, W, Wp, &lo, &hi);
        memset(dst, 0, (size_t)(lo * C) * sizeof(float));
        memset(dst + hi * C, 0, (size_t)((Wp - hi) * C) * sizeof(float));
        const float *src = x + (b * C * H + h) * W - p->pad_lo[1];
        /* a transpose: C rows of W in, W rows of C out, a few channels at a time */
        for (int64_t c0 = 0; c0 < C; c0 += 8) {
            int64_t c1 = c0 + 8 < C ? c0 + 8 : C, w = lo;
#ifdef __AVX2__
            if (c1 - c0 == 8) /* 8x8 blocks in registers: the scalar walk was 6% of a 64-channel 56x56 conv */
                for (; w + 8 <= hi; w += 8) transpose8(src + c0 * H * W + w, H * W, dst + w * C + c0, C);
#endif
            for (; w < hi; w++)
                for (int64_t c = c0; c < c1; c++) dst[w * C + c] = src[c * H * W + w];
        }
    }
}

/* A one-group 2-D convolution on the GEMM tile as an implicit GEMM: no
 * copy of the taps.  Where x lies padded and channels last, the taps a
 * kernel row ky reads for output positions ox0.. of output row oy are
 * positions apart by stride·C floats, each one span of KW·C floats at
 * dilation 1 (C per tap otherwise): so each piece of K is an A operand
 * read where it lies (am = stride·C, ak = 1), and a tile never crosses an
 * output row.  W [KH·KW·C, Cout] is in that K order; the tile's partial
 * sums carry from one piece to the next, and the last runs the epilogue
 * (bias, y's channels-first layout).  The gather this replaces copied
 * every tap of every position (6% of a 64-channel 56x56 run in perf). */
typedef struct {
    int64_t oy, ox, mr; /* the tile: output row, first column, positions */
} ConvTile;

static void rt_k_conv_gemm(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtConvParams *p = &op->p.conv;
    const RtBuf *xb = BUF_IN(0), *wb = BUF_IN(1), *yb = BUF_OUT(0);
    int64_t Hp = xb->dims[1], Wp = xb->dims[2], C = xb->dims[3], cout = wb->dims[0], wo = p->out[1];
    int64_t plane = (int64_t)p->out[0] * wo, kh = p->k[0], kw = p->k[1], depth = kh * kw * C;
    int64_t seg = p->dil[1] == 1 ? kw * C : C; /* K-piece read as one span per position */
    const float *x = IN(0), *w = IN(1), *bias = p->has_bias ? IN(2) : NULL;
    float *y = OUT(0);
    const int64_t KC = rt_block.kc, ntile_max = RT_MB_MAX / MR;
    float part[RT_MB_MAX][NR] __attribute__((aligned(64)));
    ConvTile tl[RT_MB_MAX / MR];
    int64_t m0, m1, n0, n1;
    split_mn(yb->dims[0] * plane, cout, ith, nth, &m0, &m1, &n0, &n1);
    for (int64_t q = m0; q < m1;) {
        /* a block of tiles in one batch entry, cut at the ends of output rows */
        int64_t b = q / plane, nt = 0;
        for (; nt < ntile_max && q < m1 && q / plane == b; nt++) {
            int64_t pos = q % plane, ox = pos % wo, len = wo - ox;
            if (len > MR) len = MR;
            if (len > m1 - q) len = m1 - q;
            tl[nt] = (ConvTile){pos / wo, ox, len};
            q += len;
        }
        const float *xe = x + b * Hp * Wp * C;
        float *ye = y + b * cout * plane;
        for (int64_t n = n0; n < n1; n += NR) {
            int nc = n1 - n < NR ? (int)(n1 - n) : NR;
            for (int64_t k0 = 0, kl; k0 < depth; k0 += kl) {
                kl = kblock_len(depth, k0, KC);
                for (int64_t t = 0; t < nt; t++) {
                    const ConvTile *c = &tl[t];
                    float(*pt)[NR] = part + t * MR;
                    Epi e = {.alpha = 1.0f, .bias = bias, .act = RT_ACT_NONE, .ym = 1, .yn = plane};
                    e.y = ye + c->oy * wo + c->ox, e.rm = 1, e.rn = plane;
                    for (int64_t k = k0; k < k0 + kl;) { /* the block's pieces, one per span */
                        int64_t s = k / seg, in_s = k % seg, len = seg - in_s;
                        if (len > k0 + kl - k) len = k0 + kl - k;
                        int64_t ky = s * seg / (kw * C), kx = p->dil[1] == 1 ? 0 : s % kw;
                        int64_t iy = c->oy * p->stride[0] + ky * p->dil[0], ix = c->ox * p->stride[1] + kx * p->dil[1];
                        Opnd o = {.a = xe + (iy * Wp + ix) * C + in_s,
                                  .am = p->stride[1] * C,
                                  .ak = 1,
                                  .k = len,
                                  .ldb = NR,
                                  .f16 = 0};
                        o.b0 = w + (n / NR * depth + k) * NR, o.b1 = (const float *)o.b0 + 32;
                        bool last = k + len >= depth;
                        tile_any(&o, 0, (int)c->mr, n, nc, &e, k ? (const float(*)[NR])pt : NULL, last ? NULL : pt,
                                 (Ahead){0});
                        k += len;
                    }
                }
            }
        }
    }
    (void)Hp;
}

/* y[o·ys] += w · x[o·xs] for o < n: stride 1 on both is the hot case. */
static void axpy_line(float *y, int64_t ys, const float *x, int64_t xs, float w, int64_t n) {
    if (ys == 1 && xs == 1) {
        for (int64_t o = 0; o < n; o++) y[o] += w * x[o];
    } else {
        for (int64_t o = 0; o < n; o++) y[o * ys] += w * x[o * xs];
    }
}

/* One output channel oc of batch entry b of a (grouped) convolution. */
static void conv_channel(const Geo *g, const float *xb, const float *w, int64_t cg, float *y) {
    for (int64_t ic = 0; ic < cg; ic++) {
        const float *xc = xb + ic * g->nin;
        for (int64_t t = 0; t < g->ntap; t++) {
            float wv = w[ic * g->ntap + t];
            if (wv == 0.0f) continue;
            int64_t j[3], lo, hi;
            tap3(g, t, j);
            int64_t off2 = j[2] * g->d[2] - g->p[2];
            line_range(off2, g->s[2], g->in[2], g->out[2], &lo, &hi);
            for (int64_t o0 = 0; o0 < g->out[0]; o0++) {
                int64_t i0 = o0 * g->s[0] + j[0] * g->d[0] - g->p[0];
                if (i0 < 0 || i0 >= g->in[0]) continue;
                for (int64_t o1 = 0; o1 < g->out[1]; o1++) {
                    int64_t i1 = o1 * g->s[1] + j[1] * g->d[1] - g->p[1];
                    if (i1 < 0 || i1 >= g->in[1]) continue;
                    axpy_line(y + (o0 * g->out[1] + o1) * g->out[2] + lo, 1,
                              xc + (i0 * g->in[1] + i1) * g->in[2] + lo * g->s[2] + off2, g->s[2], wv, hi - lo);
                }
            }
        }
    }
}

/* One output channel of a transposed convolution: input i feeds output
 * o = i·s + j·d - p, so the walk is over inputs and scatters with stride s. */
static void convt_channel(const Geo *g, const float *xb, const float *w, int64_t cg, int64_t wstride, float *y) {
    for (int64_t ic = 0; ic < cg; ic++) {
        const float *xc = xb + ic * g->nin;
        for (int64_t t = 0; t < g->ntap; t++) {
            float wv = w[ic * wstride + t];
            if (wv == 0.0f) continue;
            int64_t j[3], lo, hi;
            tap3(g, t, j);
            int64_t off2 = j[2] * g->d[2] - g->p[2];
            /* inputs i2 in [lo, hi) land inside the output: 0 <= i2 s + off2 < out */
            lo = off2 >= 0 ? 0 : (-off2 + g->s[2] - 1) / g->s[2];
            hi = off2 > g->out[2] - 1 ? 0 : (g->out[2] - 1 - off2) / g->s[2] + 1;
            if (hi > g->in[2]) hi = g->in[2];
            if (hi <= lo) continue;
            for (int64_t i0 = 0; i0 < g->in[0]; i0++) {
                int64_t o0 = i0 * g->s[0] + j[0] * g->d[0] - g->p[0];
                if (o0 < 0 || o0 >= g->out[0]) continue;
                for (int64_t i1 = 0; i1 < g->in[1]; i1++) {
                    int64_t o1 = i1 * g->s[1] + j[1] * g->d[1] - g->p[1];
                    if (o1 < 0 || o1 >= g->out[1]) continue;
                    axpy_line(y + (o0 * g->out[1] + o1) * g->out[2] + lo * g->s[2] + off2, g->s[2],
                              xc + (i0 * g->in[1] + i1) * g->in[2] + lo, 1, wv, hi - lo);
                }
            }
        }
    }
}

static void rt_k_conv(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtConvParams *p = &op->p.conv;
    const RtBuf *xb = BUF_IN(0), *wb = BUF_IN(1), *yb = BUF_OUT(0);
    Geo g;
    geo_init(&g, p, xb);
    int64_t C = xb->dims[1], cout = yb->dims[1], cg = C / p->groups, og = cout / p->groups, r0, r1;
    const float *x = IN(0), *w = IN(1), *bias = p->has_bias ? IN(2) : NULL;
    float *y = OUT(0);
    split(yb->dims[0] * cout, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t b = r / cout, oc = r % cout, grp = oc / og;
        float *yr = y + r * g.nout, bv = bias ? bias[oc] : 0.0f;
        for (int64_t i = 0; i < g.nout; i++) yr[i] = bv;
        const float *xg = x + (b * C + grp * cg) * g.nin;
        if (!p->transpose)
            conv_channel(&g, xg, w + oc * cg * g.ntap, cg, yr);
        else /* W [C, Cout/groups, taps]: input channel ic's taps for oc at (ic, oc % og) */
            convt_channel(&g, xg, w + (grp * cg * og + oc % og) * g.ntap, cg, og * g.ntap, yr);
    }
    (void)wb;
}

static void rt_k_pool(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtConvParams *p = &op->p.conv;
    const RtBuf *xb = BUF_IN(0);
    Geo g;
    geo_init(&g, p, xb);
    int64_t rows = xb->dims[0] * xb->dims[1], r0, r1;
    const float *x = IN(0);
    float *y = OUT(0);
    split(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * g.nin;
        float *yr = y + r * g.nout;
        for (int64_t o = 0; o < g.nout; o++) {
            int64_t oi[3] = {o / (g.out[1] * g.out[2]), o / g.out[2] % g.out[1], o % g.out[2]};
            float acc = p->pool == RT_POOL_MAX ? -INFINITY : 0.0f;
            int64_t inside = 0, padded = 0;
            for (int64_t t = 0; t < g.ntap; t++) {
                int64_t j[3], off = 0;
                tap3(&g, t, j);
                bool in = true, inpad = true;
                for (int a = 0; a < 3; a++) {
                    int64_t i = oi[a] * g.s[a] + j[a] - g.p[a];
                    in = in && i >= 0 && i < g.in[a];
                    inpad = inpad && i >= -g.p[a] && i < g.in[a] + p->pad_hi[a]; /* unused dims: pad 0 */
                    off = off * g.in[a] + i;
                }
                padded += inpad;
                if (!in) continue;
                inside++;
                float v = xr[off];
                if (p->pool == RT_POOL_MAX)
                    acc = v > acc ? v : acc;
                else
                    acc += p->pool == RT_POOL_L2 ? v * v : v;
            }
            if (p->pool == RT_POOL_AVG) {
                int64_t n = p->exclude_pad ? inside : padded;
                acc = n ? acc / (float)n : 0.0f;
            } else if (p->pool == RT_POOL_L2) {
                acc = sqrtf(acc);
            } else if (!inside) {
                acc = 0.0f;
            }
            yr[o] = acc;
        }
    }
}
