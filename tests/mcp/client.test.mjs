// client.test.mjs - the official MCP TypeScript SDK drives `sbx mcp` over
// stdio against the test Docker engine (ctest: mcp_sdk_client, label runtime).
//
// Needs: SBX_BIN (the sbx binary), SBX_TEST_DOCKER_HOST=unix://... (scripts/test.sh
// starts the engine), and tests/mcp/node_modules (npm ci --prefix tests/mcp).
// Talks only to the child it starts and to the engine's unix socket.
import assert from 'node:assert/strict';
import { chmodSync, chownSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let Client, StdioClientTransport, McpError;
try {
    ({ Client } = await import('@modelcontextprotocol/sdk/client/index.js'));
    ({ StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js'));
    ({ McpError } = await import('@modelcontextprotocol/sdk/types.js'));
} catch (e) {
    console.error(`mcp_sdk_client: the MCP SDK is not installed (${e.message}); ` +
        'run: npm ci --prefix tests/mcp');
    process.exit(1);
}

const host = process.env.SBX_TEST_DOCKER_HOST ?? '';
const sbx = process.env.SBX_BIN;
if (!host.startsWith('unix://') || !sbx) {
    console.error('mcp_sdk_client: needs SBX_TEST_DOCKER_HOST=unix://... and SBX_BIN ' +
        '(run scripts/test.sh, which starts the test engine)');
    process.exit(1);
}
const socketPath = host.slice('unix://'.length);
const state = mkdtempSync(join(tmpdir(), 'sbx-mcp-test-'));
let serverStderr = '';
// the project sbx mcp runs in (its cwd): worktrees must be inside it; owned
// by an unprivileged uid, whom the idmapped worktree makes root inside
const project = mkdtempSync(join(tmpdir(), 'sbx-mcp-project-'));
mkdirSync(join(project, 'wt'));
writeFileSync(join(project, 'wt', 'hello.txt'), 'from the worktree\n');
chmodSync(project, 0o755);
chownSync(join(project, 'wt'), 1000, 1000);
chownSync(join(project, 'wt', 'hello.txt'), 1000, 1000);

/* This test's sandboxes on the test engine: an sbx.task label and
 * sbx.test=<SBX_TEST_LABEL> (docs/testing.md; set by ctest, inherited by sbx mcp). */
const scope = process.env.SBX_TEST_LABEL || `mcp-${process.pid}`;
process.env.SBX_TEST_LABEL = scope;
function sandboxes() {
    const filters = encodeURIComponent(JSON.stringify({ label: ['sbx.task', `sbx.test=${scope}`] }));
    return new Promise((resolve, reject) => {
        http.get({ socketPath, path: `/containers/json?all=1&filters=${filters}` }, res => {
            let body = '';
            res.on('data', c => { body += c; });
            res.on('end', () => resolve(JSON.parse(body).length));
        }).on('error', reject);
    });
}

// The sandbox count once it is `want`, or after 10 s whatever it is then.
async function sandboxesSettle(want) {
    let n = await sandboxes();
    for (let i = 0; i < 100 && n !== want; i++) {
        await new Promise(res => setTimeout(res, 100));
        n = await sandboxes();
    }
    return n;
}

// With no runner configured, sbx mcp runs a private runner, which reserves each
// job's CPUs and memory on the box: small sandboxes, so that a kept task and a
// second one fit on a 2-CPU box. The file is outside the project (a worktree
// holding sbx's configuration is refused).
const conf = join(state, 'sbx.conf');
writeFileSync(conf, 'limits = { cpus = 0.5; memory = "1G"; };\n');

function connect() {
    const env = {
        PATH: process.env.PATH,
        HOME: process.env.HOME ?? '/root',
        DOCKER_HOST: host,
        SBX_CONFIG: conf,
        SBX_STATE_DIR: state,
        SBX_MCP_PROGRESS_MS: '300',
        SBX_TEST_LABEL: scope,
    };
    if (process.env.SBX_PLUGIN_DIR) {
        env.SBX_PLUGIN_DIR = process.env.SBX_PLUGIN_DIR;
    }
    const transport = new StdioClientTransport({ command: sbx, args: ['mcp'], env, cwd: project,
        stderr: 'pipe' });
    transport.stderr.on('data', chunk => {
        serverStderr += chunk;
        process.stderr.write(chunk);
    });
    const client = new Client({ name: 'sbx-ctest', version: '0.0.0' });
    return { client, transport };
}

const snaps = []; // (added) made by the test: removed at its end
const text = r => r.content.filter(c => c.type === 'text').map(c => c.text).join('\n');

async function main() {
    let { client, transport } = connect();
    await client.connect(transport);
    assert.equal(client.getServerVersion().name, 'sbx');
    assert.ok(client.getServerCapabilities().tools, 'tools capability declared');
    assert.match(client.getInstructions() ?? '', /embedded/);
    await client.ping();

    const { tools } = await client.listTools();
    assert.deepEqual(tools.map(t => t.name).sort(),
        ['sandbox_cancel', 'sandbox_end', 'sandbox_fork', 'sandbox_job', 'sandbox_queue',
            'sandbox_read_file', 'sandbox_run', 'sandbox_snapshot', 'sandbox_write_file']);
    for (const t of tools) {
        assert.equal(t.inputSchema.type, 'object', `${t.name} has an object inputSchema`);
    }

    // two commands in one task's sandbox: the second sees the first's file
    const before = await sandboxes();
    let r = await client.callTool({ name: 'sandbox_run', arguments: {
        task: 'mcp-t1', argv: ['sh', '-c', 'echo kept-across-calls > /tmp/mcp-file; echo made'] } });
    assert.notEqual(r.isError, true, text(r));
    assert.equal(r.structuredContent.exit_status, 0);
    assert.equal(r.structuredContent.stdout, 'made\n');
    assert.equal(r.structuredContent.task, 'mcp-t1');
    assert.equal(r.structuredContent.task_ended, false);
    assert.match(text(r), /exit status 0/);
    assert.equal(await sandboxes(), before + 1, 'the task holds one sandbox');

    r = await client.callTool({ name: 'sandbox_run', arguments: {
        task: 'mcp-t1', argv: ['cat', '/tmp/mcp-file'] } });
    assert.notEqual(r.isError, true, text(r));
    assert.equal(r.structuredContent.stdout, 'kept-across-calls\n');
    const job = r.structuredContent.job;
    assert.match(job, /^j-[0-9a-f]{12}$/);

    // a failing command is a result, not an error; stderr is kept apart
    r = await client.callTool({ name: 'sandbox_run', arguments: {
        task: 'mcp-t1', argv: ['sh', '-c', 'echo oops >&2; exit 3'] } });
    assert.notEqual(r.isError, true);
    assert.equal(r.structuredContent.exit_status, 3);
    assert.equal(r.structuredContent.stderr, 'oops\n');

    // without a task id: a fresh sandbox, gone after the command
    r = await client.callTool({ name: 'sandbox_run', arguments: { argv: ['cat', '/tmp/mcp-file'] } });
    assert.notEqual(r.isError, true, text(r));
    assert.equal(r.structuredContent.exit_status, 1, 'a fresh sandbox does not see the task\'s file');
    assert.equal(r.structuredContent.task_ended, true);
    assert.notEqual(r.structuredContent.task, 'mcp-t1');

    // a timeout kills the command and is a task failure
    r = await client.callTool({ name: 'sandbox_run', arguments: {
        task: 'mcp-t1', argv: ['sleep', '60'], timeout: 1 } });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.state, 'timed_out');

    // sandbox_cancel kills a running command; its call returns "cancelled"
    const running = async () => {
        for (let i = 0; i < 200; i++) {
            const q = await client.callTool({ name: 'sandbox_queue', arguments: {} });
            const jobs = q.structuredContent.running_jobs.filter(j => j.state === 'running');
            if (jobs.length > 0) {
                return jobs[0].job;
            }
            await new Promise(res => setTimeout(res, 50));
        }
        throw new Error('no running job appeared');
    };
    let call = client.callTool({ name: 'sandbox_run', arguments: { task: 'mcp-t1', argv: ['sleep', '60'] } });
    let id = await running();
    r = await client.callTool({ name: 'sandbox_cancel', arguments: { job: id } });
    assert.notEqual(r.isError, true, text(r));
    r = await call;
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.state, 'cancelled');
    assert.equal(r.structuredContent.job, id);

    // a request the client cancels (notifications/cancelled) kills its command
    const abort = new AbortController();
    call = client.callTool({ name: 'sandbox_run', arguments: { task: 'mcp-t1', argv: ['sleep', '60'] } },
        undefined, { signal: abort.signal });
    id = await running();
    abort.abort('test');
    await assert.rejects(call);
    for (let i = 0; i < 100; i++) {
        r = await client.callTool({ name: 'sandbox_job', arguments: { job: id } });
        if (r.structuredContent.state !== 'running') {
            break;
        }
        await new Promise(res => setTimeout(res, 50));
    }
    assert.equal(r.structuredContent.state, 'cancelled');

    // the task survived both cancellations
    r = await client.callTool({ name: 'sandbox_run', arguments: { task: 'mcp-t1', argv: ['cat', '/tmp/mcp-file'] } });
    assert.equal(r.structuredContent.stdout, 'kept-across-calls\n');

    // progress notifications while a command runs (asked for with a progressToken)
    let progressed = 0;
    r = await client.callTool({ name: 'sandbox_run', arguments: { task: 'mcp-t1', argv: ['sleep', '2'] } },
        undefined, { onprogress: () => { progressed++; } });
    assert.equal(r.structuredContent.exit_status, 0);
    assert.ok(progressed >= 1, `progress notifications seen: ${progressed}`);

    // a worktree inside the project is mounted; anything else of the host is refused
    r = await client.callTool({ name: 'sandbox_run', arguments: {
        worktree: 'wt', argv: ['sh', '-c', 'cat hello.txt; stat -c %u .; echo m > made'] } });
    assert.notEqual(r.isError, true, text(r));
    assert.equal(r.structuredContent.stdout, 'from the worktree\n0\n');
    assert.equal(lstatSync(join(project, 'wt', 'made')).uid, 1000, 'owned by the worktree\'s owner');
    assert.equal(readFileSync(join(project, 'wt', 'made'), 'utf8'), 'm\n');
    r = await client.callTool({ name: 'sandbox_run', arguments: { worktree: '/etc', argv: ['true'] } });
    assert.equal(r.isError, true);
    assert.match(text(r), /outside the project/);

    r = await client.callTool({ name: 'sandbox_queue', arguments: {} });
    assert.notEqual(r.isError, true);
    assert.equal(r.structuredContent.mode, 'embedded');
    assert.deepEqual(r.structuredContent.tasks.map(t => t.task), ['mcp-t1']);

    // (added, issue 30) a snapshot, a fork and a task from the snapshot: each sees
    // the parent's file; the fork's own change stays its own
    r = await client.callTool({ name: 'sandbox_snapshot', arguments: { task: 'mcp-t1' } });
    assert.notEqual(r.isError, true, text(r));
    const snap = r.structuredContent.id;
    assert.match(snap, /^s-[0-9a-f]{12}$/);
    r = await client.callTool({ name: 'sandbox_fork', arguments: { task: 'mcp-t1', new_task: 'mcp-fork' } });
    assert.notEqual(r.isError, true, text(r));
    assert.equal(r.structuredContent.task, 'mcp-fork');
    assert.equal(r.structuredContent.snapshot.fork, true);
    const forkSnap = r.structuredContent.snapshot.id;
    r = await client.callTool({ name: 'sandbox_run', arguments: { task: 'mcp-fork',
        argv: ['sh', '-c', 'cat /tmp/mcp-file; echo fork-only > /tmp/mcp-file'] } });
    assert.equal(r.structuredContent.stdout, 'kept-across-calls\n', text(r));
    r = await client.callTool({ name: 'sandbox_run', arguments: { task: 'mcp-t1', argv: ['cat', '/tmp/mcp-file'] } });
    assert.equal(r.structuredContent.stdout, 'kept-across-calls\n', 'the parent does not see the fork\'s write');
    r = await client.callTool({ name: 'sandbox_run', arguments: { task: 'mcp-fork', from: snap, argv: ['true'] } });
    assert.equal(r.isError, true);
    assert.match(text(r), /already running/);
    r = await client.callTool({ name: 'sandbox_run', arguments: { from: 's-000000000000', argv: ['true'] } });
    assert.equal(r.isError, true);
    assert.match(text(r), /no such snapshot/);
    // (the box admits two sandboxes of the default size: one ends before the next)
    r = await client.callTool({ name: 'sandbox_end', arguments: { task: 'mcp-fork' } });
    assert.notEqual(r.isError, true, text(r));
    r = await client.callTool({ name: 'sandbox_run', arguments: { from: snap, argv: ['cat', '/tmp/mcp-file'] } });
    assert.equal(r.structuredContent.stdout, 'kept-across-calls\n', text(r));
    snaps.push(snap, forkSnap);

    // end the task, then read the job
    r = await client.callTool({ name: 'sandbox_end', arguments: { task: 'mcp-t1' } });
    assert.notEqual(r.isError, true, text(r));
    assert.equal(r.structuredContent.state, 'ended');
    // (the runner removes a sandbox in the background once the task has ended)
    assert.equal(await sandboxesSettle(before), before, 'sandbox_end removed the sandbox');

    r = await client.callTool({ name: 'sandbox_job', arguments: { job } });
    assert.notEqual(r.isError, true, text(r));
    assert.equal(r.structuredContent.state, 'finished');
    assert.equal(r.structuredContent.stdout, 'kept-across-calls\n');
    assert.deepEqual(r.structuredContent.command, ['cat', '/tmp/mcp-file']);
    assert.ok('egress' in r.structuredContent);

    // bad arguments and unknown names: isError results
    for (const [name, args] of [
        ['sandbox_run', { argv: 'ls -l' }],
        ['sandbox_run', {}],
        ['sandbox_run', { argv: ['ls'], task: 'bad id!' }],
        ['sandbox_run', { argv: ['ls'], timeout: -5 }],
        ['sandbox_run', { argv: ['ls'], provider: 'no-such-provider' }],
        ['sandbox_run', { argv: ['no-such-command-xyz'] }],
        ['sandbox_end', { task: 'mcp-t1' }],
        ['sandbox_job', { job: 'j-000000000000' }],
        ['sandbox_cancel', { job }],
    ]) {
        r = await client.callTool({ name, arguments: args });
        assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} gives isError`);
        assert.ok(text(r).length > 0);
    }

    // an unknown tool is a protocol error, -32602
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }),
        e => e instanceof McpError && e.code === -32602);

    // a task still held when the client goes away is ended with the server
    r = await client.callTool({ name: 'sandbox_run', arguments: { task: 'mcp-t2', argv: ['true'] } });
    assert.notEqual(r.isError, true, text(r));
    assert.equal(await sandboxesSettle(before + 1), before + 1);
    await client.close();
    assert.equal(await sandboxesSettle(before), before, 'closing stdin ended the held task');
    // (added) the snapshots go once no sandbox runs from them
    execFileSync(sbx, ['snapshot', 'rm', ...snaps], { env: { ...process.env, DOCKER_HOST: host,
        SBX_STATE_DIR: state }, cwd: project, stdio: ['ignore', 'ignore', 'inherit'] });

    // a command cancelled by closing the client mid-run is cleaned up too
    ({ client, transport } = connect());
    await client.connect(transport);
    const pending = client.callTool({ name: 'sandbox_run', arguments: { task: 'mcp-t3', argv: ['sleep', '60'] } })
        .catch(() => 'closed');
    for (let i = 0; i < 100 && await sandboxes() === before; i++) {
        await new Promise(res => setTimeout(res, 100));
    }
    assert.equal(await sandboxes(), before + 1);
    await new Promise(res => setTimeout(res, 300));
    const t0 = Date.now();
    await client.close();
    await pending;
    // the SDK's close() waits 2 s for the server, then SIGTERM, 2 s, SIGKILL:
    // a server still ending its task (cancel, destroy) under load is given
    // up to 10 s; a killed one leaves its sandbox and fails here
    assert.equal(await sandboxesSettle(before), before, 'no sandbox left after close mid-command');
    console.error(`mcp_sdk_client: close mid-command took ${Date.now() - t0} ms`);
    assert.doesNotMatch(serverStderr, /Sanitizer|runtime error:/, 'sbx mcp ran clean');
}

try {
    await main();
    console.log('mcp_sdk_client: all checks passed');
} catch (e) {
    console.error('mcp_sdk_client: FAILED:', e);
    process.exitCode = 1;
} finally {
    rmSync(state, { recursive: true, force: true });
    rmSync(project, { recursive: true, force: true });
}
