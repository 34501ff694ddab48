/* json.h — the one JSON writer of every --json output: Jansson values built
 * with these helpers and printed by cli_json_print.  Any bytes may become a
 * JSON string (cli_json_str): control characters are escaped by Jansson,
 * bytes that are not UTF-8 become U+FFFD, so the output always parses. */
#ifndef MILC_CLI_JSON_H
#define MILC_CLI_JSON_H

#include <stdio.h>

#include <jansson.h>

/* A string of any bytes (NULL: JSON null).  New reference. */
json_t *cli_json_str(const char *s);
/* A number rounded to `decimals` places (as "%.Nf" would show it). */
json_t *cli_json_real(double v, int decimals);
/* A number as "%.6g" shows it: 6 significant digits, an integer when that
 * shows no point or exponent (NaN and infinities: null). */
json_t *cli_json_g(double v);
/* Build an object: pairs of key and value (new references, stolen), ending
 * with NULL.  A NULL value (out of memory) makes the result NULL. */
json_t *cli_json_obj(const char *key, ...);
/* Append v (stolen) to array a. */
void cli_json_push(json_t *a, json_t *v);
/* Print v compactly and a newline on f, and release it.  0, or -1 (out of
 * memory: the message printed). */
int cli_json_print(FILE *f, json_t *v);
/* Print the diagnostics of a sink: {"diagnostics":[{file,line,col,level,message}...]}. */
struct DiagSink;
void cli_json_diags(FILE *f, const struct DiagSink *d);

#endif
