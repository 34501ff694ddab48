/* scratch.h — the CLI's scratch directories (build's CACHE/tmp-build-PID-*,
 * bench's $TMPDIR/milc-bench-PID-*) and the children it waits on: removed
 * when milc is interrupted (SIGINT, SIGTERM, SIGHUP), and swept later when
 * their owner died without a chance to (SIGKILL, a crash). */
#ifndef MILC_CLI_SCRATCH_H
#define MILC_CLI_SCRATCH_H

#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>

/* Install the handlers (once, in main).  On one of those signals milc sends
 * it on to every registered child, waits for them (at most a few seconds,
 * then SIGKILL), removes every registered scratch directory, and dies of the
 * signal itself (the shell sees 128 + its number). */
void scratch_install_handlers(void);

/* Create ROOT/PREFIX-PID-XXXXXX (mode 0700) and register it: out gets the
 * path.  0, or -1 with errno. */
int scratch_make(const char *root, const char *prefix, char *out, size_t n);
/* Remove a scratch directory made by scratch_make and unregister it. */
void scratch_remove(const char *dir);

/* Children whose lifetime is ours (bench's builds, prewarm's workers). */
void scratch_child_add(pid_t pid);
/* Hold SIGINT, SIGTERM and SIGHUP while a child is started and added, so a
 * signal never comes between the fork and scratch_child_add (the handler
 * would stop the children it knows and leave the new one running).  The
 * child releases them after scratch_forget_all; a spawned child gets *old
 * as its mask (POSIX_SPAWN_SETSIGMASK). */
void scratch_hold(sigset_t *old);
void scratch_release(const sigset_t *old);
void scratch_child_del(pid_t pid);
/* After fork, in the child: it owns none of the parent's scratch or children. */
void scratch_forget_all(void);
/* The signal that interrupted us (a worker loop's reason to stop), or 0. */
int scratch_interrupted(void);

/* Scratch under root named PREFIX-PID-* whose PID is no longer alive (or
 * all of them, live too, if !dead_only).  remove: delete them.  Counts
 * directories and their bytes on disk.  Only directories owned by us. */
typedef struct ScratchUsage {
    int dirs, dead_dirs;
    uint64_t bytes, dead_bytes;
} ScratchUsage;
void scratch_sweep(const char *root, const char *prefix, int remove_dead, ScratchUsage *u);

#endif
