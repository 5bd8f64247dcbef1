/* tarx.h - the tar streams of a task's files (docs/tasks.md, "Files"): a
 * streaming reader for what a sandbox sends (hostile: every field bounded),
 * a writer for one file, and an extractor that writes a sandbox's archive
 * below one host directory without ever following a symlink or leaving it. */
#ifndef SBX_SANDBOX_TARX_H
#define SBX_SANDBOX_TARX_H

#include <stddef.h>
#include <stdint.h>

#define SBX_TAR_NAME_MAX 4096

struct sbx_tar_entry {
    char name[SBX_TAR_NAME_MAX]; /* as in the archive (pax path, GNU long name, ustar prefix) */
    char link[SBX_TAR_NAME_MAX]; /* symlink or hard link target */
    char type;                   /* '0' file, '5' directory, '2' symlink, '1' hard link, other */
    uint32_t mode;               /* permission bits (07777) */
    int64_t size;                /* content bytes (files) */
    int64_t mtime;               /* Unix seconds */
};

/* A streaming reader: feed it bytes as they come, it calls on_entry once per
 * member (after its extended headers) and on_data with its content. A callback
 * returning non-zero stops the reader (sbx_tar_feed returns -1; the callback
 * says why in err). */
struct sbx_tar_reader {
    int (*on_entry)(void *ud, const struct sbx_tar_entry *e);
    int (*on_data)(void *ud, const char *data, size_t len); /* may be NULL */
    void *ud;
    char err[512]; /* why the reader stopped, set by it or by a callback */
    int done;      /* the end blocks were seen */
    /* state */
    unsigned char hdr[512];
    size_t hlen;
    int64_t left; /* content bytes of the current member still to come */
    size_t pad;   /* padding bytes after it */
    int kind;     /* what the current content is: 0 data, 1 pax, 2 long name, 3 long link, 4 skip */
    char *ext;    /* extended header being read */
    size_t ext_len;
    char path[SBX_TAR_NAME_MAX]; /* from extended headers, for the next member */
    char linkpath[SBX_TAR_NAME_MAX];
    int64_t ext_size; /* -1: none */
    struct sbx_tar_entry cur;
};

void sbx_tar_reader_init(struct sbx_tar_reader *r);
void sbx_tar_reader_fini(struct sbx_tar_reader *r);
/* 0 ok, -1 stopped (r->err says why). Bytes after the end blocks are ignored. */
int sbx_tar_feed(struct sbx_tar_reader *r, const char *data, size_t len);

/* An archive being written in memory: sbx_tar_add each member (a long name or link
 * gets a pax header; the end blocks are kept zeroed after the last member), then
 * sbx_tar_finish. type '0' file (data, len), '5' directory, '2' symlink (link). */
struct sbx_tar_buf {
    char *data;
    size_t len, cap;
};
int sbx_tar_add(struct sbx_tar_buf *b, const char *name, char type, unsigned mode, int64_t mtime,
                const char *link, const char *data, size_t len);
void sbx_tar_finish(struct sbx_tar_buf *b);
/* (added) Only the header(s) of a regular file of size bytes: its data and the zeros
 * up to the next 512 bytes (sbx_tar_pad) follow outside the buffer (a stream). */
int sbx_tar_add_head(struct sbx_tar_buf *b, const char *name, unsigned mode, int64_t mtime,
                     uint64_t size);
/* (added) The zeros after a member's size bytes of data. */
static inline size_t sbx_tar_pad(uint64_t size)
{
    return (size_t)((512 - size % 512) % 512);
}

/* A tar archive holding one regular file `name` (one path component) with data and
 * mode; *out is malloc'd. */
int sbx_tar_one_file(const char *name, const char *data, size_t len, unsigned mode, int64_t mtime,
                     char **out, size_t *out_len);

/* Extracts below the host directory root_fd: names are taken relative to it
 * (a leading '/' or './' dropped, '..' refused), every directory on the way is
 * opened without following a symlink (O_NOFOLLOW), an existing non-directory
 * is replaced (unlinked first, never written through), symlinks are made as
 * symlinks and never followed, devices and FIFOs are skipped (counted), modes
 * lose their set-id and sticky bits, owners are not kept. top, when not NULL,
 * replaces the archive's first path component (`sbx cp T:/a/b ./c`: b becomes c). */
struct sbx_tar_extract {
    int root_fd;
    const char *top;
    int64_t files, dirs, links, skipped;
    int out_fd; /* the file being written, or -1 */
    int64_t out_mtime;
    struct sbx_tar_reader rd;
};
void sbx_tar_extract_init(struct sbx_tar_extract *x, int root_fd, const char *top);
/* Finishes (closes what is open); -1 when the archive was cut short. */
int sbx_tar_extract_fini(struct sbx_tar_extract *x);
/* Feeds archive bytes; -1 with x->rd.err. */
int sbx_tar_extract_feed(struct sbx_tar_extract *x, const char *data, size_t len);

#endif
