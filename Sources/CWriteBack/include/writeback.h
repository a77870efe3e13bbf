// Early write-back of a file's dirty pages (Linux sync_file_range), for Swift, whose Glibc
// module does not declare the GNU extension. Not a durability call: fsync still is.
#ifndef ORCHESTRATE_WRITEBACK_H
#define ORCHESTRATE_WRITEBACK_H

#include <stdint.h>

/// Starts writing [offset, offset + length) of `fd` to disk without waiting. 0 or -1 (errno).
int orc_writeback_start(int fd, int64_t offset, int64_t length);

/// Starts it if needed and waits until [offset, offset + length) has been written. 0 or -1.
int orc_writeback_wait(int fd, int64_t offset, int64_t length);

#endif
