// orchestrate-exec-guard EXECUTABLE ARGV0 [ARG...]   (started by the exec plugin, not by hand)
//
// Sits between the exec plugin and the command it runs, so that a command never outlives the
// process that runs its step, however that process dies (kill -9 included):
//
//   fd 3  the lifeline: the read end of a pipe whose only write end the step's process holds
//         (close-on-exec, so no other child inherits it). End of file means that process died.
//   fd 4  the report: close-on-exec here; the plugin reads it to end of file, which comes once
//         the command was exec'd. Records of 8 bytes (tag, value): 'P' the command's pid,
//         'E' the errno of a failed execve, 'S' the errno of a failed setup step.
//
// The guard leads the process group the plugin created for the step, makes itself the child
// subreaper, forks the command into that group, and waits. When the command ends, the guard
// ends the same way (its exit status, or death by the same signal), so the plugin sees the
// command's fate unchanged. When the lifeline reports end of file, it SIGKILLs every process of
// the group and every process reparented to it (descendants that left the group), until none is
// left, then exits. Signals sent to the group (the plugin's SIGTERM-then-SIGKILL on cancel, or
// anyone's kill -USR1 -PGID) reach the command as before: the guard ignores the catchable ones
// and only SIGKILL takes it down with the group.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

enum { LIFELINE_FD = 3, REPORT_FD = 4 };

static int wake_pipe[2] = {-1, -1};

static void on_sigchld(int signal) {
    (void)signal;
    int saved = errno;
    ssize_t ignored = write(wake_pipe[1], "c", 1); // full pipe: a wake-up is already pending
    (void)ignored;
    errno = saved;
}

static void report(char tag, int32_t value) {
    int32_t record[2] = {tag, value};
    ssize_t ignored = write(REPORT_FD, record, sizeof record);
    (void)ignored;
}

static _Noreturn void setup_failed(const char *what, int error) {
    fprintf(stderr, "orchestrate-exec-guard: %s: %s\n", what, strerror(error));
    report('S', error);
    _exit(125);
}

/// Keeps only 0-4: closes every other descriptor the step's process let through (a test
/// harness's termination socket, a leaked connection, whose end of file someone waits for) and
/// marks 3 and 4 close-on-exec, so the command starts with exactly 0, 1 and 2.
static void keep_only_own_descriptors(void) {
    fcntl(LIFELINE_FD, F_SETFD, FD_CLOEXEC);
    fcntl(REPORT_FD, F_SETFD, FD_CLOEXEC);
#if defined(SYS_close_range) && defined(__linux__)
    if (syscall(SYS_close_range, 5U, ~0U, 0U) == 0) return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = 5; fd < (max > 0 && max < 65536 ? max : 65536); fd++) close(fd);
}

/// One /proc/PID/stat: state, parent, process group.
struct proc_entry {
    pid_t pid, ppid, pgrp;
    char state;
};

static int read_stat(pid_t pid, struct proc_entry *entry) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return -1;
    text[n] = 0;
    char *close_paren = strrchr(text, ')'); // the command name may contain anything
    int ppid, pgrp;
    if (!close_paren || sscanf(close_paren + 1, " %c %d %d", &entry->state, &ppid, &pgrp) != 3) return -1;
    entry->pid = pid;
    entry->ppid = ppid;
    entry->pgrp = pgrp;
    return 0;
}

/// SIGKILLs every live process of the guard's group and every live child of the guard (as the
/// subreaper, it inherits descendants whose parent died, whatever their group). Returns how
/// many it found alive, or -1 without /proc.
static int kill_sweep(pid_t self) {
    DIR *proc = opendir("/proc");
    if (!proc) return -1;
    int alive = 0;
    struct dirent *item;
    while ((item = readdir(proc))) {
        char *end;
        long pid = strtol(item->d_name, &end, 10);
        struct proc_entry entry;
        if (*end || pid <= 0 || pid == self || read_stat((pid_t)pid, &entry) != 0) continue;
        if (entry.state == 'Z' || entry.state == 'X') continue;
        if (entry.pgrp == self || entry.ppid == self) {
            kill(entry.pid, SIGKILL);
            alive++;
        }
    }
    closedir(proc);
    return alive;
}

static void reap_available(void) {
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

/// The step's process died: nothing it started may go on. Sweeps until a sweep finds nothing
/// alive (a process killed in one sweep hands its children to the guard before it turns
/// zombie, so the next sweep sees them); gives up after about 10 s (a process stuck in the
/// kernel, which SIGKILL will end when it comes out).
static _Noreturn void kill_everything(void) {
    pid_t self = getpid();
    for (int round = 0; round < 5000; round++) {
        int alive = kill_sweep(self);
        if (alive < 0) kill(0, SIGKILL); // no /proc: the whole group at once, the guard included
        reap_available();
        if (alive == 0) break;
        struct timespec pause = {0, 2 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    _exit(137);
}

/// Ends the guard the way the command ended.
static _Noreturn void end_like(int status) {
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    int signal = WTERMSIG(status);
#ifdef __linux__
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); // the command may have dumped core; the guard must not
#endif
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigaction(signal, &action, NULL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signal);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    kill(getpid(), signal);
    _exit(128 + signal); // not reached for a signal that kills
}

int main(int argc, char **argv) {
    if (argc < 3 || fcntl(LIFELINE_FD, F_GETFD) < 0 || fcntl(REPORT_FD, F_GETFD) < 0) {
        fprintf(stderr, "usage: orchestrate-exec-guard EXECUTABLE ARGV0 [ARG...] with the lifeline on fd 3 "
                        "and the report pipe on fd 4 (the exec plugin starts it; it is not meant to be run by hand)\n");
        return 125;
    }
    keep_only_own_descriptors();
    // Leads its own group (the plugin spawns it so already; this makes sure a group kill below
    // can never reach whoever started it).
    if (getpgrp() != getpid() && setpgid(0, 0) != 0) setup_failed("setpgid", errno);
#ifdef __linux__
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) setup_failed("PR_SET_CHILD_SUBREAPER", errno);
#endif
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) setup_failed("/dev/null", errno);
    if (pipe(wake_pipe) != 0) setup_failed("pipe", errno);
    for (int i = 0; i < 2; i++) {
        fcntl(wake_pipe[i], F_SETFD, FD_CLOEXEC);
        fcntl(wake_pipe[i], F_SETFL, O_NONBLOCK);
    }

    // Catchable signals sent to the group are for the command: ignored here, restored to what
    // they were in the command. Faults stay default (a guard that faults must not linger).
    static struct sigaction inherited[NSIG];
    for (int signal = 1; signal < NSIG; signal++) {
        if (sigaction(signal, NULL, &inherited[signal]) != 0) continue;
        if (signal == SIGKILL || signal == SIGSTOP || signal == SIGSEGV || signal == SIGBUS || signal == SIGILL
            || signal == SIGFPE || signal == SIGTRAP || signal == SIGSYS)
            continue;
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = signal == SIGCHLD ? on_sigchld : SIG_IGN;
        action.sa_flags = signal == SIGCHLD ? SA_RESTART | SA_NOCLDSTOP : 0;
        sigaction(signal, &action, NULL);
    }

    // Signals are held across fork, so one sent to the group meanwhile reaches the command with
    // its own disposition rather than the guard's "ignore".
    sigset_t everything, mask;
    sigfillset(&everything);
    sigprocmask(SIG_BLOCK, &everything, &mask);
    pid_t command = fork();
    if (command < 0) setup_failed("fork", errno);
    if (command == 0) {
        for (int signal = 1; signal < NSIG; signal++) sigaction(signal, &inherited[signal], NULL);
        sigprocmask(SIG_SETMASK, &mask, NULL);
        execv(argv[1], argv + 2); // the environment is the guard's, which the plugin built
        int error = errno;
        report('E', error);
        _exit(127);
    }
    sigprocmask(SIG_SETMASK, &mask, NULL);
    report('P', command);
    close(REPORT_FD); // the plugin's end of file comes when the command's copy goes at exec
    // The guard keeps no copy of the step's pipes: their end of file (and EPIPE on stdin)
    // depends on the command alone, as without a guard.
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);

    for (;;) {
        struct pollfd watched[2] = {{LIFELINE_FD, POLLIN, 0}, {wake_pipe[0], POLLIN, 0}};
        if (poll(watched, 2, -1) < 0) {
            if (errno != EINTR) { // out of memory for a moment: try again shortly
                struct timespec pause = {0, 10 * 1000 * 1000};
                nanosleep(&pause, NULL);
            }
            continue;
        }
        if (watched[1].revents) {
            char drained[64];
            while (read(wake_pipe[0], drained, sizeof drained) > 0) {}
        }
        // The command, or an orphan handed to the guard as subreaper.
        int status;
        pid_t ended;
        while ((ended = waitpid(-1, &status, WNOHANG)) > 0) {
            if (ended == command) end_like(status);
        }
        if (watched[0].revents) {
            char ignored;
            ssize_t n = read(LIFELINE_FD, &ignored, 1);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) kill_everything();
        }
    }
}
