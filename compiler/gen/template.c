/* template.c — finding, loading and describing templates, blocks and
 * presets.  libxml2 is used in a locked-down way: no network, no DTD, no
 * entity expansion, and its errors go into the DiagSink, never to stderr.
 * Names resolve only inside the search path's directories. */
#include "gen_internal.h"

#include "milc/assert.h"
#include "milc/osfile.h"

#include <dirent.h>
#include <errno.h>
#include <libxml/parser.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- files and XML ---- */

char *gen_read_file(const char *path, size_t *len, DiagSink *d) {
    /* A FIFO or device named .xml must not block a listing: opened without
     * waiting, and only a regular file is read (with pread, into our memory). */
    void *buf;
    char err[600];
    SrcLoc at = {diag_intern(d, path), 0, 0};
    int fd, rc = os_open_input(path, OS_REG, &fd, err, sizeof err);
    if (rc == -EINVAL)
        diag_error(d, at, "%s", err);
    else if (rc)
        diag_error(d, at, "cannot open: %s", strerror(-rc));
    if (rc) return NULL;
    rc = os_read_fd(fd, path, 0, &buf, len, err, sizeof err);
    close(fd);
    if (rc) {
        diag_error(d, at, "%s", err);
        return NULL;
    }
    return buf;
}

typedef struct XmlErrCtx {
    DiagSink *d;
    const char *file;
    int nerr;
} XmlErrCtx;

static void xml_error(void *data, xmlErrorPtr e) {
    xmlParserCtxtPtr ctxt = data;
    XmlErrCtx *x = ctxt->_private;
    if (!x || !e || e->level == XML_ERR_WARNING) return;
    if (x->nerr++ > 0) return; /* libxml2 cascades; the first error is the real one */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", e->message ? e->message : "XML error");
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' ')) msg[--n] = 0;
    diag_error(x->d, ((SrcLoc){x->file, e->line, e->int2 > 0 ? e->int2 : 0}), "XML: %s", msg);
}

xmlDoc *gen_xml_parse(const char *path, const char *bytes, size_t len, DiagSink *d) {
    const char *file = diag_add_source(d, path, bytes, len);
    XmlErrCtx x = {d, file, 0};
    if (!gx_load(d, file)) return NULL;
    xmlParserCtxtPtr ctxt = gx_new_ctxt();
    MILC_ASSERT(ctxt != NULL);
    ctxt->_private = &x;
    ctxt->sax->serror = xml_error;
    /* No NOENT, no DTDLOAD: entities stay unexpanded and nothing external is
     * fetched; a DOCTYPE is rejected below anyway. */
    int opts = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING;
    xmlDoc *doc = gx_read_memory(ctxt, bytes, (int)len, file, opts);
    gx_free_ctxt(ctxt);
    if (!doc || x.nerr) {
        if (!x.nerr) diag_error(d, ((SrcLoc){file, 0, 0}), "XML: cannot parse");
        if (doc) gx_free_doc(doc);
        return NULL;
    }
    if (doc->intSubset || doc->extSubset) {
        diag_error(d, ((SrcLoc){file, 1, 0}), "a DOCTYPE is not allowed in templates");
        gx_free_doc(doc);
        return NULL;
    }
    return doc;
}

SrcLoc gen_loc(DiagSink *d, const char *path, xmlNode *n) {
    return ((SrcLoc){diag_intern(d, path), n ? (int)gx_line(n) : 0, 0});
}

const char *gen_attr(Arena *a, xmlNode *n, const char *name) {
    xmlChar *v = gx_prop(n, name);
    if (!v) return NULL;
    char *r = arena_strdup(a, (const char *)v);
    gx_free(v);
    return r;
}

static bool is_elem(xmlNode *n, const char *name) {
    return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

/* The element's text content, trimmed, arena copy ("" when empty). */
static const char *elem_text(Arena *a, xmlNode *n) {
    xmlChar *c = gx_content(n);
    const char *s = c ? (const char *)c : "";
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') s++;
    size_t len = strlen(s);
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\n' || s[len - 1] == '\t' || s[len - 1] == '\r')) len--;
    char *r = arena_strndup(a, s, len);
    if (c) gx_free(c);
    return r;
}

/* ---- the search path ---- */

/* A template or block name: segments of [A-Za-z0-9_-] joined by '/'.  That
 * alone rules out "..", absolute paths and odd characters; realpath below
 * rules out symlinks that leave the directory. */
static bool name_ok(const char *name) {
    if (!*name || *name == '/') return false;
    const char *p = name;
    bool seg_empty = true;
    for (; *p; p++) {
        char c = *p;
        if (c == '/') {
            if (seg_empty) return false;
            seg_empty = true;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-') {
            seg_empty = false;
        } else {
            return false;
        }
    }
    return !seg_empty && p - name < 200;
}

/* The file NAME.xml inside dir, malloc'd, or NULL. */
static char *resolve_in(const char *dir, const char *name) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.xml", dir, name);
    char real[PATH_MAX], realdir[PATH_MAX];
    if (!realpath(path, real) || !realpath(dir, realdir)) return NULL;
    size_t n = strlen(realdir);
    if (strncmp(real, realdir, n) != 0 || real[n] != '/') return NULL; /* a symlink out */
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
    return strdup(path);
}

/* The file NAME.xml inside the first directory that has it, or NULL. */
static char *resolve(const GenSearchPath *sp, const char *name) {
    for (int i = 0; i < sp->count; i++) {
        char *p = resolve_in(sp->dirs[i], name);
        if (p) return p;
    }
    return NULL;
}

char *gen_resolve(const GenSearchPath *sp, const char *name) { return name_ok(name) ? resolve(sp, name) : NULL; }

/* ---- the path's digest ---- */

/* A template directory is small; a path naming something else (a home
 * directory) is given up on quickly rather than walked, and its requests
 * simply get no note. */
enum { DIGEST_MAX_FILES = 4096, DIGEST_MAX_ENTRIES = 16384, DIGEST_MAX_DEPTH = 8 };
#define DIGEST_MAX_BYTES ((off_t)64 << 20)

typedef struct {
    XXH3_state_t *st;
    int files, entries;
    off_t bytes;
} PathDigest;

static void digest_item(PathDigest *pd, const char *what, const void *bytes, size_t len) {
    uint64_t lens[2] = {strlen(what), len};
    XXH3_128bits_update(pd->st, lens, sizeof lens);
    XXH3_128bits_update(pd->st, what, lens[0]);
    if (len) XXH3_128bits_update(pd->st, bytes, len);
}

static bool is_xml(const char *name) {
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".xml") == 0;
}

/* Every *.xml under dir/rel, in name order: "rel/name" and the bytes.
 * false when the tree is too big to be a template directory. */
static bool digest_tree(PathDigest *pd, const char *dir, const char *rel, int depth) {
    char path[PATH_MAX];
    int lp = snprintf(path, sizeof path, "%s%s%s", dir, *rel ? "/" : "", rel);
    if (lp < 0 || (size_t)lp >= sizeof path) return false;
    struct dirent **ents;
    int n = scandir(path, &ents, NULL, alphasort);
    if (n > 0 && (pd->entries += n) > DIGEST_MAX_ENTRIES) {
        for (int i = 0; i < n; i++) free(ents[i]);
        free(ents);
        return false;
    }
    if (n < 0) {
        digest_item(pd, errno == ENOENT ? "absent" : "unreadable", rel, strlen(rel));
        return true;
    }
    bool ok = true;
    for (int i = 0; i < n; i++) {
        const char *nm = ents[i]->d_name;
        char r[PATH_MAX], full[PATH_MAX];
        int lr = snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", nm);
        int lf = snprintf(full, sizeof full, "%s/%s", dir, r);
        if (lr < 0 || lf < 0 || (size_t)lr >= sizeof r || (size_t)lf >= sizeof full)
            ok = false; /* no such template path */
        struct stat st;
        if (!ok || nm[0] == '.' || stat(full, &st) != 0) {
            free(ents[i]);
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            ok = depth < DIGEST_MAX_DEPTH && digest_tree(pd, dir, r, depth + 1);
        } else if (S_ISREG(st.st_mode) && is_xml(nm)) {
            ok = ++pd->files <= DIGEST_MAX_FILES && (pd->bytes += st.st_size) <= DIGEST_MAX_BYTES;
            size_t len = 0;
            DiagSink quiet; /* an unreadable file is digested as such; a load reports it */
            diag_init(&quiet);
            char *bytes = ok ? gen_read_file(full, &len, &quiet) : NULL;
            diag_free(&quiet);
            digest_item(pd, bytes ? "file" : "unreadable", r, strlen(r));
            if (bytes) digest_item(pd, "bytes", bytes, len);
            free(bytes);
        }
        free(ents[i]);
    }
    free(ents);
    return ok;
}

int gen_path_digest(const GenSearchPath *sp, uint8_t out[16]) {
    PathDigest pd = {XXH3_createState(), 0, 0, 0};
    if (!pd.st) return -1;
    XXH3_128bits_reset(pd.st);
    bool ok = true;
    for (int i = 0; i < sp->count && ok; i++) {
        digest_item(&pd, "dir", sp->dirs[i], strlen(sp->dirs[i]));
        ok = digest_tree(&pd, sp->dirs[i], "", 0);
    }
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(pd.st));
    memcpy(out, canon.digest, 16);
    XXH3_freeState(pd.st);
    return ok ? 0 : -1;
}

/* ---- loading ---- */

static GenBlock *load_block(GenTemplate *t, const char *name, SrcLoc at, DiagSink *d, int depth);

/* Load every block an element tree can include, depth first. */
static int scan_includes(GenTemplate *t, const char *path, xmlNode *n, DiagSink *d, int depth) {
    int rc = 0;
    for (; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE) continue;
        if (is_elem(n, "include")) {
            const char *b = gen_attr(&t->arena, n, "block");
            SrcLoc at = gen_loc(d, path, n);
            if (!b) {
                diag_error(d, at, "<include> needs a block attribute");
                rc = -1;
                continue;
            }
            if (strchr(b, '{')) {
                diag_error(d, at,
                           "include block names are literal (no {…}), so a template's files are known before it runs");
                rc = -1;
                continue;
            }
            if (!load_block(t, b, at, d, depth + 1)) rc = -1;
        }
        if (scan_includes(t, path, n->children, d, depth) != 0) rc = -1;
    }
    return rc;
}

static GenBlock *load_block(GenTemplate *t, const char *name, SrcLoc at, DiagSink *d, int depth) {
    for (int i = 0; i < t->nblocks; i++)
        if (strcmp(t->blocks[i].name, name) == 0) return &t->blocks[i];
    if (depth > 16) {
        diag_error(d, at, "includes nested too deeply at '%s'", name);
        return NULL;
    }
    if (!name_ok(name)) {
        diag_error(d, at, "bad block name '%s': use letters, digits, '_', '-' and '/' (no '..', no absolute paths)",
                   name);
        return NULL;
    }
    char *path = resolve(&t->sp, name);
    if (!path) {
        diag_error(d, at, "block '%s' not found in the template path", name);
        return NULL;
    }
    size_t len;
    char *bytes = gen_read_file(path, &len, d);
    xmlDoc *doc = bytes ? gen_xml_parse(path, bytes, len, d) : NULL;
    if (!doc) {
        free(path);
        free(bytes);
        return NULL;
    }
    xmlNode *root = gx_root(doc);
    if (!root || !is_elem(root, "block")) {
        diag_error(d, gen_loc(d, path, root), "'%s' is not a block (root element must be <block>)", name);
        gx_free_doc(doc);
        free(path);
        free(bytes);
        return NULL;
    }
    if (t->nblocks == t->cap_blocks) {
        t->cap_blocks = t->cap_blocks ? t->cap_blocks * 2 : 8;
        t->blocks = realloc(t->blocks, sizeof(GenBlock) * (size_t)t->cap_blocks);
        MILC_ASSERT(t->blocks != NULL);
    }
    int idx = t->nblocks++;
    t->blocks[idx] = (GenBlock){arena_strdup(&t->arena, name), arena_strdup(&t->arena, path), doc, bytes, len};
    free(path);
    if (scan_includes(t, t->blocks[idx].path, root->children, d, depth) != 0) return NULL;
    return &t->blocks[idx];
}

const GenBlock *gen_template_block(const GenTemplate *t, const char *name) {
    for (int i = 0; i < t->nblocks; i++)
        if (strcmp(t->blocks[i].name, name) == 0) return &t->blocks[i];
    return NULL;
}

static int parse_param(GenTemplate *t, xmlNode *n, GenParam *p, DiagSink *d) {
    Arena *a = &t->arena;
    SrcLoc at = gen_loc(d, t->path, n);
    const char *name = gen_attr(a, n, "name"), *type = gen_attr(a, n, "type");
    const char *def = gen_attr(a, n, "default"), *doc = gen_attr(a, n, "doc");
    if (!name || !*name) {
        diag_error(d, at, "<param> needs a name");
        return -1;
    }
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) {
            diag_error(d, at, "parameter name '%s': use lowercase letters, digits and '_'", name);
            return -1;
        }
    p->name = name;
    p->doc = doc ? doc : "";
    if (!type || !strcmp(type, "int"))
        p->type = GEN_PARAM_INT;
    else if (!strcmp(type, "float"))
        p->type = GEN_PARAM_FLOAT;
    else if (!strcmp(type, "enum"))
        p->type = GEN_PARAM_ENUM;
    else if (!strcmp(type, "string"))
        p->type = GEN_PARAM_STRING;
    else {
        diag_error(d, at, "parameter '%s': unknown type '%s' (int, float, enum, string)", name, type);
        return -1;
    }
    if (!def) {
        diag_error(d, at, "parameter '%s' needs a default", name);
        return -1;
    }
    p->default_value = def;
    for (int k = 0; k < 2; k++) {
        const char *s = gen_attr(a, n, k ? "max" : "min");
        if (!s) continue;
        char *end;
        double v = strtod(s, &end);
        if (end == s || *end) {
            diag_error(d, at, "parameter '%s': bad %s '%s'", name, k ? "max" : "min", s);
            return -1;
        }
        if (k) {
            p->has_max = true;
            p->max = v;
        } else {
            p->has_min = true;
            p->min = v;
        }
    }
    if (p->type == GEN_PARAM_ENUM) {
        const char *vals = gen_attr(a, n, "values");
        if (!vals || !*vals) {
            diag_error(d, at, "enum parameter '%s' needs values=\"a b c\"", name);
            return -1;
        }
        const char **ch = ARENA_ARRAY(a, const char *, strlen(vals) / 2 + 2);
        int nc = 0;
        for (const char *s = vals; *s;) {
            while (*s == ' ' || *s == ',') s++;
            const char *e = s;
            while (*e && *e != ' ' && *e != ',') e++;
            if (e > s) ch[nc++] = arena_strndup(a, s, (size_t)(e - s));
            s = e;
        }
        p->choices = ch;
        p->nchoices = nc;
    }
    return 0;
}

struct GenTemplateSet {
    GenTemplate **v;
    int n, cap;
};

GenTemplateSet *gen_template_set_new(void) { return calloc(1, sizeof(GenTemplateSet)); }

void gen_template_set_free(GenTemplateSet *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) gen_template_free(s->v[i]);
    free(s->v);
    free(s);
}

static GenTemplate *template_read(const GenSearchPath *sp, const char *name, DiagSink *d);

GenTemplate *gen_template_load(const GenSearchPath *sp, const char *name, DiagSink *d) {
    GenTemplateSet *s = sp->loaded;
    for (int i = 0; s && i < s->n; i++)
        if (strcmp(s->v[i]->name, name) == 0) {
            s->v[i]->refs++;
            return s->v[i];
        }
    GenTemplate *t = template_read(sp, name, d);
    if (t && s && s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        GenTemplate **v = realloc(s->v, sizeof *v * (size_t)cap);
        if (!v) return t; /* not shared, still loaded */
        s->v = v, s->cap = cap;
    }
    if (t && s) {
        s->v[s->n++] = t;
        t->refs++;
    }
    return t;
}

static GenTemplate *template_read(const GenSearchPath *sp, const char *name, DiagSink *d) {
    if (!name_ok(name)) {
        diag_error(d, (SrcLoc){0}, "bad template name '%s': use letters, digits, '_', '-' and '/'", name);
        return NULL;
    }
    char *path = resolve(sp, name);
    if (!path) {
        diag_error(d, (SrcLoc){0}, "template '%s' not found in the template path", name);
        return NULL;
    }
    GenTemplate *t = calloc(1, sizeof *t);
    MILC_ASSERT(t != NULL);
    t->refs = 1;
    arena_init(&t->arena);
    t->sp.count = sp->count;
    const char **dirs = ARENA_ARRAY(&t->arena, const char *, sp->count + 1);
    for (int i = 0; i < sp->count; i++) dirs[i] = arena_strdup(&t->arena, sp->dirs[i]);
    t->sp.dirs = dirs;
    t->path = arena_strdup(&t->arena, path);
    free(path);
    t->bytes = gen_read_file(t->path, &t->len, d);
    if (!t->bytes || !(t->xml = gen_xml_parse(t->path, t->bytes, t->len, d))) goto fail;
    xmlNode *root = gx_root(t->xml);
    if (!root || !is_elem(root, "template")) {
        diag_error(d, gen_loc(d, t->path, root), "'%s' is not a template (root element must be <template>)", name);
        goto fail;
    }
    t->name = arena_strdup(&t->arena, name);
    t->doc = "";
    int np = 0;
    for (xmlNode *n = root->children; n; n = n->next) {
        if (is_elem(n, "param")) np++;
        if (is_elem(n, "doc")) t->doc = elem_text(&t->arena, n);
    }
    t->params = ARENA_ARRAY(&t->arena, GenParam, np + 1);
    int *lines = ARENA_ARRAY(&t->arena, int, np + 1);
    t->param_lines = lines;
    int rc = 0;
    for (xmlNode *n = root->children; n; n = n->next) {
        if (!is_elem(n, "param")) continue;
        GenParam *p = &t->params[t->nparams];
        if (parse_param(t, n, p, d) != 0) {
            rc = -1;
            continue;
        }
        for (int i = 0; i < t->nparams; i++)
            if (strcmp(t->params[i].name, p->name) == 0) {
                diag_error(d, gen_loc(d, t->path, n), "parameter '%s' declared twice", p->name);
                rc = -1;
            }
        lines[t->nparams++] = (int)gx_line(n);
    }
    if (scan_includes(t, t->path, root->children, d, 0) != 0) rc = -1;
    if (rc) goto fail;

    /* Digest: the template, then its blocks in load order (deterministic:
     * document order, depth first). */
    XXH3_state_t *st = XXH3_createState();
    MILC_ASSERT(st != NULL);
    XXH3_128bits_reset(st);
    for (int i = -1; i < t->nblocks; i++) {
        const char *nm = i < 0 ? t->name : t->blocks[i].name;
        const char *b = i < 0 ? t->bytes : t->blocks[i].bytes;
        uint64_t lens[2] = {strlen(nm), i < 0 ? t->len : t->blocks[i].len};
        XXH3_128bits_update(st, lens, sizeof lens);
        XXH3_128bits_update(st, nm, lens[0]);
        XXH3_128bits_update(st, b, lens[1]);
    }
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(st));
    memcpy(t->digest, canon.digest, 16);
    XXH3_freeState(st);
    return t;
fail:
    gen_template_free(t);
    return NULL;
}

void gen_template_free(GenTemplate *t) {
    if (!t || --t->refs > 0) return;
    for (int i = 0; i < t->nblocks; i++) {
        gx_free_doc(t->blocks[i].doc);
        free(t->blocks[i].bytes);
    }
    free(t->blocks);
    if (t->xml) gx_free_doc(t->xml);
    free(t->bytes);
    arena_free(&t->arena);
    free(t);
}

const char *gen_template_name(const GenTemplate *t) { return t->name; }
const char *gen_template_path(const GenTemplate *t) { return t->path; }
const char *gen_template_doc(const GenTemplate *t) { return t->doc; }
int gen_template_param_count(const GenTemplate *t) { return t->nparams; }
const GenParam *gen_template_param(const GenTemplate *t, int i) {
    return i >= 0 && i < t->nparams ? &t->params[i] : NULL;
}
void gen_template_digest(const GenTemplate *t, uint8_t out[16]) { memcpy(out, t->digest, 16); }

bool gen_name_matches(const char *param, const char *option) {
    if (option[0] == '-' && option[1] == '-') option += 2;
    for (; *param && *option; param++, option++) {
        char a = *param == '-' ? '_' : *param, b = *option == '-' ? '_' : *option;
        if (a != b) return false;
    }
    return *param == 0 && *option == 0;
}

int gen_template_find_param(const GenTemplate *t, const char *option) {
    for (int i = 0; i < t->nparams; i++)
        if (gen_name_matches(t->params[i].name, option)) return i;
    return -1;
}

/* ---- describe ---- */

typedef struct {
    char *p;
    size_t n, cap;
} Buf;
static void bprintf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(Buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)n + 1 > b->cap) {
        while (b->n + (size_t)n + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 1024;
        b->p = realloc(b->p, b->cap);
        MILC_ASSERT(b->p != NULL);
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

static const char *type_name(GenParamType t) {
    return t == GEN_PARAM_INT ? "int" : t == GEN_PARAM_FLOAT ? "float" : t == GEN_PARAM_ENUM ? "enum" : "string";
}

char *gen_template_describe(const GenTemplate *t) {
    Buf b = {0};
    bprintf(&b, "%s — %s\n  (%s)\n\nparameters (--name VALUE; '-' and '_' are interchangeable):\n", t->name, t->doc,
            t->path);
    for (int i = 0; i < t->nparams; i++) {
        const GenParam *p = &t->params[i];
        char opt[96];
        snprintf(opt, sizeof opt, "--%s %s", p->name, type_name(p->type));
        bprintf(&b, "  %-24s default %s", opt, p->default_value);
        if (p->has_min && p->has_max)
            bprintf(&b, ", %g..%g", p->min, p->max);
        else if (p->has_min)
            bprintf(&b, ", >= %g", p->min);
        else if (p->has_max)
            bprintf(&b, ", <= %g", p->max);
        if (p->nchoices) {
            bprintf(&b, ", one of");
            for (int k = 0; k < p->nchoices; k++) bprintf(&b, "%s %s", k ? "," : "", p->choices[k]);
        }
        bprintf(&b, "\n");
        if (*p->doc) bprintf(&b, "      %s\n", p->doc);
    }
    xmlNode *root = gx_root(t->xml);
    bool any = false;
    for (xmlNode *n = root->children; n; n = n->next) {
        if (!is_elem(n, "let") && !is_elem(n, "require")) continue;
        xmlChar *nm = gx_prop(n, "name");
        xmlChar *v = gx_prop(n, (is_elem(n, "let") ? "value" : "test"));
        if (!any) bprintf(&b, "\nderived values and requirements:\n");
        any = true;
        if (is_elem(n, "let"))
            bprintf(&b, "  %s = %s\n", nm ? (char *)nm : "?", v ? (char *)v : "?");
        else
            bprintf(&b, "  require %s\n", v ? (char *)v : "?");
        gx_free(nm);
        gx_free(v);
    }
    if (t->nblocks) {
        bprintf(&b, "\nblocks:");
        for (int i = 0; i < t->nblocks; i++) bprintf(&b, " %s", t->blocks[i].name);
        bprintf(&b, "\n");
    }
    return b.p;
}

/* ---- listing ---- */

static int entry_cmp(const void *a, const void *b) {
    const GenEntry *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (int)x->kind - (int)y->kind;
}

static void add_entry(GenEntry **v, int *n, int *cap, GenEntry e) {
    for (int i = 0; i < *n; i++)
        if ((*v)[i].kind == e.kind && strcmp((*v)[i].name, e.name) == 0) { /* shadowed by an earlier dir */
            free(e.name);
            free(e.template_name);
            free(e.path);
            free(e.doc);
            return;
        }
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *v = realloc(*v, sizeof(GenEntry) * (size_t)*cap);
        MILC_ASSERT(*v != NULL);
    }
    (*v)[(*n)++] = e;
}

static char *xml_doc_line(xmlNode *root) {
    for (xmlNode *n = root->children; n; n = n->next)
        if (is_elem(n, "doc")) {
            Arena a;
            arena_init(&a);
            const char *s = elem_text(&a, n);
            size_t len = strcspn(s, "\n");
            char *r = strndup(s, len);
            arena_free(&a);
            return r;
        }
    return strdup("");
}

/* Presets of one presets.xml; each <preset name template doc .../>. */
static void list_presets(const char *path, GenEntry **v, int *n, int *cap, DiagSink *d) {
    size_t len;
    DiagSink quiet;
    diag_init(&quiet);
    char *bytes = gen_read_file(path, &len, &quiet);
    xmlDoc *doc = bytes ? gen_xml_parse(path, bytes, len, &quiet) : NULL;
    if (!doc && quiet.count)
        diag_warn(d, ((SrcLoc){diag_intern(d, path), quiet.items[0].loc.line, 0}), "skipped: %s", quiet.items[0].msg);
    diag_free(&quiet);
    if (!doc) {
        free(bytes);
        return;
    }
    xmlNode *root = gx_root(doc);
    for (xmlNode *p = root ? root->children : NULL; p; p = p->next) {
        if (!is_elem(p, "preset")) continue;
        xmlChar *nm = gx_prop(p, "name"), *tn = gx_prop(p, "template");
        xmlChar *dc = gx_prop(p, "doc");
        if (nm && tn)
            add_entry(v, n, cap,
                      (GenEntry){GEN_ENTRY_PRESET, strdup((char *)nm), strdup((char *)tn), strdup(path),
                                 strdup(dc ? (char *)dc : "")});
        gx_free(nm);
        gx_free(tn);
        gx_free(dc);
    }
    gx_free_doc(doc);
    free(bytes);
}

int gen_list(const GenSearchPath *sp, GenEntry **out, int *count, DiagSink *d) {
    GenEntry *v = NULL;
    int n = 0, cap = 0;
    for (int i = 0; i < sp->count; i++) {
        DIR *dir = opendir(sp->dirs[i]);
        if (!dir) continue;
        char **names = NULL;
        int nn = 0, cn = 0;
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t l = strlen(e->d_name);
            if (l < 5 || strcmp(e->d_name + l - 4, ".xml") != 0) continue;
            if (nn == cn) {
                cn = cn ? cn * 2 : 16;
                names = realloc(names, sizeof(char *) * (size_t)cn);
            }
            names[nn++] = strdup(e->d_name);
        }
        closedir(dir);
        for (int k = 0; k < nn; k++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", sp->dirs[i], names[k]);
            if (strcmp(names[k], "presets.xml") == 0) {
                list_presets(path, &v, &n, &cap, d);
            } else {
                size_t len;
                DiagSink quiet; /* a broken file in a user's directory must not fail the listing */
                diag_init(&quiet);
                char *bytes = gen_read_file(path, &len, &quiet);
                xmlDoc *doc = bytes ? gen_xml_parse(path, bytes, len, &quiet) : NULL;
                if (!doc && quiet.count)
                    diag_warn(d, ((SrcLoc){diag_intern(d, path), quiet.items[0].loc.line, 0}), "skipped: %s",
                              quiet.items[0].msg);
                diag_free(&quiet);
                xmlNode *root = doc ? gx_root(doc) : NULL;
                if (root && is_elem(root, "template")) {
                    char *nm = strndup(names[k], strlen(names[k]) - 4);
                    add_entry(&v, &n, &cap,
                              (GenEntry){GEN_ENTRY_TEMPLATE, nm, strdup(nm), strdup(path), xml_doc_line(root)});
                }
                if (doc) gx_free_doc(doc);
                free(bytes);
            }
            free(names[k]);
        }
        free(names);
    }
    if (n) qsort(v, (size_t)n, sizeof *v, entry_cmp);
    *out = v;
    *count = n;
    return 0;
}

void gen_list_free(GenEntry *e, int count) {
    for (int i = 0; i < count; i++) {
        free(e[i].name);
        free(e[i].template_name);
        free(e[i].path);
        free(e[i].doc);
    }
    free(e);
}

xmlNode *gen_find_preset(const GenSearchPath *sp, const char *name, xmlDoc **docp, char **bytesp, char **pathp,
                         DiagSink *d) {
    /* Every presets.xml on the path, in order: the first preset of a name wins. */
    for (int i = 0; i < sp->count; i++) {
        char *path = resolve_in(sp->dirs[i], "presets");
        if (!path) continue;
        size_t len;
        char *bytes = gen_read_file(path, &len, d);
        xmlDoc *doc = bytes ? gen_xml_parse(path, bytes, len, d) : NULL;
        xmlNode *root = doc ? gx_root(doc) : NULL;
        for (xmlNode *p = root ? root->children : NULL; p; p = p->next) {
            if (!is_elem(p, "preset")) continue;
            xmlChar *nm = gx_prop(p, "name");
            bool hit = nm && strcmp((char *)nm, name) == 0;
            gx_free(nm);
            if (hit) {
                *docp = doc;
                *bytesp = bytes;
                *pathp = path;
                return p;
            }
        }
        if (doc) gx_free_doc(doc);
        free(bytes);
        free(path);
    }
    return NULL;
}
