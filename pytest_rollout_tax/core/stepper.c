/* rtx-step: one session step in one process (pytest-rollout-tax, core/stepper.py builds it).
 *
 *   rtx-step LIMIT CWD [-e NAME=VALUE]... -- ARGV...
 *   rtx-step --serve MARKER   runs steps read from stdin until it ends (the session's server)
 *   rtx-step --check          prints "rtx-step ok" (the session's test that it runs here)
 *
 * Runs ARGV in CWD with the variables added, in a process group of its own (so `kill 0` in
 * the step ends the step's processes only, never this relay), with stdin from /dev/null.
 * Relays the step's stdout and stderr to its own until every process holding them has
 * closed them and ARGV has exited, then exits with ARGV's status (128 + signal for a killed
 * one). At LIMIT seconds (0: none) it kills the step's whole process group, passes on what
 * is already buffered, and exits 137 (128 + SIGKILL), as `timeout -s KILL` reports it. A CWD
 * that cannot be entered is 127; a program that does not exist 127, one that cannot run 126,
 * each with the reason on stderr, as sh says them.
 *
 * --serve: the held process of a session (the shell execs it), so that a step costs one fork
 * and one exec. It takes the shell's place: it execs itself once more with the shell's own
 * command line (`sh`, the marker in RTX_STEP_SERVE, which no step inherits), so whatever
 * finds the session's shell by its command line finds it; /proc/PID/comm says rtx-step. It
 * first frames MARKER as below with status 0, then reads requests, each framed on its own:
 *
 *   MARKER R LIMIT NENV NARGV\n  CWD\0 NAME=VALUE\0 (NENV times) ARG\0 (NARGV times)
 *   MARKER S NBYTES\n            NBYTES of a script, run by `sh` from its stdin (a file step)
 *
 * and after each step writes "\nMARKER STATUS\n" on stdout and "\nMARKER\n" on stderr, the
 * session's sentinels. At the end of its stdin it exits 0; on a request it cannot read, 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    say("usage: rtx-step LIMIT CWD [-e NAME=VALUE]... -- ARGV... | --serve MARKER | --check",
        "", "");
    return 2;
}

#define GONE (-1) /* the session's reader is gone */
#define SERVE_VARIABLE "RTX_STEP_SERVE"
static char buffer[1 << 17];

/* Runs one step (see the top); its status, or GONE. `script` >= 0: the child's stdin. */
static int run_step(double limit, const char *cwd, char **env, int nenv, char **command,
                    int script) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) < 0) return say("rtx-step: pipe: ", strerror(errno), ""), 126;
    if (pipe2(err, O_CLOEXEC) < 0) {
        say("rtx-step: pipe: ", strerror(errno), "");
        close(out[0]), close(out[1]);
        return 126;
    }
    pid_t child = fork();
    if (child < 0) {
        say("rtx-step: fork: ", strerror(errno), "");
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        return 126;
    }
    if (child == 0) {
        signal(SIGCHLD, SIG_DFL);
        setpgid(0, 0);
        int input = script >= 0 ? script : open("/dev/null", O_RDONLY);
        if (input >= 0 && input != 0) dup2(input, 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        if (chdir(cwd) < 0) {
            say("cd: ", cwd, errno == ENOTDIR ? ": Not a directory" : ": No such file or directory");
            _exit(127);
        }
        setenv("PWD", cwd, 1);
        for (int i = 0; i < nenv; i++) putenv(env[i]);
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
    int open_streams = 2, status = 0, exited = 0, killed = 0, gone = 0;
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
                killed = gone = 1;
                break;
            }
        }
        if (gone) break;
    }
    if (killed) {
        killpg(child, SIGKILL);
        kill(child, SIGKILL);
        for (int i = 0; i < 2 && !gone; i++) { /* what the step wrote before its end is its */
            if (fds[i].fd < 0) continue;
            fcntl(fds[i].fd, F_SETFL, O_NONBLOCK);
            ssize_t n;
            while ((n = read(fds[i].fd, buffer, sizeof buffer)) > 0) put(i + 1, buffer, n);
        }
        while (!exited && waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    if (gone) return GONE;
    if (killed) return 128 + SIGKILL;
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* -- --serve: requests from stdin ------------------------------------------------------------ */

static char input[1 << 16];
static size_t input_at, input_len;

static int next_byte(void) {
    if (input_at == input_len) {
        ssize_t n;
        while ((n = read(0, input, sizeof input)) < 0 && errno == EINTR) {
        }
        if (n <= 0) return -1;
        input_at = 0;
        input_len = (size_t)n;
    }
    return (unsigned char)input[input_at++];
}

/* The bytes up to `stop` (not kept), NUL-terminated, in *out (grown with realloc); its
 * length, or -1 at the end of stdin. */
static long read_until(char stop, char **out, size_t *room) {
    size_t size = 0;
    for (;;) {
        int c = next_byte();
        if (c < 0) return -1;
        if (size + 1 >= *room) {
            *room = *room ? *room * 2 : 256;
            if ((*out = realloc(*out, *room)) == NULL) return -1;
        }
        if (c == stop) break;
        (*out)[size++] = (char)c;
    }
    (*out)[size] = 0;
    return (long)size;
}

/* `size` bytes of stdin into the file `fd`; 0, or -1 if stdin ended first. */
static int copy_into(int fd, unsigned long size) {
    while (size > 0) {
        if (input_at == input_len && next_byte() >= 0) input_at--; /* refill, keep the byte */
        if (input_at == input_len) return -1;
        size_t n = input_len - input_at < size ? input_len - input_at : size;
        if (put(fd, input + input_at, (ssize_t)n) < 0) return -1;
        input_at += n;
        size -= n;
    }
    return 0;
}

/* The step's sentinels, each in one write (one frame on the session's stream). */
static int frame(const char *marker, int status) {
    char line[160];
    size_t m = strlen(marker);
    if (m > 100) m = 100;
    char digits[12];
    int length = 0;
    unsigned value = status < 0 ? 0 : (unsigned)status;
    do digits[length++] = (char)('0' + value % 10), value /= 10;
    while (value > 0);
    size_t at = 0;
    line[at++] = '\n';
    memcpy(line + at, marker, m), at += m;
    line[at++] = ' ';
    while (length > 0) line[at++] = digits[--length];
    line[at++] = '\n';
    if (put(1, line, (ssize_t)at) < 0) return -1;
    line[1 + m] = '\n'; /* "\nMARKER\n" */
    return put(2, line, (ssize_t)(m + 2));
}

static int serve(const char *first) {
    char *line = NULL;
    size_t line_room = 0;
    if (frame(first, 0) < 0) return 141;
    for (;;) {
        if (read_until('\n', &line, &line_room) < 0) return 0; /* the session ended */
        char *marker = strtok(line, " "), *kind = strtok(NULL, " ");
        if (marker == NULL || kind == NULL) return usage();
        int status;
        if (strcmp(kind, "S") == 0) { /* a script, run by sh from a file of its own */
            char *size = strtok(NULL, " ");
            if (size == NULL) return usage();
            int script = memfd_create("rtx-step-script", MFD_CLOEXEC);
            if (script < 0) { /* a kernel without memfd: an unlinked file of its own */
                char path[] = "/tmp/.rtx-step-script-XXXXXX";
                if ((script = mkostemp(path, O_CLOEXEC)) < 0)
                    return say("rtx-step: script file: ", strerror(errno), ""), 2;
                unlink(path);
            }
            if (copy_into(script, strtoul(size, NULL, 10)) < 0) return usage();
            lseek(script, 0, SEEK_SET);
            char *sh[] = {"sh", NULL};
            status = run_step(0, ".", NULL, 0, sh, script);
            close(script);
        } else if (strcmp(kind, "R") == 0) {
            char *limit = strtok(NULL, " "), *nenv = strtok(NULL, " "), *nargv = strtok(NULL, " ");
            if (limit == NULL || nenv == NULL || nargv == NULL) return usage();
            int n_env = atoi(nenv), n_argv = atoi(nargv), count = 1 + n_env + n_argv;
            if (n_env < 0 || n_argv < 1) return usage();
            char **fields = calloc((size_t)count + 1, sizeof *fields);
            if (fields == NULL) return 2;
            for (int i = 0; i < count; i++) {
                size_t room = 0;
                if (read_until(0, &fields[i], &room) < 0) return usage();
            }
            status = run_step(strtod(limit, NULL), fields[0], fields + 1, n_env,
                              fields + 1 + n_env, -1);
            for (int i = 0; i < count; i++) free(fields[i]); /* only the child put the env */
            free(fields);
        } else {
            return usage();
        }
        if (status == GONE || frame(marker, status) < 0) return 141;
    }
}

static int setup(void) {
    if (pipe2(wake, O_CLOEXEC) < 0) return say("rtx-step: pipe: ", strerror(errno), ""), -1;
    fcntl(wake[1], F_SETFL, O_NONBLOCK);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_child;
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &action, NULL);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--check") == 0) {
        return put(1, "rtx-step ok\n", 12) == 0 ? 0 : 1;
    }
    const char *serving = getenv(SERVE_VARIABLE);
    if (argc == 1 && serving != NULL) {
        char *marker = strdup(serving);
        unsetenv(SERVE_VARIABLE);
        return marker == NULL || setup() < 0 ? 126 : serve(marker);
    }
    if (argc == 3 && strcmp(argv[1], "--serve") == 0) {
        if (setenv(SERVE_VARIABLE, argv[2], 1) == 0) {
            char *shell[] = {"sh", NULL};
            execv(argv[0], shell); /* the shell's command line; failing that, serve as is */
            unsetenv(SERVE_VARIABLE);
        }
        return setup() < 0 ? 126 : serve(argv[2]);
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
    int nenv = (at - 3) / 2;
    char *env[nenv + 1];
    for (int i = 0; i < nenv; i++) env[i] = argv[4 + 2 * i];
    if (setup() < 0) return 126;
    int status = run_step(limit, cwd, env, nenv, argv + at + 1, -1);
    return status == GONE ? 141 : status;
}

