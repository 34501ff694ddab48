/* program.h — a MIL program from any container the commands take: a
 * model.mil file, a folder with model.mil (.mlmodelc), or a .mlpackage. */
#ifndef MILC_CLI_PROGRAM_H
#define MILC_CLI_PROGRAM_H

#include <stdbool.h>

#include "cli.h"
#include "milc/mil.h"
#include "milc/pipeline.h"
#include "milc/pkg.h"

/* Read and check the program at path; its diagnostics printed, then
 * cleared from d.  d is the caller's (initialized): it keeps the program's
 * file names and text, which every location in the program points into, so
 * the caller frees it after the program (and reports later diagnostics about
 * the program through it).  EXIT_OK with out filled, or EXIT_INPUT / EXIT_SYSTEM. */
int cli_load_program(Cli *cli, const char *path, const char *model_path, MilTarget target, bool werror, Arena *arena,
                     PkgProgram *out, DiagSink *d);
/* The same with input shapes given (ProgramLoadOptions). */
int cli_load_program_with(Cli *cli, const char *path, const ProgramLoadOptions *o, Arena *arena, PkgProgram *out,
                          DiagSink *d);

/* Every --shape NAME=D0,D1,... of a (malloc'd into *out, *n of them; the
 * caller frees *out).  False after a usage error naming the bad one. */
bool cli_shapes(const char *cmd, const Args *a, MilInputShape **out, int *n);
void cli_shapes_free(MilInputShape *s, int n);

/* True when path names a program (a .mil file or a folder holding one or a
 * package) rather than an artifact or a key. */
bool cli_is_program(const char *path);

/* Write a loaded program as a package or folder (pkg_write), printing what
 * happened.  EXIT_*. */
int cli_write_program(Cli *cli, const PkgProgram *pp, PkgFormat fmt, const char *dst);

#endif
