/* test_remote_url.c — remote_url_parse: both URL forms (a TCP server, a
 * Unix socket on this host) parsed into their fields, and malformed ones
 * refused with CACHE_EINVAL and a sentence naming what is wrong. */
#include "../test.h"
#include "milc/remote.h"

static int parse(const char *url, RemoteUrl *u, char *err) { return remote_url_parse(url, u, err, 600); }

TEST(tcp_forms) {
    RemoteUrl u;
    char err[600];
    CHECK_EQ_INT(parse("redis://127.0.0.1:6379", &u, err), 0);
    CHECK_STR(u.host, "127.0.0.1");
    CHECK_EQ_INT(u.port, 6379);
    CHECK_EQ_INT(u.db, 0);
    CHECK_STR(u.path, "");
    CHECK_EQ_INT(parse("redis://al:p%40ss@[::1]:7/3", &u, err), 0);
    CHECK_STR(u.user, "al");
    CHECK_STR(u.pass, "p@ss");
    CHECK_STR(u.host, "::1");
    CHECK_EQ_INT(u.port, 7);
    CHECK_EQ_INT(u.db, 3);
}

TEST(unix_forms) {
    RemoteUrl u;
    char err[600];
    CHECK_EQ_INT(parse("unix:///run/redis/redis.sock", &u, err), 0);
    CHECK_STR(u.path, "/run/redis/redis.sock");
    CHECK_STR(u.host, "");
    CHECK_EQ_INT(u.port, 0);
    CHECK_EQ_INT(u.db, 0);
    CHECK_STR(u.pass, "");
    CHECK_EQ_INT(parse("unix:///tmp/a%20b@c.sock?db=65535", &u, err), 0);
    CHECK_STR(u.path, "/tmp/a b@c.sock"); /* no user part: '@' belongs to the path */
    CHECK_EQ_INT(u.db, 65535);
    CHECK_EQ_INT(parse("unix://ci:s%3Fcr/t@/r.sock?db=2", &u, err), 0);
    CHECK_STR(u.user, "ci");
    CHECK_STR(u.pass, "s?cr/t");
    CHECK_STR(u.path, "/r.sock");
    CHECK_EQ_INT(u.db, 2);
    CHECK_EQ_INT(parse("unix://:pw@/r.sock", &u, err), 0);
    CHECK_STR(u.user, "");
    CHECK_STR(u.pass, "pw");
    /* The longest path a sockaddr_un holds (107 bytes and its NUL). */
    char url[300] = "unix:///";
    memset(url + 8, 'a', REMOTE_PATH_MAX - 2);
    CHECK_EQ_INT(parse(url, &u, err), 0);
    CHECK_EQ_INT(strlen(u.path), REMOTE_PATH_MAX - 1);
}

/* Each refused with the sentence's reason; the fields are not half set. */
TEST(bad_urls) {
    static const struct {
        const char *url, *why;
    } bad[] = {
        {"", "not a redis:// or unix:// URL"},
        {"unix:/tmp/r.sock", "not a redis:// or unix:// URL"},
        {"UNIX:///tmp/r.sock", "not a redis:// or unix:// URL"},
        {"unix://", "must be absolute"},
        {"unix:///", "missing socket path"},
        {"unix:///?db=1", "missing socket path"},
        {"unix://tmp/r.sock", "must be absolute"},
        {"unix://relative@r.sock", "must be user:password"},
        {"unix://u:p@r.sock", "must be absolute"},
        {"unix://u@/r.sock", "must be user:password"},
        {"unix://u:@/r.sock", "empty password"},
        {"unix:///tmp/r%zz.sock", "bad socket path"},
        {"unix:///tmp/r%0a.sock", "bad socket path"},
        {"unix:///tmp/r\x01.sock", "bad socket path"},
        {"unix:///tmp/r.sock%", "bad socket path"},
        {"unix:///tmp/r.sock?", "only db=N"},
        {"unix:///tmp/r.sock?db=", "only db=N"},
        {"unix:///tmp/r.sock?db=x", "only db=N"},
        {"unix:///tmp/r.sock?db=65536", "only db=N"},
        {"unix:///tmp/r.sock?db=1&x=2", "only db=N"},
        {"unix:///tmp/r.sock?db=-1", "only db=N"},
        {"unix:///tmp/r.sock?password=x", "only db=N"},
        {"unix:///tmp/r.sock?db=1?db=2", "only db=N"},
        {"redis:///tmp/r.sock", "missing :port"},
        {"redis://127.0.0.1", "missing :port"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        RemoteUrl u;
        char err[600] = "";
        int rc = parse(bad[i].url, &u, err);
        CHECK_EQ_INT(rc, CACHE_EINVAL);
        if (!strstr(err, bad[i].why) || !strstr(err, "malformed remote URL")) {
            fprintf(stderr, "'%s': got '%s', want '%s'\n", bad[i].url, err, bad[i].why);
            CHECK(0);
        }
    }
    /* One byte past what a sockaddr_un holds. */
    char url[300] = "unix:///";
    memset(url + 8, 'a', REMOTE_PATH_MAX - 1);
    RemoteUrl u;
    char err[600] = "";
    CHECK_EQ_INT(parse(url, &u, err), CACHE_EINVAL);
    CHECK(strstr(err, "too long") != NULL);
}

/* A malformed URL's message never shows what may be a password. */
TEST(password_not_shown) {
    static const char *bad[] = {"redis://u:s3cret@127.0.0.1", "redis://u:s3cret@h_st:1",  "redis://:s3%zzcret@h:1",
                                "redis://a@s3cret@h:1",       "unix://u:s3cret@rel.sock", "unix://:s3cret@/r?db=x",
                                "redis://s3cret@h:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        RemoteUrl u;
        char err[600] = "";
        CHECK_EQ_INT(parse(bad[i], &u, err), CACHE_EINVAL);
        CHECK(strstr(err, "s3") == NULL);
        CHECK(strstr(err, "malformed remote URL") != NULL);
    }
    RemoteUrl u;
    char err[600] = "";
    CHECK_EQ_INT(parse("unix:///tmp/a@b.sock?db=x", &u, err), CACHE_EINVAL); /* a path, shown whole */
    CHECK(strstr(err, "'unix:///tmp/a@b.sock?db=x'") != NULL);
}

int main(void) {
    RUN(tcp_forms);
    RUN(unix_forms);
    RUN(bad_urls);
    RUN(password_not_shown);
    TEST_MAIN_END();
}
