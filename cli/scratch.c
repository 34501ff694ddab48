/* scratch.c — scratch directories and children that must not outlive an
 * interrupted milc.  The handler only makes async-signal-safe calls: kill,
 * waitpid, nanosleep, and a removal by openat/getdents64/unlinkat on paths
 * recorded in a fixed table before the signal could arrive. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "scratch.h"

enum { MAX_DIRS = 16, MAX_CHILDREN = 256, PATH_CAP = 4096, RM_DEPTH = 8 };

/* A slot is live while used != 0; its path is written before used is set. */
static struct {
    volatile sig_atomic_t used;
    char path[PATH_CAP];
} dirs[MAX_DIRS];
static volatile pid_t children[MAX_CHILDREN];
static volatile sig_atomic_t interrupted;

/* Remove name under dirfd, recursively, never following a link. */
static void rm_at(int dirfd, const char *name, int depth) {
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    for (int pass = 0; pass < 3; pass++) { /* a thread may still add a file meanwhile */
        long n;
        lseek(fd, 0, SEEK_SET);
        while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < n;) {
                struct dirent64 *e = (struct dirent64 *)(buf + off);
                off += e->d_reclen;
                const char *s = e->d_name;
                if (s[0] == '.' && (!s[1] || (s[1] == '.' && !s[2]))) continue;
                if (unlinkat(fd, s, 0) != 0 && depth < RM_DEPTH) rm_at(fd, s, depth + 1);
            }
        }
        if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0) break;
    }
    close(fd);
}

static void rm_path(const char *path) { rm_at(AT_FDCWD, path, 0); }

static void stop_children(int sig) {
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] > 0) kill(children[i], sig);
    /* Up to 5 s for them to clean up after themselves, then no more. */
    for (int tick = 0; tick <= 500; tick++) {
        int left = 0;
        for (int i = 0; i < MAX_CHILDREN; i++) {
            pid_t p = children[i];
            if (p <= 0) continue;
            if (tick == 500) kill(p, SIGKILL);
            int st;
            pid_t w = waitpid(p, &st, tick == 500 ? 0 : WNOHANG);
            if (w == p || (w < 0 && errno == ECHILD))
                children[i] = 0;
            else
                left++;
        }
        if (!left) break;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
}

static void on_signal(int sig) {
    int saved = errno;
    interrupted = sig;
    stop_children(sig);
    for (int i = 0; i < MAX_DIRS; i++)
        if (dirs[i].used) rm_path(dirs[i].path), dirs[i].used = 0;
    /* Die of the signal, as an uninterrupted default action would. */
    signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
    errno = saved;
}

void scratch_install_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* While one runs, the others wait: the cleanup happens once. */
    sigaddset(&sa.sa_mask, SIGINT), sigaddset(&sa.sa_mask, SIGTERM), sigaddset(&sa.sa_mask, SIGHUP);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        struct sigaction old;
        /* A signal ignored by whoever started us (nohup) stays ignored. */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

/* Block the three signals while a table changes, so the handler never sees
 * a half-written slot. */
static void block(sigset_t *old) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT), sigaddset(&s, SIGTERM), sigaddset(&s, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &s, old);
}
static void unblock(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

int scratch_make(const char *root, const char *prefix, char *out, size_t n) {
    int len = snprintf(out, n, "%s/%s-%ld-XXXXXX", root, prefix, (long)getpid());
    if (len < 0 || (size_t)len >= n || (size_t)len >= PATH_CAP) {
        errno = ENAMETOOLONG;
        return -1;
    }
    sigset_t old;
    block(&old);
    int rc = mkdtemp(out) ? 0 : -1;
    int e = errno;
    for (int i = 0; rc == 0 && i < MAX_DIRS; i++) {
        if (dirs[i].used) continue;
        memcpy(dirs[i].path, out, (size_t)len + 1);
        dirs[i].used = 1;
        break; /* a full table only loses the signal-time cleanup; gc still sweeps it */
    }
    unblock(&old);
    errno = e;
    return rc;
}

void scratch_remove(const char *dir) {
    sigset_t old;
    block(&old);
    for (int i = 0; i < MAX_DIRS; i++)
        if (dirs[i].used && strcmp(dirs[i].path, dir) == 0) dirs[i].used = 0;
    unblock(&old);
    cli_rm_tree(dir);
}

void scratch_hold(sigset_t *old) { block(old); }
void scratch_release(const sigset_t *old) { unblock(old); }

void scratch_child_add(pid_t pid) {
    sigset_t old;
    block(&old);
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] <= 0) {
            children[i] = pid;
            break;
        }
    unblock(&old);
}

void scratch_child_del(pid_t pid) {
    sigset_t old;
    block(&old);
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] == pid) children[i] = 0;
    unblock(&old);
}

void scratch_forget_all(void) {
    for (int i = 0; i < MAX_DIRS; i++) dirs[i].used = 0;
    for (int i = 0; i < MAX_CHILDREN; i++) children[i] = 0;
}

int scratch_interrupted(void) { return interrupted; }

/* ---- sweeping what dead processes left ------------------------------------ */

static uint64_t tree_bytes;
static int count_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)path, (void)flag, (void)ftw;
    tree_bytes += (uint64_t)st->st_blocks * 512;
    return 0;
}

/* The owner's pid from PREFIX-PID-XXXXXX, or 0. */
static pid_t owner_of(const char *name, const char *prefix) {
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0 || name[pl] != '-') return 0;
    char *end;
    long pid = strtol(name + pl + 1, &end, 10);
    return *end == '-' && pid > 0 ? (pid_t)pid : 0;
}

void scratch_sweep(const char *root, const char *prefix, int remove_dead, ScratchUsage *u) {
    memset(u, 0, sizeof *u);
    DIR *d = opendir(root);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        pid_t pid = owner_of(e->d_name, prefix);
        struct stat st;
        char path[PATH_CAP];
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        /* In a shared $TMPDIR only our own directories are ours to judge. */
        if (!pid || lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
        int dead = kill(pid, 0) != 0 && errno == ESRCH;
        tree_bytes = 0;
        nftw(path, count_entry, 16, FTW_PHYS);
        u->dirs++, u->bytes += tree_bytes;
        if (!dead) continue;
        u->dead_dirs++, u->dead_bytes += tree_bytes;
        if (remove_dead) cli_rm_tree(path);
    }
    closedir(d);
}
