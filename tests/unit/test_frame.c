/* test_frame.c - the one frame header (sbx/sbx_frame.h) and its fd and
 * piecewise helpers (util/frame.c): round trips, a length past the max, a
 * short read, non-zero reserved bytes, a peer of the older 5-byte frames. */
#include "test_common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/fileio.h"
#include "util/frame.h"

static void test_header_round_trip(void **state)
{
    static const uint32_t lens[] = {0, 1, 255, 256, 65536, SBX_FRAME_MAX, UINT32_MAX};
    unsigned char hdr[SBX_FRAME_HDR];
    unsigned char t;
    uint32_t n;

    (void)state;
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        sbx_frame_encode(hdr, 'O', lens[i]);
        assert_int_equal(sbx_frame_decode(hdr, UINT32_MAX, &t, &n), SBX_FRAME_OK);
        assert_int_equal(t, 'O');
        assert_int_equal(n, lens[i]);
    }
    /* exactly the runner API's ?frames=1 header (docs/api.md) */
    sbx_frame_encode(hdr, 2, 0x01020304u);
    assert_memory_equal(hdr, "\x02\0\0\0\x01\x02\x03\x04", 8);
}

static void test_header_refused(void **state)
{
    unsigned char hdr[SBX_FRAME_HDR];
    unsigned char t;
    uint32_t n;

    (void)state;
    sbx_frame_encode(hdr, 'R', SBX_FRAME_MAX + 1);
    assert_int_equal(sbx_frame_decode(hdr, SBX_FRAME_MAX, &t, &n), SBX_FRAME_ETOOLONG);
    assert_int_equal(n, SBX_FRAME_MAX + 1);
    for (int i = 1; i <= 3; i++) {
        sbx_frame_encode(hdr, 'R', 4);
        hdr[i] = 1;
        assert_int_equal(sbx_frame_decode(hdr, SBX_FRAME_MAX, &t, &n), SBX_FRAME_ERESERVED);
    }
    sbx_frame_encode(hdr, 0, 4);
    assert_int_equal(sbx_frame_decode(hdr, SBX_FRAME_MAX, &t, &n), SBX_FRAME_ERESERVED);
}

/* Writes raw bytes into one end of a socket pair, closes it, reads a frame
 * from the other: the read's result and error. */
static int read_raw(const void *raw, size_t len, char *type, char **data, size_t *n,
                    sbx_error_t **err)
{
    int sv[2];
    int r;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(sbx_send_all(sv[0], raw, len), 0);
    close(sv[0]);
    r = sbx_frame_read(sv[1], type, data, n, err);
    close(sv[1]);
    return r;
}

static void test_fd_round_trip(void **state)
{
    int sv[2];
    char type = 0;
    char *data = NULL;
    size_t n = 0;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(sbx_frame_write(sv[0], 'X', "{\"status\":0}", 12), 0);
    assert_int_equal(sbx_frame_write(sv[0], 'I', NULL, 0), 0);
    close(sv[0]);
    assert_int_equal(sbx_frame_read(sv[1], &type, &data, &n, NULL), 0);
    assert_int_equal(type, 'X');
    assert_int_equal(n, 12);
    assert_string_equal(data, "{\"status\":0}");
    free(data);
    assert_int_equal(sbx_frame_read(sv[1], &type, &data, &n, NULL), 0);
    assert_int_equal(type, 'I');
    assert_int_equal(n, 0);
    free(data);
    assert_int_equal(sbx_frame_read(sv[1], &type, &data, &n, NULL), 1); /* EOF */
    close(sv[1]);
}

static void test_fd_refused(void **state)
{
    char type;
    char *data = NULL;
    size_t n;
    sbx_error_t *err = NULL;
    unsigned char hdr[SBX_FRAME_HDR];

    (void)state;
    /* short reads: inside the header, inside the payload */
    assert_int_equal(read_raw("O\0\0\0", 4, &type, &data, &n, &err), -1);
    assert_non_null(strstr(sbx_error_msg(err), "truncated frame"));
    sbx_error_free(&err);
    assert_int_equal(read_raw("O\0\0\0\0\0\0\x05"
                              "abc",
                              11, &type, &data, &n, &err),
                     -1);
    assert_non_null(strstr(sbx_error_msg(err), "truncated frame"));
    assert_null(data);
    sbx_error_free(&err);
    /* past the max */
    sbx_frame_encode(hdr, 'O', SBX_FRAME_MAX + 1);
    assert_int_equal(read_raw(hdr, sizeof(hdr), &type, &data, &n, &err), -1);
    assert_non_null(strstr(sbx_error_msg(err), "frame of 16777217 bytes (max 16777216)"));
    sbx_error_free(&err);
    /* a reserved byte */
    assert_int_equal(read_raw("O\0\x07\0\0\0\0\0", 8, &type, &data, &n, &err), -1);
    assert_non_null(strstr(sbx_error_msg(err), "bad frame header"));
    sbx_error_free(&err);
    /* an older sbx: [type][length u32 BE]{JSON, either direction */
    assert_int_equal(read_raw("X\0\0\0\x0c{\"status\":0}", 17, &type, &data, &n, &err), -1);
    assert_non_null(strstr(sbx_error_msg(err), "keeper frames v1"));
    sbx_error_free(&err);
    assert_int_equal(read_raw("R\0\0\x01\x10{\"op\":\"exec\"}", 18, &type, &data, &n, &err), -1);
    assert_non_null(strstr(sbx_error_msg(err), "keeper frames v1"));
    sbx_error_free(&err);
}

static void test_pieces(void **state)
{
    /* two frames, fed byte by byte then at once */
    static const char two[] = "\x01\0\0\0\0\0\0\x02hi\x02\0\0\0\0\0\0\x03"
                              "err";
    struct sbx_frame_dec d;
    char out[16];
    size_t out_len = 0;

    (void)state;
    sbx_frame_dec_init(&d, "\1\2", UINT32_MAX);
    for (size_t i = 0; i < sizeof(two) - 1; i++) {
        const char *piece;
        size_t n;

        assert_int_equal(sbx_frame_dec_feed(&d, two + i, 1, &piece, &n), 1);
        if (n > 0) {
            memcpy(out + out_len, piece, n);
            out_len += n;
        }
        assert_int_equal(sbx_frame_dec_boundary(&d), i == 9 || i == sizeof(two) - 2);
    }
    assert_int_equal(out_len, 5);
    assert_memory_equal(out, "hierr", 5);
    /* a type not allowed, a reserved byte, a length past the max: sticky */
    sbx_frame_dec_init(&d, "\1\2", UINT32_MAX);
    {
        const char *piece;
        size_t n;

        assert_int_equal(sbx_frame_dec_feed(&d, "\x03\0\0\0\0\0\0\x01z", 9, &piece, &n), 8);
        assert_int_equal(d.bad, SBX_FRAME_ETYPE);
        assert_int_equal(n, 0);
        assert_false(sbx_frame_dec_boundary(&d));
        assert_int_equal(sbx_frame_dec_feed(&d, "\x01\0\0\0\0\0\0\0", 8, &piece, &n), 0);
        sbx_frame_dec_init(&d, "\1\2", UINT32_MAX);
        assert_int_equal(sbx_frame_dec_feed(&d, "\x01\0\x01\0\0\0\0\0", 8, &piece, &n), 8);
        assert_int_equal(d.bad, SBX_FRAME_ERESERVED);
        sbx_frame_dec_init(&d, "\1\2", 4);
        assert_int_equal(sbx_frame_dec_feed(&d, "\x01\0\0\0\0\0\0\x05", 8, &piece, &n), 8);
        assert_int_equal(d.bad, SBX_FRAME_ETOOLONG);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_round_trip),
        cmocka_unit_test(test_header_refused),
        cmocka_unit_test(test_fd_round_trip),
        cmocka_unit_test(test_fd_refused),
        cmocka_unit_test(test_pieces),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
