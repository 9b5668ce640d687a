/*
 * A clock for tests: LD_PRELOAD this into redis-server and set
 * CELL_FAKETIME_FILE to a file holding an instant in nanoseconds since the
 * Unix epoch. clock_gettime(CLOCK_REALTIME*), gettimeofday and time then
 * return that instant, for Redis and for the module alike, so tests can step
 * time without sleeping. Every other clock is passed through.
 *
 * The file is written in place by the test kit (testkit/src/server.rs,
 * write_clock), never replaced, so the shim opens it once and reads it with
 * one pread per clock call (Redis reads the clock dozens of times a
 * command). It holds 42 bytes: the instant twice, each as 20 characters
 * (zero-padded decimal, a leading '-' for instants before the epoch),
 * separated by a space and ended by a newline. A read that catches a write
 * half done sees two different fields and reads again. Anything else in
 * the file ("real", say) means the machine's clock.
 *
 * The clock functions use raw syscalls only (no malloc, no dlsym): Debian's
 * jemalloc-linked redis-server calls the clock while its allocator is
 * initialising.
 *
 * Valkey 9 reads the wall clock (gettimeofday) at most once a millisecond
 * and advances it in between with the processor's time-stamp counter, which
 * no preloaded library can step: right after a test steps the clock, Valkey
 * would still see the old instant. It uses the counter only when
 * /proc/cpuinfo lists the constant_tsc flag (its monotonicInit), and
 * otherwise calls gettimeofday on every read, as the other servers do. So
 * while a test instant is set at start-up, fopen("/proc/cpuinfo") opens an
 * empty file instead.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *env_path(void) {
    extern char **environ;
    static const char key[] = "CELL_FAKETIME_FILE=";
    for (char **e = environ; e && *e; e++) {
        const char *s = *e;
        size_t i = 0;
        while (key[i] && s[i] == key[i]) i++;
        if (!key[i]) return s + i;
    }
    return NULL;
}

/* The clock file, opened once (by whichever thread reads first). */
static int clock_fd(void) {
    static int fd = -1;
    int seen = __atomic_load_n(&fd, __ATOMIC_ACQUIRE);
    if (seen >= 0) return seen;
    const char *path = env_path();
    if (!path) return -1;
    int opened = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (opened < 0) return -1;
    int expected = -1;
    if (!__atomic_compare_exchange_n(&fd, &expected, opened, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        syscall(SYS_close, opened);
        return expected;
    }
    return opened;
}

/* One 20-character field: 1 and the value, or 0 if it is not a number. */
static int field(const char *p, long long *out) {
    int i = 0, negative = 0;
    long long v = 0;
    if (p[0] == '-') negative = 1, i = 1;
    for (; i < 20; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = negative ? -v : v;
    return 1;
}

/* The instant in the file, or -1 when there is none to read. */
static long long fake_nanos(void) {
    int fd = clock_fd();
    if (fd < 0) return -1;
    for (int attempt = 0; attempt < 1000; attempt++) {
        char buf[42];
        long n = syscall(SYS_pread64, fd, buf, sizeof buf, 0);
        if (n != (long)sizeof buf || buf[20] != ' ' || buf[41] != '\n') return -1;
        long long a, b;
        if (!field(buf, &a) || !field(buf + 21, &b)) return -1;
        if (a == b) return a < 0 ? -1 : a;
    }
    return -1;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
    if (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE) {
        long long now = fake_nanos();
        if (now >= 0) {
            ts->tv_sec = now / 1000000000LL;
            ts->tv_nsec = now % 1000000000LL;
            return 0;
        }
    }
    return (int)syscall(SYS_clock_gettime, clk, ts);
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}

typedef FILE *(*fopen_fn)(const char *, const char *);

static FILE *open_hiding_cpuinfo(const char *symbol, const char *path, const char *mode) {
    /* Resolved on use: fopen allocates, so the allocator is ready by then. */
    fopen_fn real = (fopen_fn)dlsym(RTLD_NEXT, symbol);
    if (!real) return NULL;
    if (path && strcmp(path, "/proc/cpuinfo") == 0 && fake_nanos() >= 0)
        path = "/dev/null";
    return real(path, mode);
}

FILE *fopen(const char *path, const char *mode) {
    return open_hiding_cpuinfo("fopen", path, mode);
}

FILE *fopen64(const char *path, const char *mode) {
    return open_hiding_cpuinfo("fopen64", path, mode);
}
