/* xml.c — libxml2, loaded the first time a template is parsed.  Debian's
 * libxml2 links ICU and libstdc++, and loading the three at start-up cost
 * every milc process about 1.2 ms, while a repeated build (a request note)
 * never parses a template.  The generator calls libxml2 only through the
 * functions below; its types and struct layouts come from the headers of the
 * same library, whose ABI the soname fixes. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "gen_internal.h"
#include "milc/assert.h"

#define LIBXML2_SONAME "libxml2.so.2"

static struct {
    xmlParserCtxtPtr (*new_ctxt)(void);
    void (*free_ctxt)(xmlParserCtxtPtr);
    xmlDocPtr (*read_memory)(xmlParserCtxtPtr, const char *, int, const char *, const char *, int);
    void (*free_doc)(xmlDocPtr);
    xmlNodePtr (*root)(const xmlDoc *);
    xmlChar *(*get_prop)(const xmlNode *, const xmlChar *);
    xmlAttrPtr (*has_prop)(const xmlNode *, const xmlChar *);
    long (*line)(const xmlNode *);
    xmlChar *(*content)(const xmlNode *);
    xmlFreeFunc *free; /* libxml2's xmlFree: a variable holding its deallocator */
    char err[256];     /* why loading failed; "" when it did not */
} X;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (!p && !X.err[0]) snprintf(X.err, sizeof X.err, "%s has no %s", LIBXML2_SONAME, name);
    return p;
}

static void load(void) {
    void *h = dlopen(LIBXML2_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(X.err, sizeof X.err, "%s", e ? e : "dlopen failed");
        return;
    }
    /* Object to function pointer through memcpy: ISO C has no direct cast. */
#define LOAD(field, name)                                                                                              \
    do {                                                                                                               \
        void *p_ = sym(h, name);                                                                                       \
        memcpy(&X.field, &p_, sizeof p_);                                                                              \
    } while (0)
    LOAD(new_ctxt, "xmlNewParserCtxt");
    LOAD(free_ctxt, "xmlFreeParserCtxt");
    LOAD(read_memory, "xmlCtxtReadMemory");
    LOAD(free_doc, "xmlFreeDoc");
    LOAD(root, "xmlDocGetRootElement");
    LOAD(get_prop, "xmlGetProp");
    LOAD(has_prop, "xmlHasProp");
    LOAD(line, "xmlGetLineNo");
    LOAD(content, "xmlNodeGetContent");
    X.free = sym(h, "xmlFree");
#undef LOAD
}

bool gx_load(DiagSink *d, const char *file) {
    pthread_once(&once, load);
    if (!X.err[0]) return true;
    diag_syserror(d, ((SrcLoc){file, 0, 0}), "cannot load libxml2 to read templates: %s", X.err);
    return false;
}

/* Only parsing needs a load check: every other call takes a node or document
 * a parse made, so the library is there. */
xmlParserCtxtPtr gx_new_ctxt(void) { return X.new_ctxt(); }
void gx_free_ctxt(xmlParserCtxtPtr c) { X.free_ctxt(c); }
xmlDoc *gx_read_memory(xmlParserCtxtPtr c, const char *buf, int len, const char *url, int opts) {
    return X.read_memory(c, buf, len, url, NULL, opts);
}
void gx_free_doc(xmlDoc *doc) {
    if (doc) X.free_doc(doc);
}
xmlNode *gx_root(const xmlDoc *doc) { return X.root(doc); }
xmlChar *gx_prop(const xmlNode *n, const char *name) { return X.get_prop(n, (const xmlChar *)name); }
bool gx_has_prop(const xmlNode *n, const char *name) { return X.has_prop(n, (const xmlChar *)name) != NULL; }
long gx_line(const xmlNode *n) { return X.line(n); }
xmlChar *gx_content(const xmlNode *n) { return X.content(n); }
void gx_free(void *p) {
    if (p) (*X.free)(p);
}
