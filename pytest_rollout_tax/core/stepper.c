/* rtx-step: one session step in one process (pytest-rollout-tax, core/stepper.py builds it).
 *
 *   rtx-step LIMIT CWD [-e NAME=VALUE]... -- ARGV...
 *   rtx-step --check          prints "rtx-step ok" (the session's test that it runs here)
 *
 * Runs ARGV in CWD with the variables added, in a process group of its own (so `kill 0` in
 * the step ends the step's processes only, never this relay), with stdin as given (the
 * session sends /dev/null). Relays the step's stdout and stderr to its own until every
 * process holding them has closed them and ARGV has exited, then exits with ARGV's status
 * (128 + signal for a killed one). At LIMIT seconds (0: none) it kills the step's whole
 * process group, passes on what is already buffered, and exits 137 (128 + SIGKILL), as
 * `timeout -s KILL` reports it. A CWD that cannot be entered is 127; a program that does
 * not exist 127, one that cannot run 126, each with the reason on stderr, as sh says them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int wake[2] = {-1, -1};

static void on_child(int sig) {
    int saved = errno;
    (void)sig;
    if (write(wake[1], "", 1) < 0) { /* the pipe is full: one wake-up is enough */
    }
    errno = saved;
}

static void say(const char *a, const char *b, const char *c) {
    const char *parts[] = {a, b, c, "\n"};
    for (int i = 0; i < 4; i++) {
        size_t left = strlen(parts[i]);
        const char *p = parts[i];
        while (left > 0) {
            ssize_t n = write(2, p, left);
            if (n <= 0) return;
            p += n;
            left -= (size_t)n;
        }
    }
}

static int put(int fd, const char *data, ssize_t size) {
    while (size > 0) {
        ssize_t n = write(fd, data, (size_t)size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        data += n;
        size -= n;
    }
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int usage(void) {
    say("usage: rtx-step LIMIT CWD [-e NAME=VALUE]... -- ARGV...", "", "");
    return 2;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--check") == 0) {
        return put(1, "rtx-step ok\n", 12) == 0 ? 0 : 1;
    }
    if (argc < 5) return usage();
    double limit = strtod(argv[1], NULL);
    const char *cwd = argv[2];
    int at = 3;
    while (at < argc && strcmp(argv[at], "--") != 0) {
        if (strcmp(argv[at], "-e") != 0 || at + 1 >= argc) return usage();
        at += 2;
    }
    if (at + 1 >= argc) return usage();
    char **command = argv + at + 1;

    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(wake, O_CLOEXEC) < 0) {
        say("rtx-step: pipe: ", strerror(errno), "");
        return 126;
    }
    fcntl(wake[1], F_SETFL, O_NONBLOCK);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_child;
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &action, NULL);

    pid_t child = fork();
    if (child < 0) {
        say("rtx-step: fork: ", strerror(errno), "");
        return 126;
    }
    if (child == 0) {
        signal(SIGCHLD, SIG_DFL);
        setpgid(0, 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        if (chdir(cwd) < 0) {
            say("cd: ", cwd, errno == ENOTDIR ? ": Not a directory" : ": No such file or directory");
            _exit(127);
        }
        setenv("PWD", cwd, 1);
        for (int i = 3; i < at; i += 2) putenv(argv[i + 1]);
        execvp(command[0], command);
        int failed = errno;
        say(command[0], ": ", failed == ENOENT ? "not found" : strerror(failed));
        _exit(failed == ENOENT ? 127 : 126);
    }
    setpgid(child, child); /* before the child's own call too: killpg must find the group */
    close(out[1]);
    close(err[1]);

    double deadline = limit > 0 ? now() + limit : 0;
    struct pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {wake[0], POLLIN, 0}};
    int open_streams = 2, status = 0, exited = 0, killed = 0;
    static char buffer[1 << 17];
    while (open_streams > 0 || !exited) {
        if (!exited) {
            pid_t done = waitpid(child, &status, WNOHANG);
            if (done == child) {
                exited = 1;
                continue;
            }
        }
        int wait_ms = -1;
        if (deadline > 0) {
            double left = deadline - now();
            if (left <= 0) {
                killed = 1;
                break;
            }
            wait_ms = (int)(left * 1000) + 1;
        }
        int ready = poll(fds, 3, wait_ms);
        if (ready < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (fds[2].revents) {
            char drain[64];
            if (read(wake[0], drain, sizeof drain) < 0) { /* woken all the same */
            }
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !fds[i].revents) continue;
            ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_streams--;
            } else if (put(i + 1, buffer, n) < 0) {
                killpg(child, SIGKILL);
                return 141; /* the session's reader is gone */
            }
        }
    }
    if (killed) {
        killpg(child, SIGKILL);
        kill(child, SIGKILL);
        for (int i = 0; i < 2; i++) { /* what the step wrote before its end is its output */
            if (fds[i].fd < 0) continue;
            fcntl(fds[i].fd, F_SETFL, O_NONBLOCK);
            ssize_t n;
            while ((n = read(fds[i].fd, buffer, sizeof buffer)) > 0) put(i + 1, buffer, n);
        }
        while (!exited && waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
        return 128 + SIGKILL;
    }
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
