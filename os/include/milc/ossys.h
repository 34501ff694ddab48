/* ossys.h — the OS services milc needs beyond C11 and POSIX.1-2008, behind
 * one interface: waiting on a 32-bit word (futex on Linux, os_sync /
 * __ulock on macOS, a condition variable elsewhere), this executable's path,
 * an identity of the current boot, and huge-page memory.  Built with
 * -DMILC_PORTABLE_OS=ON, every function takes its POSIX fallback, so Linux CI
 * tests the code a port starts from.  Nothing here prints or exits. */
#ifndef MILC_OSSYS_H
#define MILC_OSSYS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Sleeps while *addr == val, until os_wake_all(addr) (it may also return
 * early: callers re-check their condition in a loop). */
void os_wait(_Atomic uint32_t *addr, uint32_t val);
/* Wakes every thread in os_wait on addr.  Call it after changing *addr. */
void os_wake_all(_Atomic uint32_t *addr);

/* This executable's absolute path into buf (NUL-terminated): 0, or -1 when
 * the OS does not say or buf is too small. */
int os_exe_path(char *buf, size_t size);

/* Text that names this boot of the machine and changes at the next: 0 with
 * buf filled, or -1 where the OS has no such thing (callers then assume
 * every process may be in a new boot). */
int os_boot_id(char *buf, size_t size);

/* n zeroed bytes in whole 2 MB pages, each page faulted in, with the OS
 * asked for huge pages where it takes the hint: *len gets the mapping's
 * length for os_huge_free.  NULL when the mapping fails. */
void *os_huge_alloc(size_t n, size_t *len);
void os_huge_free(void *p, size_t len);
/* n zeroed bytes in whole small pages, with no huge-page hint: for memory
 * written once and read once (a build's weights), where a huge page buys no
 * TLB reach worth its cost.  Nothing is faulted in: the writer os_populates
 * each piece before it writes it, so the memory counts only as it fills.
 * Freed by os_huge_free. */
void *os_page_alloc(size_t n, size_t *len);
/* len bytes of address space, nothing committed (MAP_NORESERVE where the OS
 * has it), huge pages asked for: a bump allocator hands pieces of it out,
 * each faulted in by os_populate as it goes (one call for the piece, not a
 * fault per 4 KB page at its first use).  NULL when refused;
 * os_unreserve(p, len) gives it back. */
void *os_reserve(size_t len);
void os_populate(void *p, size_t n);
void os_unreserve(void *p, size_t len);
/* Asks for huge pages over [p, p + len) where the OS takes the hint. */
void os_huge_hint(void *p, size_t len);
/* The whole pages inside [p, p + len) of an os_huge_alloc or os_page_alloc
 * mapping go back to the OS (they read as zeros after): memory whose bytes
 * were consumed (a build's weights once packed) stops counting while the
 * rest is still used. */
void os_mem_discard(void *p, size_t len);
/* A hint: start writing bytes [off, off + len) of fd to the disk now, not
 * waiting (Linux: sync_file_range; elsewhere nothing).  A file fsynced at
 * the end then waits for its tail, not for all of it. */
void os_start_writeback(int fd, uint64_t off, uint64_t len);

/* The CPUs this process may run on (its affinity mask where the OS has one:
 * a cpuset or `taskset` limits it below the machine's online count), at
 * least 1: what a pool of worker threads is sized by. */
int os_cpu_count(void);

/* The layer's build: "linux", "macos" or "posix" (MILC_PORTABLE_OS). */
const char *os_flavour(void);

#endif
