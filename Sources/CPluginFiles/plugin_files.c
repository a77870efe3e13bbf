#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
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
