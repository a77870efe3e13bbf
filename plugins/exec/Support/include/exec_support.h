// The libc calls the exec plugin needs that Swift's Glibc module does not expose (they are
// declared only under _GNU_SOURCE).
#ifndef ORCHESTRATE_EXEC_SUPPORT_H
#define ORCHESTRATE_EXEC_SUPPORT_H

/// pipe2(fds, O_CLOEXEC): both ends close-on-exec from the start, so a child spawned by another
/// thread at the same moment cannot inherit them. 0 or -1 with errno.
int orc_exec_pipe_cloexec(int fds[2]);

/// The path of the shared object (or executable) that contains `address`, as it was loaded,
/// or NULL. The string belongs to the dynamic loader.
const char *orc_exec_image_path(const void *address);

#endif
