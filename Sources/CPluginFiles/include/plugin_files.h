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

#endif
