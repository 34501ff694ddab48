/* fit.c — a benchmark sweep's fit, with the checks that say when its
 * intercept is not a cost: negative, a poor fit, or a sweep that bends (the
 * working set outgrows a cache and the slope jumps).  Where it bends, a hinge
 * (two slopes joined at a measured point) is the model that fits. */
#include <math.h>
#include <string.h>

#include "milc/estimate.h"

/* A bend must explain most of the line's misfit, and the line must miss some
 * point by a visible share of its time: noise of a few % is not a cliff. */
#define BEND_SSRES_SHARE 0.25
#define BEND_MIN_MISS    0.05

static double ssres_line(const double *x, const double *y, int n, double a, double b) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (y[i] - a - b * x[i]) * (y[i] - a - b * x[i]);
    return s;
}

/* Solve the 3x3 system m·v = r by Cramer's rule; false when singular. */
static bool solve3(double m[3][3], const double r[3], double v[3]) {
    double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                 m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
    if (!(fabs(det) > 1e-12)) return false;
    for (int k = 0; k < 3; k++) {
        double t[3][3];
        memcpy(t, m, sizeof t);
        for (int i = 0; i < 3; i++) t[i][k] = r[i];
        v[k] = (t[0][0] * (t[1][1] * t[2][2] - t[1][2] * t[2][1]) - t[0][1] * (t[1][0] * t[2][2] - t[1][2] * t[2][0]) +
                t[0][2] * (t[1][0] * t[2][1] - t[1][1] * t[2][0])) /
               det;
    }
    return true;
}

/* Least squares of y = a + b x + c max(0, x - knot); its residual sum. */
static double hinge_at(const double *x, const double *y, int n, double knot, double v[3]) {
    double m[3][3] = {{0}}, r[3] = {0};
    for (int i = 0; i < n; i++) {
        double f[3] = {1, x[i], x[i] > knot ? x[i] - knot : 0};
        for (int j = 0; j < 3; j++) {
            r[j] += f[j] * y[i];
            for (int k = 0; k < 3; k++) m[j][k] += f[j] * f[k];
        }
    }
    if (!solve3(m, r, v)) return INFINITY;
    double s = 0;
    for (int i = 0; i < n; i++) {
        double e = y[i] - v[0] - v[1] * x[i] - v[2] * (x[i] > knot ? x[i] - knot : 0);
        s += e * e;
    }
    return s;
}

/* The best hinge over the interior points as knots. */
static void fit_hinge(const double *x, const double *y, int n, double syy, EstFit *f) {
    double best = INFINITY;
    for (int k = 0; k < n; k++) {
        double v[3], lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < n; i++) lo = fmin(lo, x[i]), hi = fmax(hi, x[i]);
        if (!(x[k] > lo && x[k] < hi)) continue;
        double s = hinge_at(x, y, n, x[k], v);
        if (s < best) best = s, f->knot = x[k], f->ha = v[0], f->hb = v[1], f->hc = v[2];
    }
    if (!isfinite(best)) return;
    f->has_hinge = true;
    f->hr2 = syy > 0 ? 1 - best / syy : 1;
}

static bool bends(const double *x, const double *y, int n, const EstFit *f, double ssres) {
    if (!f->has_hinge) return false;
    double s_h = 0;
    for (int i = 0; i < n; i++) {
        double e = y[i] - f->ha - f->hb * x[i] - f->hc * (x[i] > f->knot ? x[i] - f->knot : 0);
        s_h += e * e;
    }
    double miss = 0;
    for (int i = 0; i < n; i++)
        if (fabs(y[i]) > 0) miss = fmax(miss, fabs(y[i] - f->a - f->b * x[i]) / fabs(y[i]));
    return s_h <= BEND_SSRES_SHARE * ssres && miss >= BEND_MIN_MISS && fabs(f->hc) >= 0.5 * fabs(f->hb);
}

void est_fit(const double *x, const double *y, int n, EstFit *f) {
    memset(f, 0, sizeof *f);
    f->a = f->b = f->r2 = f->knot = f->ha = f->hb = f->hc = f->hr2 = NAN;
    if (n < 2) return;
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++) mx += x[i], my += y[i];
    mx /= n, my /= n;
    double sxx = 0, sxy = 0, syy = 0;
    for (int i = 0; i < n; i++)
        sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my), syy += (y[i] - my) * (y[i] - my);
    if (!(sxx > 0)) return; /* one distinct x: no line */
    f->ok = true;
    f->b = sxy / sxx;
    f->a = my - f->b * mx;
    double ss = ssres_line(x, y, n, f->a, f->b);
    f->r2 = syy > 0 ? 1 - ss / syy : 1; /* all y equal: the line explains them exactly */
    if (f->a < 0) f->flags |= EST_FIT_NEGATIVE_INTERCEPT;
    if (f->r2 < EST_FIT_MIN_R2) f->flags |= EST_FIT_POOR;
    if (n >= 4) fit_hinge(x, y, n, syy, f);
    if (bends(x, y, n, f, ss)) f->flags |= EST_FIT_BENDS;
}

const char *est_fit_flag_name(unsigned flag) {
    switch (flag) {
    case EST_FIT_NEGATIVE_INTERCEPT: return "negative_intercept";
    case EST_FIT_POOR: return "poor_fit";
    case EST_FIT_BENDS: return "bends";
    default: return NULL;
    }
}
