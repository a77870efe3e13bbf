#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/stat.h>
#ifdef __linux__
#include <linux/openat2.h>
#endif
#include "plugin_files.h"

int orc_write_back(int fd) {
#ifdef __linux__
    // Offset 0, length 0: the whole file. Pages already on disk are not written again.
    return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
#else
    return fdatasync(fd);
#endif
}

int orc_open_path_flag(void) {
    return O_PATH;
}

int orc_open_without_links(const char *path, int flags) {
#if defined(__linux__) && defined(SYS_openat2)
    struct open_how how = { .flags = (unsigned long long)(unsigned)(flags | O_CLOEXEC), .mode = 0, .resolve = RESOLVE_NO_SYMLINKS };
    return (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
#else
    (void)path;
    (void)flags;
    errno = ENOSYS;
    return -1;
#endif
}

int orc_is_proc(int fd) {
#ifdef __linux__
    struct statfs info;
    return fstatfs(fd, &info) == 0 && info.f_type == 0x9FA0 ? 1 : 0;  /* PROC_SUPER_MAGIC */
#else
    (void)fd;
    return 0;
#endif
}

int orc_reopen_direct(int fd) {
#ifdef __linux__
    // Local file systems only: on an NFS or SMB mount a direct write is a synchronous round trip
    // to the server, slower than the page cache it would save.
    struct statfs where;
    if (fstatfs(fd, &where) != 0) return -1;
    switch ((unsigned long)where.f_type) {
    case 0xEF53:       // ext2, ext3, ext4
    case 0x58465342:   // xfs
    case 0x9123683E:   // btrfs
    case 0x01021994:   // tmpfs (takes O_DIRECT from Linux 6.6; EINVAL before)
        break;
    default:
        errno = EOPNOTSUPP;
        return -1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int direct = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (direct < 0) return -1;
    // Where /proc is not procfs (a sandbox's plain folder), the path could name any file: the
    // new descriptor must be the same file as `fd`.
    struct stat was, is;
    if (fstat(fd, &was) != 0 || fstat(direct, &is) != 0 || was.st_dev != is.st_dev || was.st_ino != is.st_ino) {
        close(direct);
        errno = EINVAL;
        return -1;
    }
    return direct;
#else
    (void)fd;
    errno = EINVAL;
    return -1;
#endif
}

int orc_direct_alignment(void) {
    return 4096;
}
