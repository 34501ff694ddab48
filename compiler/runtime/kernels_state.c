/* kernels_state.c — RT_OP_UPDATE: x written into a box of y in place (a
 * state's write_state, or the slice_update feeding it), rounded to fp16 for
 * an fp16 state.  Included by kernels_variant.c after kernels_misc.c (its
 * IN/OUT macros and split). */

static void rt_k_update(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *xb = BUF_IN(0), *yb = BUF_OUT(0);
    int64_t start[RT_MAX_RANK];
    /* every part checks the box (a few compares) so none writes a bad one */
    if (!rt_update_box(xb, yb, &op->p.upd, op->nin > 1 ? IN(1) : NULL, op->nin > 1 ? IN(2) : NULL, start)) {
        if (ith == 0) atomic_store(&ex->index_error, 1);
        return;
    }
    int r = (int)yb->rank;
    int64_t w = r ? xb->dims[r - 1] : 1, rows = w ? xb->numel / w : 0, r0, r1;
    split(rows, ith, nth, &r0, &r1);
    if (r0 >= r1) return;
    size_t es = rt_dtype_size((RtDType)xb->dtype);
    bool narrow = yb->dtype == RT_F16 && xb->dtype == RT_F32;
    /* Row r0's place in y (its index over x's outer axes), then an odometer
     * from row to row: a decode's new key or value lands one element per
     * row (the token axis is innermost), 768 rows a layer for GPT-2, where
     * dividing out each row's index cost more than its write. */
    int64_t idx[RT_MAX_RANK] = {0}, ystr[RT_MAX_RANK], off = r ? start[r - 1] : 0, t = r0;
    for (int a = r - 1; a >= 0; a--) ystr[a] = a == r - 1 ? 1 : ystr[a + 1] * yb->dims[a + 1];
    for (int a = r - 2; a >= 0; a--) idx[a] = t % xb->dims[a], t /= xb->dims[a];
    for (int a = 0; a < r - 1; a++) off += (idx[a] + start[a]) * ystr[a];
    const unsigned char *src = (const unsigned char *)IN(0) + (size_t)(r0 * w) * es;
    for (int64_t row = r0; row < r1; row++, src += (size_t)w * es) {
        if (narrow && w == 1)
            ((uint16_t *)OUT(0))[off] = float_to_half(*(const float *)src);
        else if (narrow)
            float_to_half_n((const float *)src, (uint16_t *)OUT(0) + off, (size_t)w);
        else
            memcpy((unsigned char *)OUT(0) + (size_t)off * es, src, (size_t)w * es);
        for (int a = r - 2; a >= 0; a--) {
            off += ystr[a];
            if (++idx[a] < xb->dims[a]) break;
            off -= idx[a] * ystr[a], idx[a] = 0;
        }
    }
}
