/* specialize.c — a program's flexible inputs given sizes (mil_specialize). */
#include <stdio.h>
#include <string.h>

#include "milc/mil.h"

bool mil_specialize(IrProgram *p, const char *fname, const MilInputShape *s, int n, bool only_flexible, DiagSink *d) {
    IrFunction *f = ir_program_entry(p, fname);
    if (!f) return true; /* the compile names the missing function */
    bool ok = true;
    for (int i = 0; i < n; i++) {
        IrValue *v = NULL;
        for (int j = 0; j < f->ninputs && !v; j++)
            if (!strcmp(f->inputs[j]->name, s[i].name)) v = f->inputs[j];
        if (!v) {
            char names[512] = "";
            for (int j = 0, at = 0; j < f->ninputs && at < (int)sizeof names; j++)
                at += snprintf(names + at, sizeof names - (size_t)at, "%s'%s'", j ? ", " : "", f->inputs[j]->name);
            diag_error(d, f->loc, "--shape %s: function '%s' has no input '%s' (its inputs: %s)", s[i].name, f->name,
                       s[i].name, f->ninputs ? names : "none");
            ok = false;
            continue;
        }
        IrType *t = &v->type;
        bool flexible = false;
        for (int k = 0; k < t->rank; k++) flexible |= t->dims[k] < 0;
        if (only_flexible && !flexible) continue;
        char want[256], got[256];
        ir_dims_format(t->dims, t->rank, want, sizeof want);
        ir_dims_format(s[i].dims, s[i].rank, got, sizeof got);
        bool fits = !t->list && s[i].rank == t->rank;
        for (int k = 0; fits && k < t->rank; k++)
            fits = s[i].dims[k] >= 1 && s[i].dims[k] <= (INT64_C(1) << 31) && (t->dims[k] < 0 || t->dims[k] == s[i].dims[k]);
        if (!fits) {
            diag_error(d, v->loc, "--shape %s=%s does not fit input '%s' of shape %s (a size from 1 to 2^31 for each "
                       "'?', the others as declared)", s[i].name, got, v->name, want);
            ok = false;
            continue;
        }
        bool state = t->state;
        *t = ir_type_make(p->arena, t->dtype, t->rank, s[i].dims);
        t->state = state;
    }
    return ok;
}
