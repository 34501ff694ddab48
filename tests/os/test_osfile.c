/* test_osfile.c — the os module's file functions on real files: outside paths
 * that are FIFOs or links, pread reads, the atomic publish (umask, planted
 * links, no temp left behind) and the private-directory checks. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "milc/osfile.h"
#include "test.h"

static char dir[64];
static char *at(const char *name) {
    static char buf[4][256];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, 256, "%s/%s", dir, name);
    return b;
}
static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}
static int count_entries(const char *d) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "exit $(ls -A %s | wc -l)", d);
    return WEXITSTATUS(system(cmd));
}

TEST(inputs_refused_at_once) {
    char err[512];
    int fd;
    mkfifo(at("fifo"), 0600);
    CHECK_EQ_INT(os_open_input(at("fifo"), OS_REG, &fd, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "fifo is a FIFO, not a regular file") != NULL);
    CHECK_EQ_INT(os_open_input(dir, OS_REG, &fd, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "is a directory, not a regular file") != NULL);
    CHECK_EQ_INT(os_open_input(dir, OS_DIR, &fd, err, sizeof err), 0);
    close(fd);
    CHECK_EQ_INT(os_open_input(at("none"), OS_REG, &fd, err, sizeof err), -ENOENT);
    void *buf;
    size_t len;
    CHECK_EQ_INT(os_read_file(at("fifo"), 0, &buf, &len, err, sizeof err), -EINVAL);
}

TEST(read_whole_file) {
    char err[512];
    void *buf;
    size_t len;
    put(at("text"), "hello");
    CHECK_EQ_INT(os_read_file(at("text"), 0, &buf, &len, err, sizeof err), 0);
    CHECK_EQ_INT(len, 5);
    CHECK_STR((char *)buf, "hello");
    CHECK_EQ_INT((uintptr_t)buf % 64, 0);
    free(buf);
    CHECK_EQ_INT(os_read_file(at("text"), 4, &buf, &len, err, sizeof err), -EFBIG);
}

TEST(publish_replaces_links_and_follows_umask) {
    char err[512];
    put(at("bait"), "precious");
    symlink(at("bait"), at("out"));
    mode_t old = umask(027);
    CHECK_EQ_INT(os_publish_file(at("out"), "new", 3, 0666, err, sizeof err), 0);
    umask(old);
    struct stat st;
    CHECK(lstat(at("out"), &st) == 0 && S_ISREG(st.st_mode));
    CHECK_EQ_INT(st.st_mode & 0777, 0640);
    void *buf;
    size_t len;
    CHECK(os_read_file(at("bait"), 0, &buf, &len, err, sizeof err) == 0 && strcmp(buf, "precious") == 0);
    free(buf);
    /* An aborted publish leaves nothing; a failed one says where. */
    OsPublish p;
    CHECK_EQ_INT(os_publish_begin(&p, at("gone"), 0666, err, sizeof err), 0);
    CHECK_EQ_INT(os_publish_write(&p, "x", 1, err, sizeof err), 0);
    os_publish_abort(&p);
    CHECK(access(at("gone"), F_OK) != 0);
    CHECK_EQ_INT(count_entries(dir), 4); /* fifo, text, bait, out */
    CHECK(os_publish_file("/nonexistent/x", "", 0, 0666, err, sizeof err) == -ENOENT);
    CHECK(strstr(err, "cannot create /nonexistent/.x.tmp-") == err);
    /* A fixed temp name: a link planted there is removed, not written through. */
    symlink(at("bait"), at("fixed.tmp"));
    CHECK_EQ_INT(os_publish_begin_as(&p, at("fixed"), at("fixed.tmp"), 0600, err, sizeof err), 0);
    CHECK_EQ_INT(os_publish_write(&p, "data", 4, err, sizeof err), 0);
    CHECK_EQ_INT(os_publish_commit(&p, err, sizeof err), 0);
    CHECK(os_read_file(at("bait"), 0, &buf, &len, err, sizeof err) == 0 && strcmp(buf, "precious") == 0);
    free(buf);
    CHECK(os_read_file(at("fixed"), 0, &buf, &len, err, sizeof err) == 0 && strcmp(buf, "data") == 0);
    free(buf);
}

TEST(private_directories) {
    char err[512];
    int fd;
    mkdir(at("priv"), 0700);
    CHECK_EQ_INT(os_dir_open_private(at("priv"), &fd, err, sizeof err), 0);
    int exists = -1;
    CHECK_EQ_INT(os_check_regular_at(fd, "priv", "nothing", &exists, err, sizeof err), 0);
    CHECK_EQ_INT(exists, 0);
    symlinkat(at("bait"), fd, "link");
    CHECK_EQ_INT(os_check_regular_at(fd, "priv", "link", &exists, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "priv/link is a symbolic link, not a regular file") == err);
    int f;
    CHECK_EQ_INT(os_open_at(fd, "priv", "link", O_RDWR | O_CREAT, 0600, &f, err, sizeof err), -EINVAL);
    mkfifoat(fd, "fifo", 0600);
    CHECK_EQ_INT(os_open_at(fd, "priv", "fifo", O_RDWR | O_CREAT, 0600, &f, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "priv/fifo is a FIFO") == err);
    CHECK_EQ_INT(os_open_at(fd, "priv", "file", O_RDWR | O_CREAT, 0600, &f, err, sizeof err), 0);
    close(f);
    close(fd);
    chmod(at("priv"), 0777);
    CHECK_EQ_INT(os_dir_open_private(at("priv"), &fd, err, sizeof err), -EPERM);
    CHECK(strstr(err, "writable by other users (mode 0777)") != NULL);
    chmod(at("priv"), 0750);
    CHECK_EQ_INT(os_dir_open_private(at("priv"), &fd, err, sizeof err), 0);
    close(fd);
    if (geteuid() == 0) {
        chown(at("priv"), 65534, 65534);
        CHECK_EQ_INT(os_dir_open_private(at("priv"), &fd, err, sizeof err), -EPERM);
        CHECK(strstr(err, "owned by uid 65534, not by you") != NULL);
    }
    /* Missing parents are made, 0700. */
    CHECK_EQ_INT(os_dir_open_private(at("a/b/c"), &fd, err, sizeof err), 0);
    close(fd);
    struct stat st;
    CHECK(stat(at("a/b"), &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK_EQ_INT(os_mkdir_real(at("priv/link"), 0777, err, sizeof err), -EEXIST);
    CHECK(strstr(err, "is a symbolic link, not a directory") != NULL);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/milc-test-os-XXXXXX");
    if (!mkdtemp(dir)) return 2;
    RUN(inputs_refused_at_once);
    RUN(read_whole_file);
    RUN(publish_replaces_links_and_follows_umask);
    RUN(private_directories);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 2;
    TEST_MAIN_END();
}
