/* format.c — artifact bytes: assembling the manifest (header + section table)
 * of a built plan, the file form (64-byte aligned sections) and its
 * zero-copy split back into sections, and checksum verification.
 * See ARTIFACT.md for the layout. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "milc/osfile.h"
#include "rt_internal.h"

enum { RT_MAX_SECTIONS = 1 << 20 };

static uint64_t round64(uint64_t x) { return (x + RT_FILE_ALIGN - 1) & ~(uint64_t)(RT_FILE_ALIGN - 1); }

static uint64_t manifest_checksum(const unsigned char *m, size_t size) {
    /* The checksum field itself is hashed as zero. */
    XXH3_state_t st;
    static const unsigned char zero[8];
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, m, offsetof(RtHeader, checksum));
    XXH3_64bits_update(&st, zero, 8);
    XXH3_64bits_update(&st, m + offsetof(RtHeader, checksum) + 8, size - offsetof(RtHeader, checksum) - 8);
    return XXH3_64bits_digest(&st);
}

#define RT_MODE_ROW_(id, n, name, b, nb, what) [n] = {n, name, b, nb, what},
static const RtModeInfo modes[RT_NMODES] = {RT_MODE_TABLE(RT_MODE_ROW_)};
_Static_assert(RT_MODE_DEFAULT == RT_MODE_BONDED && RT_NMODES == 3, "the table, its count and the default agree");

const RtModeInfo *rt_mode(int mode) { return mode >= 0 && mode < RT_NMODES && modes[mode].name ? &modes[mode] : NULL; }

/* Reads and checks a manifest: magic, version, backend, mode, exact size. */
static int manifest_parse(const RtSection *ms, RtHeader *h, char *err, size_t errlen) {
    if (!ms || !ms->data || ms->size < RT_HEADER_SIZE) return rt_errf(err, errlen, RT_EFORMAT, "manifest too short");
    memcpy(h, ms->data, sizeof *h);
    if (memcmp(h->magic, RT_MAGIC, 8) != 0) return rt_errf(err, errlen, RT_EFORMAT, "not a milc artifact (bad magic)");
    if (h->format_version != RT_FORMAT_VERSION)
        return rt_errf(err, errlen, RT_EVERSION, "artifact format version %u, this runtime reads %u", h->format_version,
                       RT_FORMAT_VERSION);
    if (h->backend != RT_BACKEND_CPU)
        return rt_errf(err, errlen, RT_EVERSION, "artifact backend %u is not cpu", h->backend);
    if (!rt_mode((int)h->mode)) return rt_errf(err, errlen, RT_EFORMAT, "compile mode %u invalid", h->mode);
    if (h->nsections > RT_MAX_SECTIONS || ms->size != RT_HEADER_SIZE + (uint64_t)h->nsections * RT_ENTRY_SIZE)
        return rt_errf(err, errlen, RT_EFORMAT, "manifest size %zu does not fit %u sections", ms->size, h->nsections);
    if (memchr(h->milc_version, 0, sizeof h->milc_version) == NULL)
        return rt_errf(err, errlen, RT_EFORMAT, "milc version string not terminated");
    return RT_OK;
}

static RtEntry entry_at(const RtSection *ms, uint32_t i) {
    RtEntry e;
    memcpy(&e, (const unsigned char *)ms->data + RT_HEADER_SIZE + (size_t)i * RT_ENTRY_SIZE, sizeof e);
    return e;
}

int rt_artifact_info(const RtSection *manifest, RtArtifactInfo *info, char *err, size_t errlen) {
    RtHeader h;
    int rc = manifest_parse(manifest, &h, err, errlen);
    if (rc) return rc;
    info->format_version = h.format_version;
    info->backend = h.backend;
    info->mode = h.mode;
    info->nsections = h.nsections;
    memcpy(info->milc_version, h.milc_version, sizeof info->milc_version);
    return RT_OK;
}

int rt_artifact_verify(const RtSection *secs, int n, char *err, size_t errlen) {
    RtHeader h;
    int rc = manifest_parse(n > 0 ? &secs[0] : NULL, &h, err, errlen);
    if (rc) return rc;
    if (manifest_checksum(secs[0].data, secs[0].size) != h.checksum)
        return rt_errf(err, errlen, RT_ECHECKSUM, "manifest checksum mismatch");
    if ((uint64_t)n != h.nsections + 1ull)
        return rt_errf(err, errlen, RT_EFORMAT, "%d sections given, manifest lists %u", n - 1, h.nsections);
    for (uint32_t i = 0; i < h.nsections; i++) {
        RtEntry e = entry_at(&secs[0], i);
        if (!secs[i + 1].data || secs[i + 1].size != e.size)
            return rt_errf(err, errlen, RT_EFORMAT, "section %u: %zu bytes, manifest says %llu", i, secs[i + 1].size,
                           (unsigned long long)e.size);
        if (XXH3_64bits(secs[i + 1].data, e.size) != e.checksum)
            return rt_errf(err, errlen, RT_ECHECKSUM, "section %u (kind %u id %u): checksum mismatch", i, e.kind, e.id);
    }
    return RT_OK;
}

int rt_artifact_assemble(RtArtifact **out, RtSection *secs, int n, int mode, char *err, size_t errlen) {
    uint32_t ns = (uint32_t)(n - 1);
    size_t msize = RT_HEADER_SIZE + (size_t)ns * RT_ENTRY_SIZE;
    unsigned char *m = calloc(1, msize);
    RtArtifact *a = calloc(1, sizeof *a);
    if (!m || !a) {
        free(m);
        free(a);
        for (int i = 1; i < n; i++) free((void *)secs[i].data);
        free(secs);
        return rt_errf(err, errlen, RT_ENOMEM, "out of memory assembling the artifact");
    }
    RtHeader h = {
        .format_version = RT_FORMAT_VERSION, .backend = RT_BACKEND_CPU, .mode = (uint32_t)mode, .nsections = ns};
    memcpy(h.magic, RT_MAGIC, 8);
    snprintf(h.milc_version, sizeof h.milc_version, "%s", MILC_VERSION);
    uint64_t off = round64(msize);
    for (uint32_t i = 0; i < ns; i++) {
        RtEntry e = {.kind = secs[i + 1].kind,
                     .id = secs[i + 1].id,
                     .offset = off,
                     .size = secs[i + 1].size,
                     .checksum = XXH3_64bits(secs[i + 1].data, secs[i + 1].size)};
        memcpy(m + RT_HEADER_SIZE + (size_t)i * RT_ENTRY_SIZE, &e, sizeof e);
        off = round64(off + e.size);
    }
    memcpy(m, &h, sizeof h);
    h.checksum = manifest_checksum(m, msize);
    memcpy(m, &h, sizeof h);
    secs[0] = (RtSection){.kind = RT_SEC_MANIFEST, .id = 0, .data = m, .size = msize};
    a->secs = secs;
    a->n = n;
    *out = a;
    return RT_OK;
}

int rt_artifact_sections(const RtArtifact *a, const RtSection **secs, int *n) {
    if (!a) return RT_EINVAL;
    *secs = a->secs;
    *n = a->n;
    return RT_OK;
}

void rt_artifact_free(RtArtifact *a) {
    if (!a) return;
    for (int i = 0; i < a->n; i++) free((void *)a->secs[i].data);
    free(a->secs);
    free(a);
}

size_t rt_artifact_file_size(const RtArtifact *a) {
    uint64_t off = round64(a->secs[0].size), end = a->secs[0].size;
    for (int i = 1; i < a->n; i++) {
        end = off + a->secs[i].size;
        off = round64(end);
    }
    return (size_t)end;
}

int rt_artifact_write_mem(const RtArtifact *a, void *buf, size_t cap, char *err, size_t errlen) {
    size_t total = rt_artifact_file_size(a);
    if (cap < total) return rt_errf(err, errlen, RT_EINVAL, "buffer of %zu bytes, artifact needs %zu", cap, total);
    unsigned char *p = buf;
    memset(p, 0, total);
    memcpy(p, a->secs[0].data, a->secs[0].size);
    uint64_t off = round64(a->secs[0].size);
    for (int i = 1; i < a->n; i++) {
        memcpy(p + off, a->secs[i].data, a->secs[i].size);
        off = round64(off + a->secs[i].size);
    }
    return RT_OK;
}

int rt_artifact_write_file(const RtArtifact *a, const char *path, char *err, size_t errlen) {
    size_t total = rt_artifact_file_size(a);
    unsigned char *buf = malloc(total ? total : 1);
    if (!buf) return rt_errf(err, errlen, RT_ENOMEM, "out of memory");
    rt_artifact_write_mem(a, buf, total, NULL, 0);
    char oerr[512];
    int orc = os_publish_file(path, buf, total, 0666, oerr, sizeof oerr);
    free(buf);
    if (orc) return rt_errf(err, errlen, orc == -ENOMEM ? RT_ENOMEM : RT_EIO, "%s", oerr);
    return RT_OK;
}

int rt_artifact_split(const void *bytes, size_t len, RtSection *secs, int max, int *n, char *err, size_t errlen) {
    if (!secs || max < 1) return rt_errf(err, errlen, RT_EINVAL, "no room for sections");
    if (!bytes || len < RT_HEADER_SIZE)
        return rt_errf(err, errlen, RT_EFORMAT, "artifact of %zu bytes is too short", len);
    RtHeader h;
    memcpy(&h, bytes, sizeof h);
    if (h.nsections > RT_MAX_SECTIONS) return rt_errf(err, errlen, RT_EFORMAT, "%u sections is too many", h.nsections);
    uint64_t msize = RT_HEADER_SIZE + (uint64_t)h.nsections * RT_ENTRY_SIZE;
    if (msize > len) return rt_errf(err, errlen, RT_EFORMAT, "section table runs past the end");
    RtSection ms = {.kind = RT_SEC_MANIFEST, .data = bytes, .size = (size_t)msize};
    int rc = manifest_parse(&ms, &h, err, errlen);
    if (rc) return rc;
    if ((uint64_t)max < h.nsections + 1ull)
        return rt_errf(err, errlen, RT_EFORMAT, "artifact has %u sections, room for %d", h.nsections, max - 1);
    secs[0] = ms;
    /* Sections lie in table order, each 64-aligned after the previous one: no overlaps. */
    uint64_t end = msize;
    for (uint32_t i = 0; i < h.nsections; i++) {
        RtEntry e = entry_at(&ms, i);
        if (e.offset % RT_FILE_ALIGN || e.offset < end || e.offset > len || e.size > len - e.offset)
            return rt_errf(err, errlen, RT_EFORMAT, "section %u: offset %llu size %llu out of bounds", i,
                           (unsigned long long)e.offset, (unsigned long long)e.size);
        secs[i + 1] = (RtSection){
            .kind = e.kind, .id = e.id, .data = (const unsigned char *)bytes + e.offset, .size = (size_t)e.size};
        end = e.offset + e.size;
    }
    *n = (int)h.nsections + 1;
    return RT_OK;
}

int rt_manifest_read(const RtSection *ms, RtHeader *h, RtEntry **entries, char *err, size_t errlen) {
    int rc = manifest_parse(ms, h, err, errlen);
    if (rc) return rc;
    *entries = malloc(sizeof(RtEntry) * (h->nsections ? h->nsections : 1));
    if (!*entries) return rt_errf(err, errlen, RT_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < h->nsections; i++) (*entries)[i] = entry_at(ms, i);
    return RT_OK;
}
