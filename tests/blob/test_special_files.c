/* test_special_files.c — the weight, safetensors and .npy readers given a
 * path that is not a regular file: a FIFO must be refused at once (opening
 * one used to block until a writer appeared, so a hostile BLOBFILE path or
 * --input could hang milc), a directory and /dev/null refused too.
 * Regression for tests/torture/hostile.sh "check blocks on a FIFO". */
#include "test.h"

#include "milc/blob.h"
#include "milc/npy.h"
#include "milc/safetensors.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/milc-special-XXXXXX";
static char fifo[64];

/* A watchdog: a reader that blocks fails the test instead of hanging ctest. */
static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL: a reader blocked on a FIFO\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

TEST(fifo_refused_without_blocking) {
    DiagSink d;
    diag_init(&d);
    MilBlobFile b;
    CHECK_EQ_INT(milblob_open(&b, fifo, &d), -1);
    SafetensorsFile s;
    CHECK_EQ_INT(safetensors_open(&s, fifo, &d), -1);
    CHECK_EQ_INT(d.errors, 2);
    char *r = diag_render(&d);
    CHECK(strstr(r, "not a regular file") != NULL);
    free(r);
    diag_free(&d);
    NpyFile n;
    char err[256] = "";
    CHECK_EQ_INT(npy_open(&n, fifo, err, sizeof err), NPY_EIO);
    /* The message names the cause only: no stale errno text after it. */
    CHECK(strstr(err, "not a regular file") != NULL && strchr(strstr(err, "not a regular file"), ':') == NULL);
}

TEST(directory_and_device_refused) {
    const char *paths[] = {dir, "/dev/null"};
    for (int i = 0; i < 2; i++) {
        DiagSink d;
        diag_init(&d);
        MilBlobFile b;
        CHECK_EQ_INT(milblob_open(&b, paths[i], &d), -1);
        SafetensorsFile s;
        CHECK_EQ_INT(safetensors_open(&s, paths[i], &d), -1);
        CHECK_EQ_INT(d.errors, 2);
        diag_free(&d);
        NpyFile n;
        char err[256];
        CHECK(npy_open(&n, paths[i], err, sizeof err) < 0);
    }
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    snprintf(fifo, sizeof fifo, "%s/weight.bin", dir);
    CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
    signal(SIGALRM, on_alarm);
    alarm(10);
    RUN(fifo_refused_without_blocking);
    RUN(directory_and_device_refused);
    unlink(fifo);
    rmdir(dir);
    TEST_MAIN_END();
}
