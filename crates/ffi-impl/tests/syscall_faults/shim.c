/* A fault-injection shim for tests/syscall_faults.rs, loaded with
 * LD_PRELOAD into a child test process. It wraps the system calls a
 * store's writes go through and, once armed, fails the chosen one with EIO
 * at the chosen position among the calls on paths under a root directory
 * (once, or from there on). Calls on other paths (the test harness's own
 * output, for one) are never counted or failed.
 *
 * Control, looked up with dlsym by the child:
 *   dsh_fault_arm(op, at, persistent, root)   count calls of `op` from now
 *   dsh_fault_also(op, at, persistent)         fail a second call as well
 *   dsh_fault_clear()                          stop failing (keep counting)
 *   dsh_fault_calls()                          matching calls since arming
 *   dsh_fault_injected()                       failures injected since arming
 *   dsh_fault_injected_in(name)                those of them on a path with a
 *                                              component `name` (a session's
 *                                              directory)
 *   dsh_fault_healed()                         failed directory syncs that
 *                                              lost nothing: the directory's
 *                                              entries are those of its last
 *                                              good sync, or it synced fine
 *                                              again later
 * `op` is one of: write pwrite fsync fdatasync ftruncate link rename dirsync
 * (`fsync` counts regular files only, `dirsync` fsyncs of directories).
 * With DSH_FAULT_TRACE set, each injected failure prints a backtrace. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

enum op { OP_NONE, OP_WRITE, OP_PWRITE, OP_FSYNC, OP_FDATASYNC, OP_FTRUNCATE,
          OP_LINK, OP_RENAME, OP_DIRSYNC };

/* Up to two armed calls: the one counted (slot 0) and one more (slot 1,
 * to fail a recovery step after a first failure). */
static struct slot { volatile int op; long at; int persistent; long calls; } slots[2];
static volatile int failing = 0;
static volatile long injected = 0;
static volatile long healed = 0;
/* Directories under the root: the listing at the last good sync, and
 * whether a sync failed since then that was not made good. */
#define LISTING 8192
#define MAX_DIRS 16
static struct { char path[PATH_MAX]; char synced[LISTING]; int failed; } dirs[MAX_DIRS];
static int dir_count = 0;
/* The paths of the failures injected since arming (the first MAX_NOTED). */
#define MAX_NOTED 256
static char noted[MAX_NOTED][512];
static volatile long noted_count = 0;
static char root[PATH_MAX];
static size_t root_len = 0;

static int op_of(const char *name) {
    static const char *names[] = { "", "write", "pwrite", "fsync", "fdatasync",
                                   "ftruncate", "link", "rename", "dirsync" };
    for (int i = 1; i < (int)(sizeof names / sizeof names[0]); i++)
        if (strcmp(name, names[i]) == 0) return i;
    return OP_NONE;
}

void dsh_fault_arm(const char *op, long at, int persistent, const char *dir) {
    slots[0].op = slots[1].op = OP_NONE;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    snprintf(root, sizeof root, "%s", dir);
    root_len = strlen(root);
    slots[0] = (struct slot){ OP_NONE, at, persistent, 0 };
    slots[1] = (struct slot){ OP_NONE, -1, 0, 0 };
    injected = 0;
    healed = 0;
    noted_count = 0;
    dir_count = 0;
    failing = 1;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    slots[0].op = op_of(op);
}

void dsh_fault_also(const char *op, long at, int persistent) {
    slots[1] = (struct slot){ OP_NONE, at, persistent, 0 };
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    slots[1].op = op_of(op);
}

static int armed(int op) { return slots[0].op == op || slots[1].op == op; }

void dsh_fault_clear(void) { failing = 0; }
long dsh_fault_calls(void) { return slots[0].calls; }
long dsh_fault_injected(void) { return injected; }
long dsh_fault_healed(void) { return healed; }

long dsh_fault_injected_in(const char *name) {
    char component[256];
    snprintf(component, sizeof component, "/%s/", name);
    size_t n = strlen(name);
    long count = 0, total = noted_count < MAX_NOTED ? noted_count : MAX_NOTED;
    for (long i = 0; i < total; i++) {
        const char *p = noted[i];
        size_t len = strlen(p);
        if (strstr(p, component) ||
            (len > n && p[len - n - 1] == '/' && strcmp(p + len - n, name) == 0))
            count++;
    }
    return count;
}

static int under_root(const char *path) {
    if (!path || root_len == 0) return 0;
    char abs[PATH_MAX];
    if (path[0] != '/') {
        if (!getcwd(abs, sizeof abs)) return 0;
        size_t n = strlen(abs);
        snprintf(abs + n, sizeof abs - n, "/%s", path);
        path = abs;
    }
    return strncmp(path, root, root_len) == 0 &&
           (path[root_len] == '/' || path[root_len] == '\0');
}

static void fd_path(int fd, char *out, size_t n) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, out, n - 1);
    out[len > 0 ? len : 0] = '\0';
}

static int fd_under_root(int fd) {
    char target[PATH_MAX];
    fd_path(fd, target, sizeof target);
    return target[0] && under_root(target);
}

static int fd_is_dir(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether `path`, relative to `dirfd` as the *at calls take it, is under the root. */
static int at_under_root(int dirfd, const char *path) {
    if (path[0] == '/' || dirfd == AT_FDCWD) return under_root(path);
    return fd_under_root(dirfd);
}

/* The entries of directory `path` (name and inode, in readdir order),
 * as text; empty when it cannot be read or does not fit. */
static void listing(const char *path, char *out) {
    out[0] = '\0';
    DIR *d = opendir(path);
    if (!d) return;
    size_t used = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int n = snprintf(out + used, LISTING - used, "%s:%lu/", e->d_name,
                         (unsigned long)e->d_ino);
        if (n < 0 || (size_t)n >= LISTING - used) { out[0] = '\0'; break; }
        used += (size_t)n;
    }
    closedir(d);
}


static int dir_slot(const char *path) {
    for (int i = 0; i < dir_count; i++)
        if (strcmp(dirs[i].path, path) == 0) return i;
    if (dir_count == MAX_DIRS) return -1;
    snprintf(dirs[dir_count].path, PATH_MAX, "%s", path);
    dirs[dir_count].synced[0] = '\0';
    dirs[dir_count].failed = 0;
    return dir_count++;
}

/* A directory sync under the root failed (injected) or succeeded. A
 * failure loses nothing when the directory holds just what its last good
 * sync made durable; otherwise the next good sync makes it good. */
static void dir_synced(int fd, int ok) {
    char path[PATH_MAX], now[LISTING];
    fd_path(fd, path, sizeof path);
    int i = dir_slot(path);
    if (i < 0) return;
    listing(path, now);
    if (ok) {
        if (dirs[i].failed) healed += 1;
        dirs[i].failed = 0;
        memcpy(dirs[i].synced, now, LISTING);
    } else if (!dirs[i].failed && now[0] && strcmp(now, dirs[i].synced) == 0) {
        healed += 1;
    } else {
        dirs[i].failed = 1;
    }
}

/* Note the path of a failure just injected. */
static void note(const char *path) {
    long i = __atomic_fetch_add(&noted_count, 1, __ATOMIC_SEQ_CST);
    if (i < MAX_NOTED) snprintf(noted[i], sizeof noted[i], "%s", path ? path : "");
}

/* Count a matching call; 1 when this one must fail. */
static int hit(int op) {
    int fail = 0;
    for (int i = 0; i < 2; i++) {
        struct slot *sl = &slots[i];
        if (sl->op != op) continue;
        long n = __atomic_fetch_add(&sl->calls, 1, __ATOMIC_SEQ_CST);
        if (failing && (n == sl->at || (sl->persistent && n >= sl->at))) fail = 1;
    }
    if (!fail) return 0;
    __atomic_fetch_add(&injected, 1, __ATOMIC_SEQ_CST);
    if (getenv("DSH_FAULT_TRACE")) {
        /* Debugging aid: where each injected failure lands. */
        void *frames[32];
        backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
    }
    return 1;
}

static int fd_hit(int op, int fd) {
    if (!(armed(op) && fd_under_root(fd) && hit(op))) return 0;
    char path[PATH_MAX];
    fd_path(fd, path, sizeof path);
    note(path);
    return 1;
}

/* A failure of a call on `path` (relative to `dirfd`, as the *at calls
 * take it), noted. */
static int at_hit(int op, int dirfd, const char *path) {
    if (!(armed(op) && at_under_root(dirfd, path) && hit(op))) return 0;
    char full[PATH_MAX];
    if (path[0] == '/' || dirfd == AT_FDCWD) {
        snprintf(full, sizeof full, "%s", path);
    } else {
        fd_path(dirfd, full, sizeof full);
        size_t n = strlen(full);
        snprintf(full + n, sizeof full - n, "/%s", path);
    }
    note(full);
    return 1;
}

#define REAL(name) \
    static __typeof__(&name) real_##name; \
    if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(write);
    if (fd_hit(OP_WRITE, fd)) { errno = EIO; return -1; }
    return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite);
    if (fd_hit(OP_PWRITE, fd)) { errno = EIO; return -1; }
    return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite64);
    if (fd_hit(OP_PWRITE, fd)) { errno = EIO; return -1; }
    return real_pwrite64(fd, buf, n, off);
}

/* fsync and fdatasync: `file_op` on a regular file, OP_DIRSYNC on a
 * directory (whose good syncs and failures `dir_synced` follows). */
static int sync_call(int fd, int file_op, int (*real)(int)) {
    if (!armed(file_op) && !armed(OP_DIRSYNC)) return real(fd);
    int op = fd_is_dir(fd) ? OP_DIRSYNC : file_op;
    if (fd_hit(op, fd)) {
        if (op == OP_DIRSYNC) dir_synced(fd, 0);
        errno = EIO;
        return -1;
    }
    int rc = real(fd);
    if (op == OP_DIRSYNC && rc == 0 && fd_under_root(fd)) dir_synced(fd, 1);
    return rc;
}

int fsync(int fd) {
    REAL(fsync);
    return sync_call(fd, OP_FSYNC, real_fsync);
}

int fdatasync(int fd) {
    REAL(fdatasync);
    return sync_call(fd, OP_FDATASYNC, real_fdatasync);
}

int ftruncate(int fd, off_t len) {
    REAL(ftruncate);
    if (fd_hit(OP_FTRUNCATE, fd)) { errno = EIO; return -1; }
    return real_ftruncate(fd, len);
}

int ftruncate64(int fd, off_t len) {
    REAL(ftruncate64);
    if (fd_hit(OP_FTRUNCATE, fd)) { errno = EIO; return -1; }
    return real_ftruncate64(fd, len);
}

int link(const char *from, const char *to) {
    REAL(link);
    if (at_hit(OP_LINK, AT_FDCWD, to)) { errno = EIO; return -1; }
    return real_link(from, to);
}

int linkat(int fromfd, const char *from, int tofd, const char *to, int flags) {
    REAL(linkat);
    if (at_hit(OP_LINK, tofd, to)) { errno = EIO; return -1; }
    return real_linkat(fromfd, from, tofd, to, flags);
}

int rename(const char *from, const char *to) {
    REAL(rename);
    if (at_hit(OP_RENAME, AT_FDCWD, to)) { errno = EIO; return -1; }
    return real_rename(from, to);
}

int renameat(int fromfd, const char *from, int tofd, const char *to) {
    REAL(renameat);
    if (at_hit(OP_RENAME, tofd, to)) { errno = EIO; return -1; }
    return real_renameat(fromfd, from, tofd, to);
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned flags) {
    REAL(renameat2);
    if (at_hit(OP_RENAME, tofd, to)) { errno = EIO; return -1; }
    return real_renameat2(fromfd, from, tofd, to, flags);
}
