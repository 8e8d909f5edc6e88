/* The hardened runner's hot path in C: spawn one child and see it through.
 *
 * ongrid_plugins.executors._fastrun.run() does, for one unconfined call, what
 * _process._Run driven by _drivers.PollDriver does: three O_CLOEXEC pipes (never on
 * fds 0-2), a clone-and-exec spawn ("The spawn" below) with a new session, an empty
 * signal mask, every catchable signal at its default, the pipes dup2-ed onto 0-2, the
 * checked entry onto fd 3, chdir and close_range; then one poll() loop over stdout
 * (from the exit on, or OUT_DEFER after the spawn: see watch_stdout), stderr, stdin
 * room and a pidfd, with the deadline (SIGTERM to the group, SIGKILL kill_grace later),
 * the stdout cap (SIGKILL once read), the group SIGKILLed before the zombie is reaped,
 * and the short drain of the pipes after the exit. The GIL is released for the
 * whole wait and taken back only to hand stderr bytes to Python and to let
 * Python's signal handlers run (KeyboardInterrupt: the group gets SIGTERM, its
 * grace, SIGKILL, is reaped, and the exception propagates).
 *
 * start() is the same run stepped by an event loop (a Call: one epoll of the pipes,
 * the pidfd and a timerfd); start_aside() leaves its spawn to a few plain threads
 * (no GIL, no Python) while the loop serves the other calls (see "The spawner
 * threads" below). A confined call is start()ed from the thread that confined itself
 * and seen through by Call.wait() in the calling thread (or stepped by the event
 * loop, as any Call); its group argument names the
 * call's cgroup.procs, whose every process gets SIGKILL before the child is reaped and
 * whenever the child does (setsid and double forks included: kill_group).
 *
 * It is the same state machine as the Python one, written out once more because
 * the Python version spends most of a trivial call's CPU in the interpreter. The
 * Python runner stays: it is the fallback (no compiler at install time, no pidfd,
 * no closefrom, another libc), and tests run both.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if !defined(__linux__) || !defined(SYS_close_range) || !defined(SYS_execveat) || !defined(SYS_pidfd_open)
#error "needs Linux and its headers for close_range, execveat and pidfd_open"
#endif
#if defined(__GLIBC__) && !__GLIBC_PREREQ(2, 25)
#error "needs glibc >= 2.25 (an older clone() wrote the child's pid into the caller's cache)"
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
/* The e_machine of this machine's ELF files (0: unknown, every entry exec'd by its path). */
#if defined(__x86_64__)
#define NATIVE_MACHINE 62
#elif defined(__aarch64__)
#define NATIVE_MACHINE 183
#else
#define NATIVE_MACHINE 0
#endif

#define CHUNK 65536
#define EXIT_POLL_MIN 0.001
#define EXIT_POLL_MAX 0.05
#define EXEC_FD 3
#define MAX_POLL_MS 86400000
#define SPAWN_STACKS 16 /* child stacks kept for reuse */
/* Seconds after the spawn before stdout is watched (see watch_stdout). */
#define OUT_DEFER 0.003

/* Seconds to the microsecond (the nearest double to a whole number of them, ties to even,
 * as Python's round() gives): a duration's text is then short, and cheap to write. */
static double micros(double seconds) { return nearbyint(seconds * 1e6) / 1e6; }

static double now_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct Run {
    pid_t pid;
    int reaped;
    int status_known;
    int status;
    int fd_in, fd_out, fd_err, pidfd;
    unsigned cancels; /* stop requests (Call.terminate) */
    int epfd;         /* the Call's epoll holding these descriptors, or -1 (run()) */
    int err_seen;     /* stderr bytes were handed to Python: its EOF is reported too */
    const char *payload;
    Py_ssize_t payload_left;
    char *out;
    size_t out_size, out_alloc, out_cap;
    double started, ended, deadline, grace, kill_at, drain_until, eof_bound, eof_min;
    double exit_poll, exit_poll_at;
    int have_kill_at, sigkilled, timed_out, overflow, left_open, reaped_elsewhere;
    int out_watched;     /* stdout is polled (see watch_stdout) */
    double out_watch_at; /* ...from then on at the latest */
    PyObject *on_stderr; /* called with bytes */
    char *errbuf;
    char *group; /* a confined call's cgroup.procs (every process of the call), or NULL */
    int gil_held; /* set while a Call's method that keeps the GIL works on the run */
    struct Run *live_next, *live_prev; /* run()'s own runs, in live_runs while they run */
} Run;

/* Bumped in a forked child: a Call made before is the parent's, whose descriptors the
 * child shares (the same epoll, pipes and pidfd): see disown(). */
static unsigned fork_generation;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake, over; /* work queued; a spawn is over */
    struct CallObject *queue, *queue_tail;
    int threads, idle;
    int in_flight; /* spawns a thread is doing: their pipes are in no call yet */
    int forking;   /* a fork waits for in_flight to drop to 0: take no new work meanwhile */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0, 0, 0};

/* run()'s runs under way (GIL held when changed): a forked child closes their pipes. */
static Run *live_runs;

/* What start_run() spawns with: C views of the arguments (argv and envp are freed
 * with PyMem_Free; the strings stay the caller's, which must keep them alive). */
typedef struct Launch {
    const char *path, *cwd;
    char **argv, **envp;
    int exec_fd, first_closed, use_pidfd;
    double timeout;
} Launch;

/* spawn_child() for a caller without the GIL, counted in pool.in_flight: a fork waits
 * until no spawn is half done (its pipes, in no run yet, would be copied into the
 * child and hold the parent's child's pipes open there). */
static int spawn_counted(Run *r, const Launch *how);


/* Close one of the run's descriptors, out of the Call's epoll first: a copy of the
 * pipe in a forked process would keep a closed descriptor's entry there, ready for
 * ever (a busy loop). */
static void close_fd(Run *r, int *fd) {
    if (*fd >= 0) {
        if (r->epfd >= 0)
            epoll_ctl(r->epfd, EPOLL_CTL_DEL, *fd, NULL);
        close(*fd);
        *fd = -1;
    }
}

static int finished(const Run *r) { return r->reaped && r->fd_out < 0 && r->fd_err < 0; }

static void killpg_quiet(Run *r, int sig) {
    if (!r->reaped) /* never signal a pid (group) that may have been reused */
        killpg(r->pid, sig);
}

#define GROUP_ROUNDS 200

/* SIGKILL every process of a confined call, wherever it went (setsid, double forks):
 * the pids its cgroup lists, until it lists none (a killed process leaves the list at
 * once), as executors/confine/cgroups.py's kill_all does. Never the host itself: v1
 * lists its pid while the thread that spawned is still a member. No Python; the GIL,
 * when the caller holds it (r->gil_held: Call.step, terminate), is released while it
 * waits between rounds. */
/* SIGKILL the pid whose carried digits end here (never me); 1 when one was signalled. */
static int kill_listed(char *carry, size_t *carried, pid_t me) {
    if (*carried == 0)
        return 0;
    carry[*carried] = 0;
    *carried = 0;
    pid_t pid = (pid_t)strtol(carry, NULL, 10);
    if (pid <= 0 || pid == me)
        return 0;
    kill(pid, SIGKILL);
    return 1;
}

static void kill_group(Run *r) {
    if (r->group == NULL)
        return;
    pid_t me = getpid();
    char buf[8192];
    for (int round = 0; round < GROUP_ROUNDS; round++) {
        int fd = open(r->group, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return;
        int members = 0;
        char carry[16];
        size_t carried = 0;
        for (;;) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            for (ssize_t i = 0; i < n; i++) {
                if (buf[i] >= '0' && buf[i] <= '9') {
                    if (carried < sizeof carry - 1)
                        carry[carried++] = buf[i];
                } else {
                    members += kill_listed(carry, &carried, me);
                }
            }
        }
        close(fd);
        members += kill_listed(carry, &carried, me); /* the last pid, when no newline ended it */
        if (!members)
            return;
        struct timespec pause = {0, 1000000};
        if (r->gil_held) { /* a Call stepped by an event loop: let other threads run */
            Py_BEGIN_ALLOW_THREADS
            nanosleep(&pause, NULL);
            Py_END_ALLOW_THREADS
        } else {
            nanosleep(&pause, NULL);
        }
    }
}

static void kill_run(Run *r, int sig) {
    if (r->reaped || r->sigkilled)
        return;
    r->sigkilled = sig == SIGKILL;
    killpg_quiet(r, sig);
    pid_t group = getpgid(r->pid);
    if (group >= 0 && group != r->pid)
        kill(r->pid, sig); /* it left its group: signal it too */
    if (r->sigkilled)
        kill_group(r);
}

static void terminate_run(Run *r, double now) {
    if (!r->reaped && !r->have_kill_at && !r->sigkilled) {
        r->kill_at = now + r->grace;
        r->have_kill_at = 1;
        kill_run(r, SIGTERM);
    }
}

static void reap(Run *r) {
    int status = 0;
    pid_t got;
    do {
        got = waitpid(r->pid, &status, 0);
    } while (got < 0 && errno == EINTR);
    if (got == r->pid) {
        r->status = status;
        r->status_known = 1;
    } else {
        r->reaped_elsewhere = 1; /* someone else reaped it: the status is lost */
    }
    r->ended = now_mono();
    r->reaped = 1;
    close_fd(r, &r->pidfd);
    close_fd(r, &r->fd_in);
}

static int watch(int epfd, int fd, unsigned events);

/* Poll stdout from now on. A call's first stdout bytes would wake the waiter (a poll, or
 * the event loop) while the child is still on its way out: most entries print their one
 * JSON object and exit at once, and a second wake-up follows for the exit. So stdout is
 * watched only from the exit on (the drain reads it all), or OUT_DEFER after the spawn,
 * whichever comes first; what the child prints meanwhile waits in the pipe (a child that
 * fills the pipe's 64 KiB waits at most OUT_DEFER for the first read). Without a pidfd
 * the exit is only polled for, so stdout is watched at once. */
static void watch_stdout(Run *r) {
    if (r->out_watched)
        return;
    r->out_watched = 1;
    if (r->epfd >= 0 && r->fd_out >= 0)
        watch(r->epfd, r->fd_out, EPOLLIN);
}

static void start_drain(Run *r) {
    watch_stdout(r);
    double now = now_mono();
    double lower = r->deadline > now + r->eof_min ? r->deadline : now + r->eof_min;
    r->drain_until = now + r->eof_bound < lower ? now + r->eof_bound : lower;
}

static void on_exit_(Run *r) {
    killpg_quiet(r, SIGKILL); /* leftovers, while the zombie pins the group id */
    kill_group(r);            /* and a confined call's, wherever they went */
    reap(r);
    start_drain(r);
}

/* Someone else reaped the child (waitid: ECHILD): its pid may be anyone's now, so
 * nothing is signalled; the status is lost. */
static void lost(Run *r) {
    r->reaped_elsewhere = 1;
    r->reaped = 1;
    r->ended = now_mono();
    close_fd(r, &r->fd_in);
    start_drain(r);
}

static void on_stdin(Run *r) {
    ssize_t n = write(r->fd_in, r->payload, (size_t)r->payload_left);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        close_fd(r, &r->fd_in); /* EPIPE: the child closed stdin or exited */
        return;
    }
    r->payload += n;
    r->payload_left -= n;
    if (r->payload_left == 0)
        close_fd(r, &r->fd_in);
}

/* 0 on success, -1 with errno ENOMEM */
static int on_stdout(Run *r, int hup) {
    size_t room = r->out_cap - r->out_size;
    size_t want = room + 1 < CHUNK ? room + 1 : CHUNK; /* +1 detects overflow */
    /* Grow only when the buffer is full: a read into the space left is as good (a
     * short read is still "drained"), and growing whenever less than a CHUNK was left
     * made every call's EOF read double a 64 KiB buffer, copying it (or mapping and
     * faulting in fresh pages). */
    if (r->out_alloc == r->out_size) {
        size_t grown = r->out_alloc ? r->out_alloc * 2 : CHUNK;
        char *bigger = realloc(r->out, grown);
        if (bigger == NULL)
            return -1;
        r->out = bigger;
        r->out_alloc = grown;
    }
    if (want > r->out_alloc - r->out_size)
        want = r->out_alloc - r->out_size;
    ssize_t n = read(r->fd_out, r->out + r->out_size, want);
    if (n < 0)
        return 0; /* EAGAIN, EINTR: poll again */
    if (n == 0) {
        close_fd(r, &r->fd_out);
        return 0;
    }
    if ((size_t)n > room) { /* stop at once: the child could print gigabytes */
        r->overflow = 1;
        n = (ssize_t)room;
        kill_run(r, SIGKILL);
        close_fd(r, &r->fd_out);
    }
    r->out_size += (size_t)n;
    if (hup && (size_t)n < want)
        close_fd(r, &r->fd_out); /* hung up and drained: the next read could only say EOF */
    return 0;
}

/* Calls on_stderr with n bytes of data (n == 0: stderr ended). ts: the saved thread
 * state when called without the GIL (it is taken for the call and released again),
 * NULL when the GIL is held. Returns -1 when Python raised (the exception pending). */
static int to_python(Run *r, const char *data, Py_ssize_t n, PyThreadState **ts) {
    if (ts)
        PyEval_RestoreThread(*ts);
    PyObject *bytes = PyBytes_FromStringAndSize(data, n);
    PyObject *res = bytes ? PyObject_CallOneArg(r->on_stderr, bytes) : NULL;
    Py_XDECREF(bytes);
    int rc = res == NULL ? -1 : 0;
    Py_XDECREF(res);
    if (ts)
        *ts = PyEval_SaveThread();
    return rc;
}

/* Reads stderr and hands what came to Python, then its end (empty bytes: the last
 * line, if it had no newline, is reported when stderr ends, not when the call does).
 * Returns -1 when Python raised. */
static int on_stderr(Run *r, int hup, PyThreadState **ts) {
    ssize_t n = read(r->fd_err, r->errbuf, CHUNK);
    if (n < 0)
        return 0;
    if (n > 0) {
        r->err_seen = 1;
        if (r->on_stderr != Py_None && to_python(r, r->errbuf, n, ts) < 0)
            return -1;
    }
    if (n == 0 || (hup && n < CHUNK)) { /* EOF, or hung up and drained */
        close_fd(r, &r->fd_err);
        if (r->err_seen && r->on_stderr != Py_None)
            return to_python(r, NULL, 0, ts);
    }
    return 0;
}

static double next_wakeup(const Run *r) {
    if (!r->reaped) {
        double when = r->sigkilled ? INFINITY : (r->have_kill_at ? r->kill_at : r->deadline);
        if (r->pidfd < 0 && r->exit_poll_at < when)
            when = r->exit_poll_at;
        if (!r->out_watched && r->out_watch_at < when)
            when = r->out_watch_at;
        return when;
    }
    return finished(r) ? INFINITY : r->drain_until;
}

static void on_time(Run *r, double now) {
    if (!r->out_watched && now >= r->out_watch_at)
        watch_stdout(r);
    if (!r->reaped && r->pidfd < 0 && now >= r->exit_poll_at) {
        siginfo_t info;
        memset(&info, 0, sizeof info);
        /* WNOWAIT leaves the zombie in place, so the group can still be killed safely. */
        int got = waitid(P_PID, (id_t)r->pid, &info, WEXITED | WNOHANG | WNOWAIT);
        if (got == 0 && info.si_pid == r->pid) {
            on_exit_(r);
        } else if (got < 0 && errno == ECHILD) {
            lost(r);
        } else {
            r->exit_poll = r->exit_poll * 2 < EXIT_POLL_MAX ? r->exit_poll * 2 : EXIT_POLL_MAX;
            r->exit_poll_at = now + r->exit_poll;
        }
    }
    if (!r->reaped) {
        if (!r->have_kill_at && !r->sigkilled && now >= r->deadline) {
            r->timed_out = 1;
            terminate_run(r, now);
        } else if (r->have_kill_at && now >= r->kill_at) {
            kill_run(r, SIGKILL);
        }
    } else if (!finished(r) && now >= r->drain_until) {
        r->left_open = 1; /* a process it started left its group and holds the pipes */
        close_fd(r, &r->fd_out);
        close_fd(r, &r->fd_err);
    }
}

/* A request to stop (Call.terminate()): the first terminates (SIGTERM, then SIGKILL
 * after the grace), the second kills at once; either way the call is then over as
 * soon as the child is reaped. */
static void stop_run(Run *r) {
    r->cancels++;
    terminate_run(r, now_mono());
    if (r->cancels >= 2)
        kill_run(r, SIGKILL);
}

static int done(const Run *r, int until_reaped) {
    return (until_reaped || r->cancels) ? r->reaped : finished(r);
}

/* One ready descriptor (poll and epoll share the IN/OUT/HUP bits). Returns -1 when
 * Python raised, -3 when out of memory. */
static int dispatch(Run *r, int fd, unsigned events, PyThreadState **ts) {
    int hup = events & POLLHUP;
    if (fd < 0)
        return 0;
    if (fd == r->fd_out)
        return on_stdout(r, hup) < 0 ? -3 : 0;
    if (fd == r->fd_err)
        return on_stderr(r, hup, ts);
    if (fd == r->fd_in)
        on_stdin(r);
    else if (fd == r->pidfd)
        on_exit_(r);
    return 0;
}

/* Wait until done; the GIL is released on entry via *ts. Returns 0, -1 when Python
 * raised, -2 when poll failed (errno), -3 when out of memory. */
static int drive(Run *r, PyThreadState **ts, int until_reaped) {
    struct pollfd fds[4];
    while (!done(r, until_reaped)) {
        int nfds = 0;
        if (r->fd_out >= 0 && r->out_watched)
            fds[nfds++] = (struct pollfd){r->fd_out, POLLIN, 0};
        if (r->fd_err >= 0)
            fds[nfds++] = (struct pollfd){r->fd_err, POLLIN, 0};
        if (r->pidfd >= 0)
            fds[nfds++] = (struct pollfd){r->pidfd, POLLIN, 0};
        if (r->fd_in >= 0)
            fds[nfds++] = (struct pollfd){r->fd_in, POLLOUT, 0};
        double wakeup = next_wakeup(r);
        int timeout = -1;
        if (wakeup != INFINITY) {
            /* Round up: a 0 ms timeout just before the deadline would spin. */
            double ms = ceil((wakeup - now_mono()) * 1000.0);
            timeout = ms < 0 ? 0 : (ms > MAX_POLL_MS ? MAX_POLL_MS : (int)ms);
        }
        int ready = poll(fds, (nfds_t)nfds, timeout);
        if (ready < 0) {
            if (errno != EINTR)
                return -2;
            PyEval_RestoreThread(*ts);
            int raised = PyErr_CheckSignals();
            *ts = PyEval_SaveThread();
            if (raised < 0)
                return -1;
            continue;
        }
        /* A descriptor closed by an earlier one's handler is skipped: dispatch matches
         * it against the run's current descriptors, and a closed one is -1 there. */
        for (int i = 0; i < nfds && ready > 0; i++) {
            if (!fds[i].revents)
                continue;
            ready--;
            int rc = dispatch(r, fds[i].fd, (unsigned)fds[i].revents, ts);
            if (rc)
                return rc;
        }
        on_time(r, now_mono());
    }
    return 0;
}

static void close_all(Run *r) {
    if (!r->reaped) {
        kill_run(r, SIGKILL);
        reap(r);
    }
    close_fd(r, &r->fd_in);
    close_fd(r, &r->fd_out);
    close_fd(r, &r->fd_err);
    close_fd(r, &r->pidfd);
}

/* Three O_CLOEXEC pipes with every end above 2 (a pipe on 0-2 would keep its
 * close-on-exec flag through dup2(n, n)). Returns 0, or -1 with errno. */
static int make_pipes(int p[3][2]) {
    int parked[6];
    int n_parked = 0, made = 0, err = 0;
    while (made < 3) {
        int pair[2];
        if (pipe2(pair, O_CLOEXEC) < 0) {
            err = errno;
            break;
        }
        if (pair[0] < 3 || pair[1] < 3) {
            if (n_parked >= 6) { /* cannot happen: at most fds 0-2 get parked */
                close(pair[0]);
                close(pair[1]);
                err = EMFILE;
                break;
            }
            parked[n_parked++] = pair[0];
            parked[n_parked++] = pair[1];
            continue;
        }
        p[made][0] = pair[0];
        p[made][1] = pair[1];
        made++;
    }
    for (int i = 0; i < n_parked; i++)
        close(parked[i]);
    if (err) {
        for (int i = 0; i < made; i++) {
            close(p[i][0]);
            close(p[i][1]);
        }
        errno = err;
        return -1;
    }
    return 0;
}

/* A NULL-terminated char *[] borrowing from a list or tuple of bytes (valid while it
 * lives, unchanged: the caller's are the spawn module's memo, never modified). */
static char **cstrings(PyObject *seq) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    char **out = PyMem_Malloc(sizeof(char *) * (size_t)(n + 1));
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = items[i];
        if (!PyBytes_Check(item)) {
            PyMem_Free(out);
            PyErr_SetString(PyExc_TypeError, "argv and env must be lists of bytes");
            return NULL;
        }
        out[i] = PyBytes_AS_STRING(item);
    }
    out[n] = NULL;
    return out;
}

/* -- The spawn: clone(CLONE_VM | CLONE_VFORK), then exec ---------------------------- *
 *
 * What glibc's posix_spawn does with our attributes and file actions, without what its
 * generality costs on every call: a getrlimit per file action, a stack mapped and
 * unmapped per spawn (a TLB shootdown on every CPU once other threads exist), a
 * pidfd_open after the fact (CLONE_PIDFD gives it), and, for an ELF entry, the path walk
 * through procfs of /proc/self/fd/3 (execveat of the descriptor instead; a script keeps
 * that path, which is the name its interpreter is given and opens).
 *
 * The child shares the parent's memory and runs on a stack of its own until it execs
 * or exits, while the parent thread waits (CLONE_VFORK). Every signal is blocked across
 * the clone, so no handler of the parent runs in the child: it sets every disposition
 * to the default first, and unblocks signals only just before exec. It calls nothing
 * but raw system calls, and reports a failure through the plan it was given. */

#define CHILD_STACK (32 * 1024)

/* What the child does, and what it reports: it writes err (and nothing else) before it exits. */
typedef struct {
    const Launch *how;
    int from[4]; /* the child's stdin, stdout, stderr and the entry (-1: none) */
    volatile int err;
} ChildPlan;

/* Stacks for the children of spawns under way, reused: at most one per concurrent spawn. */
static struct {
    pthread_mutex_t lock;
    void *free[SPAWN_STACKS];
    int n_free;
} stacks = {PTHREAD_MUTEX_INITIALIZER, {NULL}, 0};

static void *take_stack(void) {
    void *stack = NULL;
    pthread_mutex_lock(&stacks.lock);
    if (stacks.n_free)
        stack = stacks.free[--stacks.n_free];
    pthread_mutex_unlock(&stacks.lock);
    return stack ? stack : malloc(CHILD_STACK);
}

static void give_stack(void *stack) {
    pthread_mutex_lock(&stacks.lock);
    if (stacks.n_free < SPAWN_STACKS) {
        stacks.free[stacks.n_free++] = stack;
        stack = NULL;
    }
    pthread_mutex_unlock(&stacks.lock);
    free(stack);
}

/* The kernel's struct sigaction all zeros is SIG_DFL, no flags, an empty mask, whatever
 * the architecture's layout (handler, flags, restorer, mask: at most 4 words here). */
static const unsigned long default_action[4] = {0, 0, 0, 0};
#define KERNEL_SIGSET_SIZE 8 /* _NSIG / 8 on Linux */
#define LAST_SIGNAL 64

static int child_fail(ChildPlan *plan, long rc) {
    plan->err = (int)-rc;
    syscall(SYS_exit_group, 127);
    return 0;
}

/* A raw system call's result: its value, or -errno (what syscall() reports through errno,
 * which the child shares with the waiting parent thread; only the plan carries it back). */
#define RAW(call) ((call) < 0 ? -(long)errno : 0L)

/* The exec of the entry, every signal unblocked at the last moment. An ELF file of
 * this machine is executed from its descriptor; anything else (a script, a format
 * binfmt_misc runs, a foreign ELF run by an emulator) keeps the path, which its
 * interpreter is given to open. ENOSYS (a kernel before execveat) and EPERM (a seccomp
 * filter that refuses it) fall back to the path too. Returns -errno. */
static long child_exec(ChildPlan *plan) {
    const Launch *how = plan->how;
    static const uint64_t none = 0;
    unsigned char head[20];
    long rc;
    int elf = plan->from[3] >= 0 && NATIVE_MACHINE && syscall(SYS_pread64, EXEC_FD, head, 20, 0) == 20 &&
              head[0] == 0x7f && head[1] == 'E' && head[2] == 'L' && head[3] == 'F' &&
              (head[18] | head[19] << 8) == NATIVE_MACHINE; /* e_machine, little-endian here */
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, KERNEL_SIGSET_SIZE);
    if (elf) {
        rc = RAW(syscall(SYS_execveat, EXEC_FD, "", how->argv, how->envp, AT_EMPTY_PATH));
        if (rc != -ENOSYS && rc != -EPERM)
            return rc;
    }
    return RAW(syscall(SYS_execve, how->path, how->argv, how->envp));
}

static int child_main(void *arg) {
    ChildPlan *plan = arg;
    const Launch *how = plan->how;
    long rc;
    for (int sig = 1; sig <= LAST_SIGNAL; sig++)
        if (sig != SIGKILL && sig != SIGSTOP &&
            (rc = RAW(syscall(SYS_rt_sigaction, sig, default_action, NULL, KERNEL_SIGSET_SIZE))))
            return child_fail(plan, rc); /* never with the layout above: a parent handler would stay */
    if ((rc = RAW(syscall(SYS_setsid))))
        return child_fail(plan, rc);
    int targets = plan->from[3] >= 0 ? 4 : 3;
    int above = how->first_closed > targets ? how->first_closed : targets;
    /* A descriptor that is another one's target moves out of the way first (above the
     * targets, and closed by close_range below): dup3 would close it before its turn. */
    for (int i = 0; i < targets; i++) {
        int fd = plan->from[i];
        if (fd < targets && fd != i) {
            if ((rc = RAW(plan->from[i] = (int)syscall(SYS_fcntl, fd, F_DUPFD, above))))
                return child_fail(plan, rc);
        }
    }
    for (int i = 0; i < targets; i++) {
        int fd = plan->from[i];
        /* dup3 refuses fd == i, and dup2(n, n) would leave n close-on-exec (dup3, not dup2:
         * aarch64 has no dup2 system call) */
        rc = fd == i ? RAW(syscall(SYS_fcntl, fd, F_SETFD, 0)) : RAW(syscall(SYS_dup3, fd, i, 0));
        if (rc)
            return child_fail(plan, rc);
    }
    if ((rc = RAW(syscall(SYS_chdir, how->cwd))))
        return child_fail(plan, rc);
    if ((rc = RAW(syscall(SYS_close_range, (unsigned)how->first_closed, ~0U, 0))))
        return child_fail(plan, rc);
    return child_fail(plan, child_exec(plan));
}

/* clone() the child of plan with every signal blocked. Returns its pid, or -1 with errno. */
static pid_t clone_child(ChildPlan *plan, int *pidfd) {
    static int no_clone_pidfd = 0; /* EINVAL once: a kernel without CLONE_PIDFD (read and set
                                    * by several threads: relaxed atomics, any order will do) */
    void *stack = take_stack();
    if (stack == NULL) {
        errno = ENOMEM;
        return -1;
    }
    char *top = (char *)(((uintptr_t)stack + CHILD_STACK) & ~(uintptr_t)63);
    uint64_t all = ~(uint64_t)0, old;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, KERNEL_SIGSET_SIZE);
    int flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
    pid_t pid = -1;
    int with_pidfd = pidfd != NULL && !__atomic_load_n(&no_clone_pidfd, __ATOMIC_RELAXED);
    if (with_pidfd) {
        pid = clone(child_main, top, flags | CLONE_PIDFD, plan, pidfd);
        if (pid < 0) {
            *pidfd = -1; /* the kernel may have written a number it then freed */
            if (errno == EINVAL)
                __atomic_store_n(&no_clone_pidfd, 1, __ATOMIC_RELAXED);
        }
    }
    if (pid < 0 && (!with_pidfd || errno == EINVAL))
        pid = clone(child_main, top, flags, plan);
    int err = errno;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, KERNEL_SIGSET_SIZE);
    give_stack(stack);
    errno = err;
    return pid;
}

/* Returns 0, -1 (the pipes failed, errno set) or -2 (the spawn failed: exec, chdir).
 * Touches no Python object: called without the GIL, by the caller or a spawner thread.
 * Sets r->pidfd when how->use_pidfd and the kernel gave one with the clone. */
static int spawn_child(Run *r, const Launch *how) {
    int p[3][2];
    if (make_pipes(p) < 0)
        return -1;
    ChildPlan plan = {how, {p[0][0], p[1][1], p[2][1], how->exec_fd}, 0};
    int pidfd = -1;
    pid_t pid = clone_child(&plan, how->use_pidfd ? &pidfd : NULL);
    int err = pid < 0 ? errno : plan.err;
    if (pid > 0 && plan.err) { /* it exited before exec: reap it */
        if (pidfd >= 0)
            close(pidfd);
        pidfd = -1;
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    close(p[0][0]);
    close(p[1][1]);
    close(p[2][1]);
    if (err) {
        close(p[0][1]);
        close(p[1][0]);
        close(p[2][0]);
        errno = err;
        return -2;
    }
    r->pid = pid;
    r->reaped = 0;
    r->pidfd = pidfd;
    r->fd_in = p[0][1];
    r->fd_out = p[1][0];
    r->fd_err = p[2][0];
    return 0;
}

static int spawn_counted(Run *r, const Launch *how) {
    pthread_mutex_lock(&pool.lock);
    while (pool.forking)
        pthread_cond_wait(&pool.wake, &pool.lock);
    pool.in_flight++;
    pthread_mutex_unlock(&pool.lock);
    int spawned = spawn_child(r, how);
    int err = errno;
    pthread_mutex_lock(&pool.lock);
    pool.in_flight--;
    pthread_cond_broadcast(&pool.over);
    pthread_mutex_unlock(&pool.lock);
    errno = err;
    return spawned;
}

#define N_ARGS 15
#define ARGS_DOC                                                                                                \
    "(path, argv, env, cwd, exec_fd, payload, timeout, kill_grace, stdout_cap, on_stderr, first_closed,\n"      \
    "    eof_bound, eof_min, use_pidfd, group)\n"

/* Parse the arguments into r and *how. Returns 0, or -1 when Python raised. */
static int prepare_run(Run *r, PyObject *const *args, Py_ssize_t nargs, Launch *how) {
    memset(r, 0, sizeof *r);
    r->pid = -1;
    r->reaped = 1; /* nothing to signal or reap until the spawn succeeds */
    r->fd_in = r->fd_out = r->fd_err = r->pidfd = r->epfd = -1;
    if (nargs != N_ARGS) {
        PyErr_Format(PyExc_TypeError, "takes %d arguments (%zd given)", N_ARGS, nargs);
        return -1;
    }
    PyObject *path = args[0], *argv_t = args[1], *env_t = args[2], *cwd = args[3], *payload = args[5];
    PyObject *group = args[14];
    int sequences = (PyList_Check(argv_t) || PyTuple_Check(argv_t)) && (PyList_Check(env_t) || PyTuple_Check(env_t));
    if (!PyBytes_Check(path) || !sequences || !PyBytes_Check(cwd) || !PyBytes_Check(payload) ||
        PySequence_Fast_GET_SIZE(argv_t) == 0 || !PyCallable_Check(args[9]) ||
        (group != Py_None && !PyBytes_Check(group))) {
        PyErr_SetString(PyExc_TypeError, "path, cwd and payload are bytes, argv (not empty) and env lists of "
                                         "bytes, on_stderr callable, group bytes or None");
        return -1;
    }
    if (group != Py_None && (Py_ssize_t)strlen(PyBytes_AS_STRING(group)) != PyBytes_GET_SIZE(group)) {
        PyErr_SetString(PyExc_ValueError, "group: embedded null byte");
        return -1;
    }
    int exec_fd = (int)PyLong_AsLong(args[4]);
    double timeout = PyFloat_AsDouble(args[6]);
    double grace = PyFloat_AsDouble(args[7]);
    Py_ssize_t cap = PyLong_AsSsize_t(args[8]);
    int first_closed = (int)PyLong_AsLong(args[10]);
    double eof_bound = PyFloat_AsDouble(args[11]);
    double eof_min = PyFloat_AsDouble(args[12]);
    int use_pidfd = PyObject_IsTrue(args[13]);
    if (PyErr_Occurred())
        return -1;
    if (!(cap >= 0 && timeout >= 0 && grace >= 0 && eof_bound >= 0 && eof_min >= 0) || first_closed < 3) {
        PyErr_SetString(PyExc_ValueError, "limits must be numbers >= 0 (not NaN) and first_closed >= 3");
        return -1;
    }
    char **argv = cstrings(argv_t);
    if (argv == NULL)
        return -1;
    char **envp = cstrings(env_t);
    if (envp == NULL) {
        PyMem_Free(argv);
        return -1;
    }
    r->errbuf = PyMem_RawMalloc(CHUNK);
    if (group != Py_None && r->errbuf != NULL) {
        size_t size = (size_t)PyBytes_GET_SIZE(group) + 1;
        r->group = PyMem_RawMalloc(size);
        if (r->group != NULL)
            memcpy(r->group, PyBytes_AS_STRING(group), size);
    }
    if (r->errbuf == NULL || (group != Py_None && r->group == NULL)) {
        PyMem_RawFree(r->errbuf);
        PyMem_RawFree(r->group);
        r->errbuf = NULL;
        r->group = NULL;
        PyMem_Free(argv);
        PyMem_Free(envp);
        PyErr_NoMemory();
        return -1;
    }
    r->payload = PyBytes_AS_STRING(payload);
    r->payload_left = PyBytes_GET_SIZE(payload);
    r->out_cap = (size_t)cap;
    r->grace = grace;
    r->eof_bound = eof_bound;
    r->eof_min = eof_min;
    r->on_stderr = args[9];
    r->started = r->ended = now_mono();
    *how = (Launch){PyBytes_AS_STRING(path), PyBytes_AS_STRING(cwd), argv, envp, exec_fd, first_closed, use_pidfd,
                    timeout};
    return 0;
}

/* The spawn happened (spawned: spawn_child's return, err its errno), GIL held: the
 * failure tuple (returns 0, *failure set), or the pidfd and the payload's first
 * write (returns 1); -1 when Python raised. */
static void run_started(Run *r, const Launch *how);

static int launched(Run *r, const Launch *how, int spawned, int err, PyObject **failure) {
    if (spawned < 0) {
        r->ended = now_mono();
        *failure = Py_BuildValue("(Ois)", Py_None, err, spawned == -1 ? "pipes" : "spawn");
        return *failure ? 0 : -1;
    }
    run_started(r, how);
    return 1;
}

/* The child runs: its deadline and timers set, what fits of stdin written. Touches no
 * Python object (a spawner thread runs it for a spawn aside). */
static void run_started(Run *r, const Launch *how) {
    /* -1 (ENOSYS, EMFILE, or not wanted): poll waitid instead */
    if (r->pidfd < 0 && how->use_pidfd) /* the spawner thread opened it already */
        r->pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0);
    r->deadline = r->started + how->timeout;
    r->exit_poll = EXIT_POLL_MIN;
    r->exit_poll_at = r->started + EXIT_POLL_MIN;
    r->out_watch_at = r->started + OUT_DEFER;
    r->out_watched = r->pidfd < 0;
    /* A write of at most PIPE_BUF bytes to a fresh pipe never blocks; bigger payloads
     * make the pipe non-blocking and fill what fits. */
    if (r->payload_left > PIPE_BUF) {
        int flags = fcntl(r->fd_in, F_GETFL);
        fcntl(r->fd_in, F_SETFL, flags | O_NONBLOCK);
    }
    if (r->payload_left)
        on_stdin(r);
    else
        close_fd(r, &r->fd_in);
}

/* Parse the arguments, spawn, write what fits of stdin. Returns 1 when the child
 * runs, 0 when it could not be started (*failure is then the (None, errno, stage)
 * tuple), -1 when Python raised. The GIL is held throughout (released for the spawn). */
static int start_run(Run *r, PyObject *const *args, Py_ssize_t nargs, PyObject **failure) {
    Launch how;
    if (prepare_run(r, args, nargs, &how) < 0)
        return -1;
    int spawned, err;
    Py_BEGIN_ALLOW_THREADS
    spawned = spawn_counted(r, &how);
    err = errno;
    Py_END_ALLOW_THREADS
    PyMem_Free(how.argv);
    PyMem_Free(how.envp);
    return launched(r, &how, spawned, err, failure);
}

/* How the run ended, with the GIL held: (stdout, status or None, timed_out, overflow,
 * duration, left_open, pid reaped elsewhere or 0). */
static PyObject *outcome(Run *r) {
    PyObject *out = PyBytes_FromStringAndSize(r->out ? r->out : "", (Py_ssize_t)r->out_size);
    if (out == NULL)
        return NULL;
    PyObject *status = r->status_known ? PyLong_FromLong(r->status) : Py_NewRef(Py_None);
    if (status == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    return Py_BuildValue("(NNOOdOi)", out, status, r->timed_out ? Py_True : Py_False,
                         r->overflow ? Py_True : Py_False, micros(r->ended - r->started),
                         r->left_open ? Py_True : Py_False,
                         r->reaped_elsewhere ? (int)r->pid : 0);
}

static void free_buffers(Run *r) {
    PyMem_RawFree(r->errbuf);
    r->errbuf = NULL;
    PyMem_RawFree(r->group);
    r->group = NULL;
    free(r->out);
    r->out = NULL;
}

static void raise_failure(int failed, int saved_errno) {
    if (failed == -3) {
        PyErr_NoMemory();
    } else if (failed == -2) {
        errno = saved_errno;
        PyErr_SetFromErrno(PyExc_OSError);
    }
}

PyDoc_STRVAR(run_doc, "run" ARGS_DOC "--\n\n"
"Spawn one child and see it through in this thread, the GIL released while it waits;\n"
"see ongrid_plugins/executors/_fast.py. Returns (stdout, status or None, timed_out,\n"
"overflow, duration, left_open, pid reaped elsewhere or 0), or (None, errno, stage)\n"
"when no process ran (stage: 'pipes', 'spawn', or 'fds' for start()'s epoll).");

/* Off live_runs, GIL held. */
static void unlist_run(Run *r) {
    if (r->live_prev)
        r->live_prev->live_next = r->live_next;
    else if (live_runs == r)
        live_runs = r->live_next;
    if (r->live_next)
        r->live_next->live_prev = r->live_prev;
    r->live_next = r->live_prev = NULL;
}

/* Drive r until it is over: called with the GIL, returns without it (*ts). Signals
 * first: one that came while the spawn ran without the GIL only left a flag, and its
 * handler (KeyboardInterrupt) runs now, not after the child is done. When Python raised
 * (KeyboardInterrupt, the stderr callback) the group gets SIGTERM, its grace, SIGKILL;
 * a second exception goes straight to SIGKILL and a reap, and is raised with the first
 * as its context: the exception is returned in *type, *value, *tb (not restored).
 * Returns drive()'s 0, -1, -2 (errno in *saved_errno) or -3. */
static int see_through(Run *r, PyThreadState **ts, int *saved_errno, PyObject **type, PyObject **value,
                       PyObject **tb) {
    int failed = PyErr_CheckSignals() < 0 ? -1 : 0;
    *ts = PyEval_SaveThread();
    if (!failed)
        failed = drive(r, ts, 0);
    *saved_errno = errno;
    if (failed == -1) {
        PyEval_RestoreThread(*ts);
        PyErr_Fetch(type, value, tb);
        *ts = PyEval_SaveThread();
        terminate_run(r, now_mono());
        if (drive(r, ts, 1) == -1) {
            PyEval_RestoreThread(*ts);
            PyObject *type2 = NULL, *value2 = NULL, *tb2 = NULL;
            PyErr_Fetch(&type2, &value2, &tb2);
            PyErr_NormalizeException(type, value, tb);
            PyErr_NormalizeException(&type2, &value2, &tb2);
            if (value2 != NULL && *value != NULL) {
                if (*tb != NULL)
                    PyException_SetTraceback(*value, *tb);
                PyException_SetContext(value2, *value); /* steals value */
                *value = NULL;
            }
            Py_XDECREF(*type);
            Py_XDECREF(*value);
            Py_XDECREF(*tb);
            *type = type2, *value = value2, *tb = tb2;
            *ts = PyEval_SaveThread();
        }
    }
    return failed;
}

static PyObject *native_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Run r;
    PyObject *failure = NULL;
    Launch how;
    if (prepare_run(&r, args, nargs, &how) < 0)
        return NULL; /* it freed what it made */
    /* Listed before the spawn (GIL held), so a fork in another thread finds the pipes. */
    r.live_prev = NULL;
    r.live_next = live_runs;
    if (live_runs)
        live_runs->live_prev = &r;
    live_runs = &r;
    int spawned, err;
    Py_BEGIN_ALLOW_THREADS
    spawned = spawn_counted(&r, &how);
    err = errno;
    Py_END_ALLOW_THREADS
    PyMem_Free(how.argv);
    PyMem_Free(how.envp);
    int started = launched(&r, &how, spawned, err, &failure);
    if (started <= 0) {
        unlist_run(&r);
        free_buffers(&r);
        return started < 0 ? NULL : failure;
    }
    int saved_errno = 0;
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyThreadState *ts;
    int failed = see_through(&r, &ts, &saved_errno, &type, &value, &tb);
    close_all(&r);
    PyEval_RestoreThread(ts);
    unlist_run(&r);
    PyObject *result = NULL;
    if (failed == -1)
        PyErr_Restore(type, value, tb);
    else if (failed)
        raise_failure(failed, saved_errno);
    else
        result = outcome(&r);
    free_buffers(&r);
    return result;
}

/* -- Call: the same run, stepped by an event loop ------------------------------------ */

typedef struct CallObject {
    PyObject_HEAD
    Run r;
    int running; /* start succeeded and close() has not run */
    int epfd;    /* the run's descriptors and its timer, for the loop to watch */
    int tfd;     /* timerfd armed at next_wakeup */
    double armed;
    PyObject *payload; /* r.payload points into it */
    PyObject *on_stderr;
    /* A spawn aside (start_aside): a spawner thread spawns the child and, once it runs,
     * writes its stdin, puts its descriptors into epfd and arms the timer, as start()
     * does (the loop wakes for the child's first event, not for the spawn); a spawn that
     * failed fires the timer at once. Until step() has seen the spawn over, the loop
     * uses only these fields. */
    int aside;       /* 1 until the loop has seen the spawn aside over */
    int spawning;    /* the spawn is queued or running: under pool.lock */
    int spawned;     /* spawn_child's return (-3: no room in the epoll), and its errno: written by the thread */
    int spawn_errno;
    Launch how;
    PyObject *args;  /* the arguments, alive while the thread reads their bytes */
    PyObject *failure; /* (None, errno, stage) when the spawn aside failed */
    struct CallObject *queued;      /* in pool.queue, next to spawn */
    int spawn_failed; /* the spawn aside failed: result() is (None, errno, stage) */
    unsigned generation; /* fork_generation when made: another one is a forked child's copy */
    struct CallObject *live_next, *live_prev; /* in live_calls (changed with the GIL held) */
    int unfinished_at_fork; /* set in a forked child: the copy was not over (see disown) */
} CallObject;

/* Every Call alive in this process: a forked child closes their descriptors at once. */
static CallObject *live_calls;

/* -- The spawner threads: the spawn off the event loop, no Python on the way ---------- *
 *
 * A spawn returns once its vfork child has exec'd, and with every CPU busy that child
 * can wait for one: on the loop, every call on it would wait too. A few plain threads,
 * made on demand, take queued calls and spawn them; each then starts its call as start()
 * does (stdin written, the descriptors in the call's epoll, the timer armed), so the
 * loop wakes for the child's first event, not once more for the spawn (after_spawn).
 * The threads hold no GIL and call no Python; they block every signal (the main thread
 * handles them; a write to a closed stdin gets EPIPE, its SIGPIPE stays pending on the
 * thread). A forked child has none of them: whatever was queued or spawning in the
 * parent fails there with ECHILD. */
#define SPAWNERS 4

/* Under pool.lock: the spawn of c is over (its result stored): wake whoever waits in
 * close(). */
static void spawn_over(CallObject *c) {
    c->spawning = 0;
    pthread_cond_broadcast(&pool.over);
}

static void arm(CallObject *c);
static int watch_run(CallObject *c);

/* After a spawn aside, without the GIL, before the spawn is marked over: a child that
 * runs is started and watched as start() does; one that failed to start (or found no
 * room in the epoll: then it is killed and reaped here) fires the timer at once, so
 * the loop learns of it. */
static void after_spawn(CallObject *c, int spawned, int err) {
    if (spawned == 0 && c->how.use_pidfd && c->r.pidfd < 0) /* at once: before anyone could reap it */
        c->r.pidfd = (int)syscall(SYS_pidfd_open, c->r.pid, 0);
    c->how.use_pidfd = 0; /* tried: a failure is not retried later on a pid maybe reused */
    if (spawned == 0) {
        run_started(&c->r, &c->how);
        if (watch_run(c) == 0) {
            c->spawned = 0;
            c->spawn_errno = 0;
            return;
        }
        err = errno;
        close_all(&c->r); /* SIGKILL and a reap: it never ran for anyone */
        spawned = -3;
    } else {
        c->r.ended = now_mono();
    }
    c->spawned = spawned;
    c->spawn_errno = err;
    c->armed = NAN;
    struct itimerspec now = {.it_value = {.tv_sec = 0, .tv_nsec = 1}}; /* long past: fires at once */
    timerfd_settime(c->tfd, TFD_TIMER_ABSTIME, &now, NULL);
}

static void *spawner_main(void *unused) {
    (void)unused;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.queue == NULL || pool.forking) {
            pool.idle++;
            pthread_cond_wait(&pool.wake, &pool.lock);
            pool.idle--;
        }
        CallObject *c = pool.queue;
        pool.queue = c->queued;
        if (pool.queue == NULL)
            pool.queue_tail = NULL;
        c->queued = NULL;
        pool.in_flight++;
        pthread_mutex_unlock(&pool.lock);
        c->r.started = c->r.ended = now_mono(); /* the deadline counts from the spawn, not the queue */
        int spawned = spawn_child(&c->r, &c->how);
        after_spawn(c, spawned, errno); /* still in flight: a fork waits for it */
        pthread_mutex_lock(&pool.lock);
        pool.in_flight--;
        spawn_over(c);
    }
    return NULL;
}

/* Under pool.lock: queue c, with a thread to take it. Returns 0, or an errno when no
 * thread could be made (c is then not queued). */
static int queue_spawn(CallObject *c) {
    if (pool.idle == 0 && pool.threads < SPAWNERS) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old); /* the thread starts with every signal blocked */
        pthread_attr_t attr;
        pthread_t thread;
        int rc = pthread_attr_init(&attr);
        if (!rc) {
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            pthread_attr_setstacksize(&attr, 256 * 1024);
            rc = pthread_create(&thread, &attr, spawner_main, NULL);
            pthread_attr_destroy(&attr);
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc && pool.threads == 0)
            return rc;
        if (!rc)
            pool.threads++;
    }
    c->spawning = 1;
    c->queued = NULL;
    if (pool.queue_tail)
        pool.queue_tail->queued = c;
    else
        pool.queue = c;
    pool.queue_tail = c;
    pthread_cond_signal(&pool.wake);
    return 0;
}

static void close_plain(int *fd) {
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* Before a fork: wait until no spawn is half done (its pipes would be copied into the
 * child, held by no call there, and keep the parent's child's pipes open), and hold the
 * lock through the fork. At most one spawn's time; the threads never need the GIL. */
static void pool_before_fork(void) {
    pthread_mutex_lock(&pool.lock);
    pool.forking = 1; /* the spawns under way end; the queued ones wait for the fork */
    while (pool.in_flight)
        pthread_cond_wait(&pool.over, &pool.lock);
}

static void pool_after_fork_parent(void) {
    pool.forking = 0;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
}

/* In a forked child: no spawner thread came along (the lock is reset, not unlocked).
 * The parent's calls are the parent's, and so are their descriptors (the same epolls,
 * timers, pipes and pidfds): each copy's are closed here and now, before the child
 * can reuse their numbers, and never taken out of an epoll or written to; the rest is
 * done when the child next touches the copy (disown()). close() is async-signal-safe. */
static void pool_after_fork(void) {
    fork_generation++;
    for (Run *r = live_runs; r != NULL; r = r->live_next) { /* another thread's run(): not ours here */
        int *fds[] = {&r->fd_in, &r->fd_out, &r->fd_err, &r->pidfd};
        for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
            close_plain(fds[i]);
    }
    live_runs = NULL;
    for (CallObject *c = live_calls; c != NULL; c = c->live_next) {
        Run *r = &c->r;
        /* argv is kept until a spawn aside is seen over; draining is not over either */
        c->unfinished_at_fork = c->how.argv != NULL || (c->running && !finished(r));
        int *fds[] = {&c->tfd, &c->epfd, &r->fd_in, &r->fd_out, &r->fd_err, &r->pidfd};
        for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
            close_plain(fds[i]);
        r->epfd = -1;
    }
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.over, NULL);
    pool.threads = pool.idle = pool.in_flight = pool.forking = 0;
    pool.queue = pool.queue_tail = NULL; /* what was queued is disowned with its call */
}

/* A forked child's copy of a parent's call (GIL held), whose descriptors the fork
 * handler closed: its child (the parent's) is never signalled or reaped here. A call
 * still running, or spawning, is then over with (None, ECHILD, "spawn") for a result;
 * one that was over keeps its outcome. Returns 1 when c was such a copy. */
static int disown(CallObject *c) {
    if (c->generation == fork_generation)
        return 0;
    c->generation = fork_generation;
    Run *r = &c->r;
    int unfinished = c->unfinished_at_fork;
    c->aside = 0;
    r->reaped = 1;
    c->running = 0;
    c->spawning = 0;
    PyMem_Free(c->how.argv);
    PyMem_Free(c->how.envp);
    c->how.argv = c->how.envp = NULL;
    Py_CLEAR(c->args);
    if (unfinished) {
        r->pid = -1;
        c->spawned = -2;
        c->spawn_errno = ECHILD;
        c->spawn_failed = 1;
        Py_CLEAR(c->failure);
    }
    return 1;
}

/* With the GIL held: wait (GIL released) until c's spawn is over. */
static void wait_spawned(CallObject *c) {
    pthread_mutex_lock(&pool.lock);
    int busy = c->spawning;
    pthread_mutex_unlock(&pool.lock);
    if (!busy)
        return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&pool.lock);
    while (c->spawning)
        pthread_cond_wait(&pool.over, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    Py_END_ALLOW_THREADS
}

static int finish_aside(CallObject *c);

/* The call's own descriptors, once nothing runs for it (close() and dealloc). */
static void close_timer_and_epoll(CallObject *c) {
    if (c->tfd >= 0) {
        close(c->tfd);
        c->tfd = -1;
    }
    if (c->epfd >= 0) {
        close(c->epfd);
        c->epfd = c->r.epfd = -1;
    }
}

static void call_close(CallObject *c) {
    disown(c);
    if (c->aside) { /* a spawn aside not seen yet: wait for it, then end what it started */
        wait_spawned(c);
        if (finish_aside(c) < 0)
            PyErr_WriteUnraisable((PyObject *)c);
    }
    close_timer_and_epoll(c); /* first: the run's descriptors then leave no epoll entry to take out */
    if (c->running) {
        if (c->r.reaped) {
            close_all(&c->r);
        } else {
            Py_BEGIN_ALLOW_THREADS /* SIGKILL and a blocking reap: never with the GIL held */
            close_all(&c->r);
            Py_END_ALLOW_THREADS
        }
        c->running = 0;
    }
    close_timer_and_epoll(c);
    free_buffers(&c->r);
}

static void call_dealloc(CallObject *c) {
    call_close(c); /* a dropped call is killed and reaped, never left running */
    Py_XDECREF(c->payload);
    Py_XDECREF(c->on_stderr);
    Py_XDECREF(c->failure);
    Py_XDECREF(c->args);
    if (c->live_prev)
        c->live_prev->live_next = c->live_next;
    else
        live_calls = c->live_next;
    if (c->live_next)
        c->live_next->live_prev = c->live_prev;
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static int watch(int epfd, int fd, unsigned events) {
    struct epoll_event ev = {.events = events, .data.fd = fd};
    return fd < 0 ? 0 : epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* Arm the timer at the run's next wakeup (disarm at infinity); only when it changed. */
static void arm(CallObject *c) {
    double when = next_wakeup(&c->r);
    if (when == c->armed)
        return;
    c->armed = when;
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    if (when != INFINITY) {
        if (when <= 0)
            when = 1e-9; /* zero would disarm */
        spec.it_value.tv_sec = (time_t)when;
        spec.it_value.tv_nsec = (long)((when - (double)(time_t)when) * 1e9);
        if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0)
            spec.it_value.tv_nsec = 1;
    }
    timerfd_settime(c->tfd, TFD_TIMER_ABSTIME, &spec, NULL);
}

static PyTypeObject CallType;

PyDoc_STRVAR(start_doc, "start" ARGS_DOC "--\n\n"
"Spawn one child for an event loop to see through: returns a Call (watch fileno() for\n"
"reading, call step() when it is readable, until step() returns True), or\n"
"(None, errno, stage) when no process ran.");

/* A new Call with its epoll and timer, or NULL: *failure is then the (None, errno,
 * "fds") tuple, or NULL when Python raised. */
static CallObject *new_call(PyObject **failure) {
    *failure = NULL;
    CallObject *c = PyObject_New(CallObject, &CallType);
    if (c == NULL)
        return NULL;
    memset(&c->r, 0, sizeof c->r);
    memset(&c->how, 0, sizeof c->how);
    c->running = 0;
    c->armed = INFINITY;
    c->payload = c->on_stderr = c->args = c->failure = NULL;
    c->aside = 0;
    c->spawning = c->spawned = c->spawn_errno = 0;
    c->queued = NULL;
    c->spawn_failed = 0;
    c->generation = fork_generation;
    c->unfinished_at_fork = 0;
    c->live_prev = NULL;
    c->live_next = live_calls;
    if (live_calls)
        live_calls->live_prev = c;
    live_calls = c;
    c->r.reaped = 1;
    c->r.fd_in = c->r.fd_out = c->r.fd_err = c->r.pidfd = c->r.epfd = -1;
    c->tfd = -1;
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (c->epfd >= 0)
        c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (c->epfd < 0 || c->tfd < 0 || watch(c->epfd, c->tfd, EPOLLIN) < 0) {
        int err = errno;
        Py_DECREF(c);
        *failure = Py_BuildValue("(Ois)", Py_None, err, "fds");
        return NULL;
    }
    return c;
}

/* The run's descriptors into the call's epoll, and its timer armed. Returns 0, or -1
 * (errno set: ENOSPC, max_user_watches). */
static int watch_run(CallObject *c) {
    Run *r = &c->r;
    r->epfd = c->epfd;
    if ((r->out_watched && watch(c->epfd, r->fd_out, EPOLLIN) < 0) || watch(c->epfd, r->fd_err, EPOLLIN) < 0 ||
        watch(c->epfd, r->pidfd, EPOLLIN) < 0 || watch(c->epfd, r->fd_in, EPOLLOUT) < 0)
        return -1;
    arm(c);
    return 0;
}

static PyObject *native_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    PyObject *failure;
    CallObject *c = new_call(&failure);
    if (c == NULL)
        return failure;
    int started = start_run(&c->r, args, nargs, &failure);
    if (started <= 0) {
        Py_DECREF(c);
        return started < 0 ? NULL : failure;
    }
    c->running = 1;
    c->payload = Py_NewRef(args[5]);
    c->on_stderr = Py_NewRef(args[9]);
    if (watch_run(c) < 0) {
        int err = errno; /* the child is killed and reaped unseen */
        Py_DECREF(c);
        return Py_BuildValue("(Ois)", Py_None, err, "fds");
    }
    return (PyObject *)c;
}

PyDoc_STRVAR(start_aside_doc, "start_aside" ARGS_DOC "--\n\n"
"start(), the spawn done by a spawner thread: returns a Call at once (its fileno() is\n"
"readable when the spawn is over), or (None, errno, 'fds'). A spawn that fails is then\n"
"the call's result(): (None, errno, stage).");

static PyObject *native_start_aside(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    PyObject *failure;
    CallObject *c = new_call(&failure);
    if (c == NULL)
        return failure;
    if (prepare_run(&c->r, args, nargs, &c->how) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    c->args = PyTuple_Pack(4, args[0], args[1], args[2], args[3]); /* what how's strings point into */
    if (c->args == NULL) {
        PyMem_Free(c->how.argv);
        PyMem_Free(c->how.envp);
        c->how.argv = c->how.envp = NULL;
        Py_DECREF(c);
        return NULL;
    }
    c->aside = 1;
    c->running = 1;
    c->payload = Py_NewRef(args[5]);
    c->on_stderr = Py_NewRef(args[9]);
    pthread_mutex_lock(&pool.lock);
    int no_thread = queue_spawn(c);
    pthread_mutex_unlock(&pool.lock);
    if (no_thread) { /* no spawner thread could be made: spawn here, the outcome is the same */
        Py_BEGIN_ALLOW_THREADS
        int spawned = spawn_counted(&c->r, &c->how);
        after_spawn(c, spawned, errno);
        Py_END_ALLOW_THREADS
    }
    return (PyObject *)c;
}

/* The spawn aside is over (nothing spawns for c any more): take its result in, GIL
 * held. Afterwards the call is a start()ed one, or over with c->failure. Returns 0, or
 * -1 when Python raised (nothing was started then). */
static int finish_aside(CallObject *c) {
    c->aside = 0;
    PyMem_Free(c->how.argv);
    PyMem_Free(c->how.envp);
    c->how.argv = c->how.envp = NULL;
    Py_CLEAR(c->args);
    if (c->spawned < 0) { /* result() words it: (None, errno, stage) */
        c->running = 0;
        c->spawn_failed = 1;
        return 0;
    }
    if (c->r.cancels) /* stopped before it was seen running: it never ran for anyone */
        kill_run(&c->r, SIGKILL);
    return 0;
}

/* 1 while c's spawn aside is not seen over yet (0: finished now or before), -1 when Python raised. */
static int still_spawning(CallObject *c) {
    if (disown(c) || !c->aside)
        return 0;
    pthread_mutex_lock(&pool.lock);
    int busy = c->spawning;
    pthread_mutex_unlock(&pool.lock);
    if (busy)
        return 1;
    return finish_aside(c) < 0 ? -1 : 0;
}

static PyObject *call_fileno(CallObject *c, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(c->epfd);
}

PyDoc_STRVAR(step_doc, "step($self, /)\n--\n\n"
"Handle what is ready and what became due, without blocking; True once the call is over\n"
"(after terminate(): once the child is reaped).");

static PyObject *step_run(CallObject *c);

static PyObject *call_step(CallObject *c, PyObject *unused) {
    (void)unused;
    int spawning = still_spawning(c);
    if (spawning)
        return spawning < 0 ? NULL : Py_NewRef(Py_False);
    if (!c->running)
        return Py_NewRef(Py_True);
    c->r.gil_held = 1;
    PyObject *over = step_run(c);
    c->r.gil_held = 0;
    return over;
}

/* call_step's work on a running call, the GIL held throughout. */
static PyObject *step_run(CallObject *c) {
    struct epoll_event events[8];
    /* A second round when stdout joined the epoll in the first (the exit was seen): what
     * the child printed is in the pipe already, and is read in this step, not the next. */
    for (int round = 0; round < 2; round++) {
        int watched = c->r.out_watched;
        int ready = epoll_wait(c->epfd, events, 8, 0);
        if (ready < 0 && errno != EINTR)
            return PyErr_SetFromErrno(PyExc_OSError);
        for (int i = 0; i < ready; i++) {
            int fd = events[i].data.fd;
            if (fd == c->tfd) {
                unsigned long long expirations;
                if (read(c->tfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
                    return PyErr_SetFromErrno(PyExc_OSError);
                c->armed = NAN; /* fired: re-arm whatever the next wakeup is */
                continue;
            }
            int rc = dispatch(&c->r, fd, events[i].events, NULL);
            if (rc == -3)
                return PyErr_NoMemory();
            if (rc == -1)
                return NULL;
        }
        on_time(&c->r, now_mono());
        if (watched == c->r.out_watched || done(&c->r, 0))
            break;
    }
    if (done(&c->r, 0))
        return Py_NewRef(Py_True);
    arm(c);
    return Py_NewRef(Py_False);
}

PyDoc_STRVAR(wait_doc, "wait($self, /)\n--\n\n"
"See a start()ed call through in this thread, the GIL released while it waits, as run()\n"
"does (a confined call's child is spawned in another thread, then waited for here);\n"
"then result(). Not for a call whose spawn went aside (start_aside).");

static PyObject *call_wait(CallObject *c, PyObject *unused) {
    (void)unused;
    if (disown(c) || !c->running)
        Py_RETURN_NONE;
    if (c->aside) {
        PyErr_SetString(PyExc_RuntimeError, "wait(): the spawn went aside; step() the call instead");
        return NULL;
    }
    int saved_errno = 0;
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyThreadState *ts;
    int failed = see_through(&c->r, &ts, &saved_errno, &type, &value, &tb);
    PyEval_RestoreThread(ts);
    if (failed == -1) {
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    if (failed) {
        raise_failure(failed, saved_errno);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *call_terminate(CallObject *c, PyObject *unused) {
    (void)unused;
    if (disown(c))
        Py_RETURN_NONE;
    if (c->aside) { /* spawning: the spawner thread owns the run; ended once seen */
        c->r.cancels++;
        Py_RETURN_NONE;
    }
    if (c->running) {
        c->r.gil_held = 1;
        stop_run(&c->r);
        c->r.gil_held = 0;
        arm(c);
    }
    Py_RETURN_NONE;
}

static PyObject *call_result(CallObject *c, PyObject *unused) {
    (void)unused;
    disown(c);
    if (c->failure != NULL)
        return Py_NewRef(c->failure);
    if (c->spawn_failed) {
        const char *stage = c->spawned == -1 ? "pipes" : c->spawned == -3 ? "fds" : "spawn";
        c->failure = Py_BuildValue("(Ois)", Py_None, c->spawn_errno, stage);
        return Py_XNewRef(c->failure);
    }
    if (c->aside || (c->running && !c->r.reaped)) {
        PyErr_SetString(PyExc_RuntimeError, "the call is still running");
        return NULL;
    }
    return outcome(&c->r);
}

static PyObject *call_close_method(CallObject *c, PyObject *unused) {
    (void)unused;
    disown(c);
    if (c->aside) {
        wait_spawned(c);
        if (finish_aside(c) < 0)
            return NULL;
    }
    close_timer_and_epoll(c); /* first: the run's descriptors then leave no epoll entry to take out */
    if (c->running) {
        Py_BEGIN_ALLOW_THREADS /* a blocking reap when still running */
        close_all(&c->r);
        Py_END_ALLOW_THREADS
        c->running = 0;
    }
    close_timer_and_epoll(c); /* a call kept alive (a traceback holds it) holds no descriptor */
    Py_RETURN_NONE;
}

static PyObject *call_reaped(CallObject *c, void *closure) {
    (void)closure;
    disown(c);
    return PyBool_FromLong(!c->aside && c->r.reaped);
}

static PyMethodDef call_methods[] = {
    {"fileno", (PyCFunction)call_fileno, METH_NOARGS, "The descriptor the loop watches for reading."},
    {"step", (PyCFunction)call_step, METH_NOARGS, step_doc},
    {"wait", (PyCFunction)call_wait, METH_NOARGS, wait_doc},
    {"terminate", (PyCFunction)call_terminate, METH_NOARGS,
     "Stop: SIGTERM to the group, SIGKILL after the grace (a second time: SIGKILL now)."},
    {"result", (PyCFunction)call_result, METH_NOARGS, "How it ended: the tuple run() returns."},
    {"close", (PyCFunction)call_close_method, METH_NOARGS,
     "SIGKILL and a blocking reap if still running; close every descriptor (the result stays)."},
    {NULL, NULL, 0, NULL},
};

static PyObject *call_pid(CallObject *c, void *closure) {
    (void)closure;
    disown(c);
    return PyLong_FromLong(!c->aside ? (long)c->r.pid : -1L);
}

static PyGetSetDef call_getset[] = {
    {"reaped", (getter)call_reaped, NULL, "The child was reaped (or never ran).", NULL},
    {"pid", (getter)call_pid, NULL, "The child's pid (its process group and session too).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ongrid_plugins.executors._fastrun.Call",
    .tp_basicsize = sizeof(CallObject),
    .tp_dealloc = (destructor)call_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One child seen through by an event loop (made by start()).",
    .tp_methods = call_methods,
    .tp_getset = call_getset,
};

/* -- the entry, opened beneath its root ------------------------------------------- */

#define SYS_OPENAT2_NR 437 /* the same number on every Linux architecture */
#define RESOLVE_NO_MAGICLINKS_ 0x02
#define RESOLVE_NO_SYMLINKS_ 0x04
#define RESOLVE_BENEATH_ 0x08

struct open_how_ {
    unsigned long long flags, mode, resolve;
};

PyDoc_STRVAR(open_beneath_doc, "open_beneath(root, relative, flags, /)\n--\n\n"
"Open the directory root, then relative beneath it (str or bytes, encoded as\n"
"os.fsencode encodes them) with openat2: no\n"
"symlink in any component, no '..' above it, no magic link; root is closed again.\n"
"Returns the descriptor (O_CLOEXEC added), or None when the kernel has no openat2\n"
"(ENOSYS, or EPERM from a seccomp filter): the caller walks instead. Raises OSError\n"
"whose filename is root when the root could not be opened, else relative. The GIL\n"
"is kept: two local opens, cheaper than handing it over twice.");

static PyObject *native_open_beneath(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "open_beneath(root: str | bytes, relative: str | bytes, flags: int)");
        return NULL;
    }
    long flags = PyLong_AsLong(args[2]);
    if (flags == -1 && PyErr_Occurred())
        return NULL;
    /* os.fsencode's conversion (and its ValueError for an embedded NUL), without a Python call */
    PyObject *root_b = NULL, *relative_b = NULL;
    if (!PyUnicode_FSConverter(args[0], &root_b))
        return NULL;
    if (!PyUnicode_FSConverter(args[1], &relative_b)) {
        Py_DECREF(root_b);
        return NULL;
    }
    const char *root = PyBytes_AS_STRING(root_b), *relative = PyBytes_AS_STRING(relative_b);
    int root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    Py_DECREF(root_b);
    if (root_fd < 0) {
        Py_DECREF(relative_b);
        return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, args[0]);
    }
    struct open_how_ how = {(unsigned long long)(flags | O_CLOEXEC), 0,
                            RESOLVE_BENEATH_ | RESOLVE_NO_SYMLINKS_ | RESOLVE_NO_MAGICLINKS_};
    long fd = syscall(SYS_OPENAT2_NR, root_fd, relative, &how, sizeof how);
    int err = errno;
    close(root_fd);
    Py_DECREF(relative_b);
    if (fd >= 0)
        return PyLong_FromLong(fd);
    if (err == ENOSYS || err == EPERM)
        Py_RETURN_NONE;
    errno = err;
    return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, args[1]);
}

static PyMethodDef native_methods[] = {
    {"open_beneath", (PyCFunction)(void (*)(void))native_open_beneath, METH_FASTCALL, open_beneath_doc},
    {"run", (PyCFunction)(void (*)(void))native_run, METH_FASTCALL, run_doc},
    {"start", (PyCFunction)(void (*)(void))native_start, METH_FASTCALL, start_doc},
    {"start_aside", (PyCFunction)(void (*)(void))native_start_aside, METH_FASTCALL, start_aside_doc},
    {NULL, NULL, 0, NULL},
};

static int native_exec(PyObject *module) {
    /* The fork handlers once per process: other interpreters import the module too. */
    int rc = 0;
    static int forks_watched = 0;
    if (!forks_watched) {
        rc = pthread_atfork(pool_before_fork, pool_after_fork_parent, pool_after_fork);
        if (rc) {
            errno = rc;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        forks_watched = 1;
    }
    if (PyType_Ready(&CallType) < 0)
        return -1;
    /* The child closes what it must not inherit with close_range (Linux 5.9): a kernel
     * without it leaves the runs to the Python runner. The range closes nothing. */
    int spawns = syscall(SYS_close_range, ~0U, ~0U, 0) == 0;
    if (PyModule_AddObjectRef(module, "SPAWNS", spawns ? Py_True : Py_False) < 0)
        return -1;
    /* This build kills a confined call's cgroup (the group argument) and has Call.wait. */
    if (PyModule_AddObjectRef(module, "CONFINES", Py_True) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "Call", (PyObject *)&CallType);
}

static PyModuleDef_Slot native_slots[] = {
    {Py_mod_exec, native_exec},
    {0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ongrid_plugins.executors._fastrun",
    .m_doc = "The hardened runner's hot path in C (see _fastrun.c).",
    .m_size = 0,
    .m_methods = native_methods,
    .m_slots = native_slots,
};

PyMODINIT_FUNC PyInit__fastrun(void) { return PyModuleDef_Init(&native_module); }
