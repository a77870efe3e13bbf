#ifndef ORCHESTRATE_PLUGIN_FILES_H
#define ORCHESTRATE_PLUGIN_FILES_H

/// Writes the file's dirty pages to the disk and waits for them, without the journal commit
/// and the disk cache flush an fdatasync adds (Linux `sync_file_range`, which Swift's Glibc
/// module does not export). Not durable by itself: the final fsync is. Elsewhere: fdatasync.
/// 0, or -1 with errno set.
int orc_write_back(int fd);

/// `O_PATH` (a descriptor that names a file without opening it for reading or writing: a step
/// of a path walk, or a symbolic link itself with `O_NOFOLLOW`), which Swift's Glibc module
/// does not export. Linux only.
int orc_open_path_flag(void);

/// `openat(AT_FDCWD, path, flags)` through `openat2` with `RESOLVE_NO_SYMLINKS`: one system
/// call that succeeds only when no component of `path` is a symbolic link (ELOOP otherwise).
/// The fast path of a walk that follows only trusted links. -1 with errno ENOSYS where the
/// kernel (before 5.6) or a seccomp filter lacks it. `O_CLOEXEC` is added.
int orc_open_without_links(const char *path, int flags);

/// 1 when `fd` is on /proc (its links name no path: "pipe:[…]", a deleted file), else 0.
/// Swift's Glibc module does not export `fstatfs`.
int orc_is_proc(int fd);

/// A second, write-only descriptor of the open file `fd` whose writes bypass the page cache
/// (Linux `O_DIRECT`, reopened through /proc/self/fd: the same file, whatever its path names
/// now; refused unless it is the same device and inode), or -1 with errno set: EOPNOTSUPP on a
/// file system other than ext2/3/4, xfs, btrfs and tmpfs (a network mount's direct writes are
/// synchronous round trips), EINVAL where the file system has none (tmpfs before Linux 6.6). Its writes must start, end and sit in memory at multiples of
/// `orc_direct_alignment()`. `O_CLOEXEC` is set.
int orc_reopen_direct(int fd);

/// The alignment `orc_reopen_direct`'s writes keep: 4096, a multiple of every disk's logical
/// block size here.
int orc_direct_alignment(void);

#endif
