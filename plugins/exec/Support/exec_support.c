#define _GNU_SOURCE
#include "exec_support.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

int orc_exec_pipe_cloexec(int fds[2]) {
#ifdef __linux__
    return pipe2(fds, O_CLOEXEC);
#else
    // No pipe2 (macOS): the window between pipe and fcntl stays open there.
    if (pipe(fds) != 0) return -1;
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    return 0;
#endif
}

const char *orc_exec_image_path(const void *address) {
    Dl_info info;
    return dladdr(address, &info) && info.dli_fname ? info.dli_fname : NULL;
}
