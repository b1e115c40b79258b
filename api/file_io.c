/* Opening the files of a model directory: config.json, the
 * index and the shards are refused unless they are regular files, before
 * anything can block: a FIFO or a device opened for reading would wait for
 * a writer forever (or never end). open(O_NONBLOCK) returns at once for a
 * FIFO, fstat then says what was opened, so no rename between a check and
 * the open can slip a FIFO in. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

qp_status qp_open_regular(const qp_context *ctx, const char *path, int *fd_out, size_t *size) {
    *fd_out = -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return qp_error_set(ctx, QP_ERR_IO, path, NULL, NULL, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb)) {
        int e = errno;
        close(fd);
        return qp_error_set(ctx, QP_ERR_IO, path, NULL, NULL, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return qp_error_set(ctx, QP_ERR_IO, path, NULL, NULL, "not a regular file (%s): refused before reading",
                            S_ISFIFO(sb.st_mode) ? "a FIFO" : S_ISDIR(sb.st_mode) ? "a directory"
                            : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device" : S_ISSOCK(sb.st_mode) ? "a socket" : "not a file");
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    if (size) *size = (size_t)sb.st_size;
    return QP_OK;
}

qp_status qp_read_regular(const qp_context *ctx, const char *path, size_t max, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    int fd;
    size_t size;
    qp_status st = qp_open_regular(ctx, path, &fd, &size);
    if (st) return st;
    if (size > max) {
        close(fd);
        return qp_error_set(ctx, QP_ERR_PARSE, path, NULL, NULL, "file of %zu bytes is larger than the %zu-byte limit", size, max);
    }
    char *p = malloc(size + 1);
    if (!p) { close(fd); return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, path, NULL, NULL, "out of memory"); }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, p + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(p);
            close(fd);
            return qp_error_set(ctx, QP_ERR_IO, path, NULL, NULL, "read error: %s", strerror(e));
        }
        if (r == 0) break; /* shrank while read: parse what is there */
        got += (size_t)r;
    }
    close(fd);
    p[got] = 0;
    *out = p;
    *len = got;
    return QP_OK;
}
