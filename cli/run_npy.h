/* run_npy.h — running a loaded model on .npy files (`milc run`). */
#ifndef MILC_CLI_RUN_NPY_H
#define MILC_CLI_RUN_NPY_H

#include "milc/model.h"

/* Bind --input NAME=FILE.npy pairs to the model's inputs (checked before
 * the model is realized, so a wrong input costs no arena), allocate outputs,
 * run, write DIR/NAME.npy for every output.  Prints what it does. */
int model_run_npy(LoadedModel *lm, const char *const *inputs, int ninputs, const char *outdir, int json,
                  int repeat, int quiet);

#endif
