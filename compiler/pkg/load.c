/* load.c — find the program in a container: a model.mil file, a folder with
 * model.mil (.mlmodelc), or a .mlpackage (Manifest.json -> the root model
 * item -> its spec).  Every path taken from the package stays inside it, and
 * every weight reference is checked against its file before anything reads
 * the weights. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "milc/mil.h"
#include "pkg_internal.h"

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

PkgKind pkg_kind(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return PKG_KIND_NONE;
    if (S_ISREG(st.st_mode)) return PKG_KIND_MIL;
    if (!S_ISDIR(st.st_mode)) return PKG_KIND_NONE;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/Manifest.json", path);
    if (is_file(p)) return PKG_KIND_MLPACKAGE;
    snprintf(p, sizeof p, "%s/model.mil", path);
    return is_file(p) ? PKG_KIND_MIL_DIR : PKG_KIND_NONE;
}

/* A relative path with no empty, "." or ".." component. */
static bool plain_relative(const char *s) {
    if (!*s || *s == '/') return false;
    for (const char *c = s; *c;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) return false;
        c += n + (e ? 1 : 0);
    }
    return true;
}

char *pkg_manifest_root(Arena *a, DiagSink *d, const char *name, const char *json, size_t len) {
    SrcLoc at = {diag_intern(d, name), 0, 0};
    if (len > PKG_MAX_MANIFEST) {
        diag_error(d, at, "too large (%zu bytes, at most %d)", len, PKG_MAX_MANIFEST);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    char *out = NULL;
    if (!root) {
        SrcLoc jl = {at.file, je.line > 0 ? je.line : 0, je.column > 0 ? je.column : 0};
        diag_error(d, jl, "not valid JSON: %s", je.text);
        return NULL;
    }
    json_t *rid = json_object_get(root, "rootModelIdentifier");
    json_t *items = json_object_get(root, "itemInfoEntries");
    json_t *item = json_is_string(rid) && json_is_object(items) ? json_object_get(items, json_string_value(rid)) : NULL;
    json_t *path = json_object_get(item, "path");
    if (!json_is_object(root))
        diag_error(d, at, "not a JSON object");
    else if (!json_is_string(rid))
        diag_error(d, at, "rootModelIdentifier: missing or not a string");
    else if (!json_is_object(items))
        diag_error(d, at, "itemInfoEntries: missing or not an object");
    else if (json_object_size(items) > PKG_MAX_ITEMS)
        diag_error(d, at, "itemInfoEntries: more than %d items", PKG_MAX_ITEMS);
    else if (!json_is_object(item))
        diag_error(d, at, "itemInfoEntries[\"%.64s\"]: missing: the root model item is not listed",
                   json_string_value(rid));
    else if (!json_is_string(path))
        diag_error(d, at, "itemInfoEntries[\"%.64s\"].path: missing or not a string", json_string_value(rid));
    else if (!plain_relative(json_string_value(path)) || strlen(json_string_value(path)) > 1024)
        diag_error(d, at, "itemInfoEntries[\"%.64s\"].path: '%.128s' leaves the package's Data folder",
                   json_string_value(rid), json_string_value(path));
    else
        out = arena_strdup(a, json_string_value(path));
    json_decref(root);
    return out;
}

/* The real path of rel under base, which must stay inside base with
 * symlinks followed; NULL with a diagnostic. */
static char *inside(Arena *a, DiagSink *d, SrcLoc at, const char *base, const char *rel, const char *field) {
    char full[PATH_MAX * 2], rb[PATH_MAX], rf[PATH_MAX];
    snprintf(full, sizeof full, "%s/%s", base, rel);
    if (!realpath(base, rb)) { /* a package without its Data folder */
        diag_error(d, at, "%s: '%s' is missing: %s", field, base, strerror(errno));
        return NULL;
    }
    if (!realpath(full, rf)) {
        diag_error(d, at, "%s: '%s' is missing: %s", field, rel, strerror(errno));
        return NULL;
    }
    size_t n = strlen(rb);
    if (strncmp(rf, rb, n) != 0 || (rf[n] != '/' && rf[n] != 0)) {
        diag_error(d, at, "%s: '%s' leaves the package (a symlink to %s)", field, rel, rf);
        return NULL;
    }
    return arena_strdup(a, rf);
}

/* Every BLOBFILE reference: a path inside the model folder and a record
 * that starts inside its file.  (The checker then reads the record.) */
static void check_blob(DiagSink *d, const char *model_dir, const IrLiteral *l) {
    if (!l || l->kind != IR_LIT_BLOBFILE) return;
    char path[PATH_MAX];
    const char *why;
    struct stat st;
    if (mil_blob_path(model_dir, l->blob_path, path, sizeof path, &why) != 0)
        diag_error(d, l->loc, "blobFileValue.fileName '%s': %s", l->blob_path, why);
    else if (stat(path, &st) != 0)
        diag_error(d, l->loc, "blobFileValue.fileName '%s': %s", l->blob_path, strerror(errno));
    else if (l->blob_offset > (uint64_t)st.st_size || (uint64_t)st.st_size - l->blob_offset < 64)
        diag_error(d, l->loc, "blobFileValue.offset %llu is past the end of %s (%lld bytes)",
                   (unsigned long long)l->blob_offset, l->blob_path, (long long)st.st_size);
}

static void check_blobs(DiagSink *d, const char *model_dir, const IrProgram *p) {
    for (int f = 0; f < p->nfuncs; f++) IR_FOR_EACH_OP(op, p->funcs[f]) {
            for (int i = 0; i < op->nattrs; i++) check_blob(d, model_dir, op->attrs[i].lit);
            for (int i = 0; i < op->nargs; i++)
                if (op->args[i].kind == IR_ARG_LITERAL) check_blob(d, model_dir, op->args[i].lit);
        }
}

static int load_package(Arena *a, DiagSink *d, const char *path, PkgProgram *out) {
    char mpath[PATH_MAX];
    snprintf(mpath, sizeof mpath, "%s/Manifest.json", path);
    size_t len;
    char *json = pkg_read_file(d, mpath, PKG_MAX_MANIFEST, &len);
    if (!json) return -1;
    char *rel = pkg_manifest_root(a, d, mpath, json, len);
    free(json);
    if (!rel) return -1;
    char data[PATH_MAX];
    snprintf(data, sizeof data, "%s/Data", path);
    SrcLoc at = {diag_intern(d, mpath), 0, 0};
    char *spec_path = inside(a, d, at, data, rel, "root model item path");
    if (!spec_path) return -1;
    /* Name the file as the user's path spells it, not its real path. */
    const char *shown = arena_printf(a, "%s/Data/%s", path, rel);
    char *spec = pkg_read_file(d, spec_path, PKG_MAX_SPEC, &len);
    if (!spec) return -1;
    out->prog = pkg_read_spec(a, d, shown, spec, len);
    free(spec);
    out->file = diag_intern(d, shown);
    char *slash = strrchr(spec_path, '/');
    out->model_dir = arena_strndup(a, spec_path, (size_t)(slash - spec_path));
    return out->prog ? 0 : -1;
}

static int load_text(Arena *a, DiagSink *d, const char *file, const char *model_dir, PkgProgram *out) {
    size_t len;
    char *text = pkg_read_file(d, file, PKG_MAX_MIL, &len);
    if (!text) return -1;
    out->prog = mil_parse(a, d, file, text, len);
    free(text);
    out->file = diag_intern(d, file);
    out->model_dir = model_dir ? arena_strdup(a, model_dir) : NULL;
    return out->prog ? 0 : -1;
}

int pkg_load(Arena *a, DiagSink *d, const char *path, const char *model_path, PkgProgram *out) {
    memset(out, 0, sizeof *out);
    out->kind = pkg_kind(path);
    SrcLoc at = {diag_intern(d, path), 0, 0};
    int rc;
    switch (out->kind) {
    case PKG_KIND_MIL: {
        char *dir = NULL;
        if (!model_path) { /* the file's own folder */
            const char *slash = strrchr(path, '/');
            dir = slash ? arena_strndup(a, path, (size_t)(slash - path + (slash == path))) : arena_strdup(a, ".");
        }
        rc = load_text(a, d, path, model_path ? model_path : dir, out);
        break;
    }
    case PKG_KIND_MIL_DIR:
        rc = load_text(a, d, arena_printf(a, "%s/model.mil", path), model_path ? model_path : path, out);
        break;
    case PKG_KIND_MLPACKAGE:
        if (model_path) diag_warn(d, at, "--model-path is ignored: a package's weights live in the package");
        rc = load_package(a, d, path, out);
        break;
    default: {
        /* A path that is not there is the system's answer (exit 3, as for
         * any file milc cannot open); one that holds no program is the input's. */
        struct stat sb;
        if (stat(path, &sb) != 0)
            diag_syserror(d, at, "cannot open '%s': %s", path, strerror(errno));
        else if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
            diag_error(d, at, "not a regular file or a folder");
        else
            diag_error(d, at, "neither a MIL file, a folder with model.mil, nor a .mlpackage");
        return -1;
    }
    }
    if (rc == 0 && out->kind == PKG_KIND_MLPACKAGE) check_blobs(d, out->model_dir, out->prog);
    return rc == 0 && !diag_failed(d) ? 0 : -1;
}
