/* test_docker_seccomp.c - the shape of the sandbox's seccomp profile
 * (plugins/provider_docker/docker_seccomp.c, docs/operations.md): socket() only in the
 * families a sandbox needs (never AF_VSOCK), socketpair() only for AF_UNIX, no
 * socketcall and no io_uring anywhere, an allow-list (everything else fails), and no
 * call named twice in the unconditional list; ioctl by request, never a btrfs
 * subvolume, snapshot or quota request (whatever the high half of the argument holds),
 * while terminal and reflink requests pass. The runtime test
 * (tests/runtime/test_docker_seccomp.c) shows the engine applies it. */
#include "test_common.h"

#include <jansson.h>

#include "docker.h"

/* docker.c's helper, which the profile uses (the plugin exports no symbols). */
json_t *dk_strv_json(const char *const *v)
{
    json_t *a = json_array();

    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        json_array_append_new(a, json_string(v[i]));
    }
    return a;
}

static int names_have(json_t *rule, const char *name)
{
    size_t i;
    json_t *n;

    json_array_foreach(json_object_get(rule, "names"), i, n)
    {
        if (strcmp(json_string_value(n), name) == 0) {
            return 1;
        }
    }
    return 0;
}

static void test_profile_shape(void **state)
{
    static const char *const never[] = {
        "socketcall", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl",
        "add_key",    "request_key",    "userfaultfd",    "kexec_load",        NULL};
    static const json_int_t want_families[] = {1, 2, 10, 16, 17};
    json_t *p = dk_seccomp_profile();
    json_t *calls = json_object_get(p, "syscalls");
    json_t *allowed = json_array_get(calls, 0);
    json_t *r;
    size_t i;
    size_t n_families = 0;
    size_t n_pairs = 0;
    char *text;

    (void)state;
    assert_string_equal(json_string_value(json_object_get(p, "defaultAction")), "SCMP_ACT_ERRNO");
    /* the first rule: the unconditional allow-list */
    assert_string_equal(json_string_value(json_object_get(allowed, "action")), "SCMP_ACT_ALLOW");
    assert_null(json_object_get(allowed, "args"));
    assert_null(json_object_get(allowed, "includes"));
    assert_true(names_have(allowed, "read"));
    assert_true(names_have(allowed, "connect"));
    assert_true(names_have(allowed, "execve"));
    assert_false(names_have(allowed, "socket"));
    assert_false(names_have(allowed, "socketpair"));
    assert_false(names_have(allowed, "clone"));
    {
        json_t *names = json_object_get(allowed, "names");

        for (size_t a = 0; a < json_array_size(names); a++) {
            for (size_t b = a + 1; b < json_array_size(names); b++) {
                if (strcmp(json_string_value(json_array_get(names, a)),
                           json_string_value(json_array_get(names, b))) == 0) {
                    fail_msg("'%s' is listed twice", json_string_value(json_array_get(names, a)));
                }
            }
        }
    }
    json_array_foreach(calls, i, r)
    {
        const char *action = json_string_value(json_object_get(r, "action"));
        json_t *args = json_object_get(r, "args");

        assert_non_null(action);
        for (size_t k = 0; never[k] != NULL; k++) {
            if (names_have(r, never[k])) {
                fail_msg("rule %zu names '%s'", i, never[k]);
            }
        }
        if (names_have(r, "socket")) {
            json_t *a = json_array_get(args, 0);
            json_int_t fam = json_integer_value(json_object_get(a, "value"));

            /* only ALLOW rules with one comparison: family == one of the list */
            assert_string_equal(action, "SCMP_ACT_ALLOW");
            assert_int_equal(json_array_size(json_object_get(r, "names")), 1);
            assert_int_equal(json_array_size(args), 1);
            assert_int_equal(json_integer_value(json_object_get(a, "index")), 0);
            assert_string_equal(json_string_value(json_object_get(a, "op")), "SCMP_CMP_EQ");
            assert_true(n_families < 5);
            assert_int_equal(fam, want_families[n_families]);
            assert_int_not_equal(fam, 40); /* AF_VSOCK */
            n_families++;
        }
        if (names_have(r, "socketpair")) {
            assert_string_equal(action, "SCMP_ACT_ALLOW");
            assert_int_equal(json_integer_value(json_object_get(json_array_get(args, 0), "value")),
                             1);
            n_pairs++;
        }
    }
    assert_int_equal(n_families, 5);
    /* no 32-bit x86: libseccomp would turn the socket rules into socketcall(SYS_SOCKET)
     * without the family check there */
    json_array_foreach(json_object_get(p, "archMap"), i, r)
    {
        json_t *sub;
        size_t k;

        assert_string_not_equal(json_string_value(json_object_get(r, "architecture")),
                                "SCMP_ARCH_X86");
        json_array_foreach(json_object_get(r, "subArchitectures"), k, sub)
        {
            assert_string_not_equal(json_string_value(sub), "SCMP_ARCH_X86");
        }
    }
    assert_int_equal(n_pairs, 1);
    /* small enough to send with every create */
    text = json_dumps(p, JSON_COMPACT);
    assert_true(strlen(text) < 16384);
    free(text);
    json_decref(p);
}

/* Whether the profile's ioctl rules let request `req` through, evaluated as the engine
 * builds them: rules OR'ed, each rule's comparisons AND'ed, MASKED_EQ on all 64 bits
 * (value is the mask, valueTwo the datum). */
static int ioctl_allowed(json_t *calls, uint64_t req)
{
    size_t i;
    json_t *r;

    json_array_foreach(calls, i, r)
    {
        json_t *args = json_object_get(r, "args");
        json_t *a;
        size_t k;
        int all = 1;

        if (!names_have(r, "ioctl")) {
            continue;
        }
        assert_string_equal(json_string_value(json_object_get(r, "action")), "SCMP_ACT_ALLOW");
        assert_int_equal(json_array_size(args), 1); /* one comparison: see ioctl_rules */
        json_array_foreach(args, k, a)
        {
            uint64_t mask = (uint64_t)json_integer_value(json_object_get(a, "value"));
            uint64_t datum = (uint64_t)json_integer_value(json_object_get(a, "valueTwo"));

            assert_int_equal(json_integer_value(json_object_get(a, "index")), 1);
            assert_string_equal(json_string_value(json_object_get(a, "op")), "SCMP_CMP_MASKED_EQ");
            assert_true(mask <= 0xffffffffu); /* the kernel reads an unsigned int */
            if ((req & mask) != datum) {
                all = 0;
            }
        }
        if (all) {
            return 1;
        }
    }
    return 0;
}

static void test_ioctl_by_request(void **state)
{
    static const uint64_t denied[] = {
        0x5000940e, /* BTRFS_IOC_SUBVOL_CREATE */
        0x50009418, /* _V2 */
        0x50009401, /* BTRFS_IOC_SNAP_CREATE */
        0x50009417, /* _V2 */
        0x5000940f, /* BTRFS_IOC_SNAP_DESTROY */
        0x5000943f, /* _V2 */
        0xc0109428, /* BTRFS_IOC_QUOTA_CTL */
        0x40189429, /* BTRFS_IOC_QGROUP_ASSIGN */
        0x4010942a, /* BTRFS_IOC_QGROUP_CREATE */
        0x8030942b, /* BTRFS_IOC_QGROUP_LIMIT */
        0x4040942c, /* BTRFS_IOC_QUOTA_RESCAN */
        0xc0c89425, /* BTRFS_IOC_SET_RECEIVED_SUBVOL */
        0x40089413, /* BTRFS_IOC_DEFAULT_SUBVOL */
        0x4008941a, /* BTRFS_IOC_SUBVOL_SETFLAGS */
    };
    static const uint64_t passed[] = {
        0x5401,     /* TCGETS */
        0x5413,     /* TIOCGWINSZ */
        0x541b,     /* FIONREAD */
        0x80086601, /* FS_IOC_GETFLAGS */
        0x40049409, /* FICLONE */
        0x4020940d, /* FICLONERANGE */
        0xc0189436, /* FIDEDUPERANGE */
        0x8400941f, /* BTRFS_IOC_FS_INFO */
    };
    json_t *p = dk_seccomp_profile();
    json_t *calls = json_object_get(p, "syscalls");

    (void)state;
    assert_false(names_have(json_array_get(calls, 0), "ioctl"));
    for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
        if (ioctl_allowed(calls, denied[i]) ||
            ioctl_allowed(calls, denied[i] | 0xffffffff00000000u) ||
            ioctl_allowed(calls, denied[i] | 0x100000000u)) {
            fail_msg("ioctl 0x%llx passes", (unsigned long long)denied[i]);
        }
    }
    for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++) {
        if (!ioctl_allowed(calls, passed[i]) ||
            !ioctl_allowed(calls, passed[i] | 0xffffffff00000000u)) {
            fail_msg("ioctl 0x%llx is refused", (unsigned long long)passed[i]);
        }
    }
    /* every other type passes: all 256 types but btrfs's, any number */
    for (uint64_t type = 0; type < 256; type++) {
        assert_int_equal(ioctl_allowed(calls, 0x40000000u | type << 8 | 0x0e), type != 0x94);
    }
    json_decref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_shape),
        cmocka_unit_test(test_ioctl_by_request),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
