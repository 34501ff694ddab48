/* mapfile.c — read-only mapping of an input file, shared by the weight-file
 * and safetensors readers. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mapfile.h"

int blob_map_file(const char *path, SrcLoc loc, DiagSink *d, void **map, size_t *size) {
    *map = NULL;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; the regular-file
     * check below then refuses it (and the flag is moot for regular files). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        diag_error(d, loc, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        diag_error(d, loc, "cannot stat: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        diag_error(d, loc, "not a regular file");
        close(fd);
        return -1;
    }
    if (st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            diag_syserror(d, loc, "cannot map: %s", strerror(errno));
            close(fd);
            return -1;
        }
        *map = m;
        *size = (size_t)st.st_size;
    }
    close(fd); /* the mapping keeps the file alive */
    return 0;
}
