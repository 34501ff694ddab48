/* readfile.c — reading an input file into owned memory, shared by the
 * weight-file and safetensors readers.  Not mmap: a file truncated while it
 * is read (a checkpoint writer, another build) must be an error, not SIGBUS. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "milc/osfile.h"
#include "readfile.h"

int blob_open_input(const char *path, SrcLoc loc, DiagSink *d, int *fd) {
    char err[600];
    int rc = os_open_input(path, OS_REG, fd, err, sizeof err);
    /* loc names the file: the messages do not repeat it. */
    if (rc == -EINVAL)
        diag_error(d, loc, "not a regular file");
    else if (rc)
        diag_error(d, loc, "cannot open: %s", strerror(-rc));
    return rc ? -1 : 0;
}

int blob_read_file(const char *path, SrcLoc loc, DiagSink *d, void **buf, size_t *size) {
    char err[600];
    int fd, rc;
    *buf = NULL, *size = 0;
    if (blob_open_input(path, loc, d, &fd) != 0) return -1;
    rc = os_read_fd(fd, path, 0, buf, size, err, sizeof err);
    close(fd);
    if (rc) diag_syserror(d, loc, "%s", err);
    return rc ? -1 : 0;
}
