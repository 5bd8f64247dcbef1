/* sbx_agent_proto.h - the exec agent's wire format (docs/tasks.md, "The exec
 * agent"), shared by the in-sandbox agent (tools/relay/agent.c, static, no
 * sbx libraries) and the host side (core/src/sandbox/agent.c).
 *
 * The host listens on SBX_AGENT_DIR "/" SBX_AGENT_SOCK (a host directory of
 * the task, mounted read-only there); the agent connects once when the
 * sandbox starts and keeps that control connection. Per command the host
 * sends on it:
 *   a 16-byte header {SBX_AGENT_MAGIC, version, payload length, 0} (u32
 *   big-endian each) with SCM_RIGHTS carrying 4 descriptors: stdin, stdout,
 *   stderr and one end of a fresh socket pair (the command's own channel);
 *   then the payload: u32 argc, u32 envc, then NUL-terminated strings: the
 *   working directory, argv[0..argc), env "K=V"[0..envc).
 * On the command's channel:
 *   agent -> host  8-byte records {type u8, 0, 0, 0, value i32 big-endian}
 *                  (the header of sbx/sbx_frame.h, a value in place of the
 *                  length, no payload):
 *                  'P' pid (the command runs), then 'X' exit code (128+n on
 *                  signal n); or 'F' errno alone (the command could not start).
 *   host -> agent  'K' signal: signal the command's process group. Closing
 *                  the channel before 'X' kills the group with SIGKILL. */
#ifndef SBX_AGENT_PROTO_H
#define SBX_AGENT_PROTO_H

#define SBX_AGENT_DIR "/run/sbx-agent"
#define SBX_AGENT_SOCK "host.sock"
#define SBX_AGENT_MAGIC 0x53425841u /* "SBXA" */
#define SBX_AGENT_VERSION 1u
#define SBX_AGENT_HDR 16
#define SBX_AGENT_REC 8
#define SBX_AGENT_PAYLOAD_MAX (1u << 20)
#define SBX_AGENT_STRINGS_MAX 8192u

#endif
