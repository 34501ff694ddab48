/* test_chain.c — the library's chain (lib/src/chain.c), which `milc bench`
 * and the whole-model figures time: a whole tiny GPT-2 built through the
 * request path (every program a miss, then every one a hit under the same
 * keys), loaded from the cache, each program's x the previous one's y (the
 * same tensor with split I/O, its first channels with packed I/O), positions
 * from pos0, and two forwards giving the same finite logits.
 *
 * A failed check ends its layout's run: what follows depends on it.
 *
 *     test_chain TEMPLATE_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "milc/chain.h"
#include "test.h"

/* A check the rest of the layout's run depends on. */
#define NEED(c)                                                                                                        \
    do {                                                                                                               \
        CHECK(c);                                                                                                      \
        if (test_cur_failed_) return;                                                                                  \
    } while (0)

static int input_of(const Chain *ch, int i, const char *name) { return rt_model_find(ch->lm[i].model, name, 0); }

static void one_layout(Cache *c, const TemplatePath *tp, const char *dir, const char *io) {
    test_cur_failed_ = 0;
    Store *s = store_lmdb_wrap(c);
    NEED(s != NULL);
    DiagSink d;
    diag_init(&d);
    MilcParam extra[] = {{"io", io}};
    JobSpec spec = {.config = "tiny", .modes = "2", .chunk = 1, .whole = true, .extra = extra, .nextra = 1};
    RequestOptions o = {.tmp_root = dir, .overlap = 1};
    ChainBuilt a, b;
    NEED(chain_build(s, tp, &spec, &o, &a, &d) == MILC_OK);
    /* the second layout may share the embedding and head with the first */
    NEED(a.n == 4 && a.misses + a.hits == 4 && a.misses >= 2 && a.artifact_bytes > 0);
    NEED(chain_build(s, tp, &spec, &o, &b, &d) == MILC_OK);
    NEED(b.n == 4 && b.misses == 0 && b.hits == 4 && b.artifact_bytes == a.artifact_bytes);
    NEED(memcmp(a.keys, b.keys, sizeof *a.keys * 4) == 0);
    store_close(s);

    Chain ch;
    NEED(chain_load(&ch, c, &b, 1, 5) == MILC_OK && ch.n == 4);
    /* The embedding reads token ids (below the vocabulary) and positions
     * from pos0; every later program's x is the previous program's y. */
    int ids = input_of(&ch, 0, "input_ids"), pos = input_of(&ch, 0, "position_ids");
    NEED(ids >= 0 && pos >= 0);
    const RtTensor *ti = &ch.in[0][ids], *tpos = &ch.in[0][pos];
    NEED(ti->dtype == RT_I32 && tpos->dtype == RT_I32);
    for (size_t k = 0; k < tpos->size / 4; k++) {
        NEED(((const int32_t *)tpos->data)[k] == 5 + (int32_t)k);
        int32_t id = ((const int32_t *)ti->data)[k];
        NEED(id >= 0 && id < 512);
    }
    for (int i = 1; i < ch.n; i++) {
        int x = input_of(&ch, i, "x"), y = rt_model_find(ch.lm[i - 1].model, "y", 1);
        NEED(x >= 0 && y >= 0 && ch.in[i][x].data == ch.out[i - 1][y].data);
    }
    NEED(chain_weight_bytes(&ch, NULL, NULL, 0) > 0 &&
         chain_weight_bytes(&ch, NULL, NULL, 0) <= (double)b.artifact_bytes);

    double ms;
    uint64_t nd = 0;
    NEED(chain_run(&ch, &ms, &nd) == MILC_OK && nd >= 4 && ms > 0);
    const RtTensor *lg = chain_output(&ch, "logits");
    NEED(lg && chain_tensor_finite(lg));
    void *first = malloc(lg->size);
    NEED(first != NULL);
    memcpy(first, lg->data, lg->size);
    NEED(chain_run(&ch, &ms, NULL) == MILC_OK);
    NEED(memcmp(first, lg->data, lg->size) == 0);
    /* A NaN among the logits is seen. */
    if (lg->dtype == RT_F16)
        ((uint16_t *)lg->data)[lg->size / 4] = 0x7e00;
    else
        ((uint32_t *)lg->data)[lg->size / 8] = 0x7fc00000u;
    NEED(!chain_tensor_finite(lg));
    free(first);
    chain_free(&ch);

    chain_built_free(&a);
    chain_built_free(&b);
    diag_free(&d);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_chain TEMPLATE_DIR\n");
        return 2;
    }
    char dir[] = "/tmp/milc-test-chain-XXXXXX", err[512];
    TemplatePath tp;
    Cache *c;
    if (!mkdtemp(dir) || tpath_init(&tp, argv[1]) != 0 ||
        cache_open(&c, dir, &(CacheOptions){.no_sync = 1}, err, sizeof err)) {
        fprintf(stderr, "test_chain: cannot set up in %s\n", dir);
        return 1;
    }
    for (int packed = 0; packed < 2; packed++) {
        printf("io %s\n", packed ? "packed" : "split");
        one_layout(c, &tp, dir, packed ? "packed" : "split");
        test_failed_ += test_cur_failed_, test_passed_ += !test_cur_failed_;
    }
    cache_close(c);
    CHECK(cache_destroy(dir, err, sizeof err) == 0);
    rmdir(dir);
    tpath_free(&tp);
    TEST_MAIN_END();
}
