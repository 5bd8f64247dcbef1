/* osb_server.h - starts the OpenSandbox contract server for CLI-level tests. */
#ifndef SBX_RT_OSB_SERVER_H
#define SBX_RT_OSB_SERVER_H

static pid_t osb_pid;
static int osb_port;

static inline int osb_start(void)
{
    char *script = rt_source_path("tests/contract/opensandbox_server.py");
    char *argv[] = {"python3", script, "--port", "0", "--api-key", "osb-test-key", NULL};

    osb_pid = rt_spawn_server(argv, &osb_port);
    free(script);
    setenv("OPEN_SANDBOX_API_KEY", "osb-test-key", 1);
    return osb_pid > 0 ? 0 : -1;
}

static inline void osb_stop(void)
{
    rt_stop_server(&osb_pid);
}

#endif
