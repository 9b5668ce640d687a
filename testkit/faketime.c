/*
 * A clock for tests: LD_PRELOAD this into redis-server and set
 * CELL_FAKETIME_FILE to a file holding decimal nanoseconds since the Unix
 * epoch. clock_gettime(CLOCK_REALTIME*), gettimeofday and time then return
 * that instant, for Redis and for the module alike, so tests can step time
 * without sleeping. Every other clock is passed through.
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

/* The instant in the file, or -1 when there is none to read. */
static long long fake_nanos(void) {
    const char *path = env_path();
    if (!path) return -1;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[32];
    long n = syscall(SYS_read, fd, buf, sizeof buf);
    syscall(SYS_close, fd);
    if (n <= 0) return -1;
    long long v = 0;
    int digits = 0;
    for (long i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++, digits++)
        v = v * 10 + (buf[i] - '0');
    return digits ? v : -1;
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
