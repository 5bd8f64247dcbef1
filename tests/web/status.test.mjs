// status.test.mjs - the runner's status page in a real headless Chromium
// (Debian's `chromium`, driven by playwright-core; ctest: web_status_page).
//
// Starts `sbx serve` with the fake provider of tests/plugin_abi on a TCP
// listener on 127.0.0.1 with two API clients, then: the page is the login
// form without a session; a wrong token and a metrics-only token are refused;
// the right token logs in (the session cookie is HttpOnly and SameSite=Strict,
// the token is in no URL); the page loads without a console error or CSP
// violation, shows the pools, a job just submitted (queued or running, then in
// the slot holders) and its end with its exit status, renders a command as
// text, and the cookie cannot submit.
//
// Needs: SBX_BIN (the sbx binary), SBX_PLUGIN_DIR (build/test_plugins),
// Chromium at SBX_CHROMIUM or /usr/bin/chromium, and tests/web/node_modules
// (npm ci --prefix tests/web; scripts/test.sh does it). Talks only to
// 127.0.0.1 and the processes it starts.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let chromium;
try {
    ({ chromium } = await import('playwright-core'));
} catch (e) {
    console.error(`web_status_page: playwright-core is not installed (${e.message}); ` +
        'run: npm ci --prefix tests/web');
    process.exit(1);
}

const sbx = process.env.SBX_BIN;
const plugins = process.env.SBX_PLUGIN_DIR;
const browserPath = process.env.SBX_CHROMIUM || '/usr/bin/chromium';
if (!sbx || !plugins) {
    console.error('web_status_page: needs SBX_BIN and SBX_PLUGIN_DIR (run it through ctest)');
    process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'sbx-web-test-'));
const opsToken = randomBytes(24).toString('hex');
const promToken = randomBytes(24).toString('hex');
let serve = null;
let browser = null;
let serveLog = '';
const problemsSeen = [];

function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.on('error', reject);
        s.listen(0, '127.0.0.1', () => {
            const { port } = s.address();
            s.close(() => resolve(port));
        });
    });
}

const sleep = ms => new Promise(res => setTimeout(res, ms));

async function until(what, fn, ms = 60000) {
    const end = Date.now() + ms;
    for (;;) {
        const v = await fn();
        if (v) { return v; }
        if (Date.now() > end) { throw new Error(`timed out waiting for ${what}`); }
        await sleep(100);
    }
}

async function main() {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    writeFileSync(join(dir, 'sbx.conf'), `
plugin_dir = "${plugins}";
state_dir = "${dir}/state";
provider = "fake";
providers = { fake = { plugin = "provider_good"; }; };
limits = { cpus = 0.5; memory = "256M"; };
runner = {
  listen = "tcp:127.0.0.1:${port}";
  clients = (
    { name = "ops";  token_env = "SBX_WEB_OPS";  scopes = ["submit", "read-all"]; },
    { name = "prom"; token_env = "SBX_WEB_PROM"; scopes = ["metrics"]; }
  );
};
`);
    serve = spawn(sbx, ['--log-level', 'info', 'serve'], {
        env: { ...process.env, SBX_CONFIG: join(dir, 'sbx.conf'), SBX_WEB_OPS: opsToken,
               SBX_WEB_PROM: promToken },
        stdio: ['ignore', 'pipe', 'pipe'],
    });
    serve.stdout.on('data', d => { serveLog += d; });
    serve.stderr.on('data', d => { serveLog += d; });
    const auth = { Authorization: `Bearer ${opsToken}` };
    await until('sbx serve', async () => {
        try { return (await fetch(`${base}/healthz`, { headers: auth })).status === 200; }
        catch { return false; }
    });

    // without a session `/` is the login form, with the strict policy
    let res = await fetch(`${base}/`);
    assert.equal(res.status, 200);
    const csp = res.headers.get('content-security-policy');
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    const form = await res.text();
    assert.match(form, /<form id="login" method="post" action="\/login">/);
    assert.doesNotMatch(form, /status\.js/);

    // a wrong token, a metrics-only token, a cross-site form: refused
    const login = (token, headers = {}) => fetch(`${base}/login`, {
        method: 'POST', redirect: 'manual', body: new URLSearchParams({ token }),
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...headers },
    });
    res = await login('wrong');
    assert.equal(res.status, 401);
    assert.match(await res.text(), /Wrong token\./);
    res = await login(promToken);
    assert.equal(res.status, 403);
    assert.match(await res.text(), /lacks scope read-own or read-all/);
    res = await login(opsToken, { Origin: 'http://evil.example' });
    assert.equal(res.status, 403);
    assert.equal(res.headers.get('set-cookie'), null);

    res = await fetch(`${base}/login`, { method: 'POST', redirect: 'manual' });
    assert.equal(res.status, 401);
    res = await login('x'.repeat(9000));
    assert.equal(res.status, 413);
    assert.equal((await fetch(`${base}/`, { method: 'POST' })).status, 405);
    assert.equal((await fetch(`${base}/login`, { redirect: 'manual' })).status, 303);
    for (const bogus of ['sbx_session=00', `sbx_session=${'0'.repeat(64)}`, 'other=1']) {
        assert.equal((await fetch(`${base}/v1/queue`, { headers: { Cookie: bogus } })).status, 401);
    }

    // a cookie reads but never submits
    res = await login(opsToken);
    assert.equal(res.status, 303);
    const cookie = res.headers.get('set-cookie');
    assert.match(cookie, /^sbx_session=[0-9a-f]{64}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Strict$/);
    const session = cookie.split(';')[0];
    assert.equal((await fetch(`${base}/v1/queue`, { headers: { Cookie: session } })).status, 200);
    res = await fetch(`${base}/v1/jobs`, {
        method: 'POST', headers: { Cookie: session }, body: '{"argv":["true"]}' });
    assert.equal(res.status, 401);
    assert.equal((await fetch(`${base}/metrics`, { headers: { Cookie: session } })).status, 401);

    browser = await chromium.launch({ executablePath: browserPath, headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-extensions'] });
    const page = await (await browser.newContext()).newPage();
    page.setDefaultTimeout(60000); // a loaded CI machine; each wait ends as soon as it holds
    const problems = problemsSeen;
    const urls = [];
    page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') { problems.push(`console ${m.type()}: ${m.text()}`); } });
    page.on('pageerror', e => problems.push(`page error: ${e.message}`));
    page.on('requestfailed', r => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
    page.on('dialog', d => { problems.push(`dialog: ${d.message()}`); d.dismiss(); });
    page.on('request', r => urls.push(r.url()));

    await page.goto(`${base}/`);
    await page.fill('#token', opsToken);
    await Promise.all([page.waitForURL(`${base}/`), page.click('button[type=submit]')]);
    await page.waitForSelector('#pools tr[data-pool="ci"]');
    await page.waitForSelector('#pools tr[data-pool="agent"]');
    for (const u of urls) { assert.ok(!u.includes(opsToken), `the token in a URL: ${u}`); }
    const cookies = await page.context().cookies();
    assert.equal(cookies.length, 1);
    assert.equal(cookies[0].httpOnly, true);
    assert.equal(cookies[0].sameSite, 'Strict');
    assert.equal(await page.evaluate(() => document.cookie), '');

    // a job just submitted: on the page while it runs, then its end
    const submit = async argv => {
        const r = await fetch(`${base}/v1/jobs`, { method: 'POST', headers: auth,
            body: JSON.stringify({ argv }) });
        assert.equal(r.status, 201);
        return (await r.json()).id;
    };
    const longJob = await submit(['sleep', '4000']);
    const row = `#jobs tr[data-id="${longJob}"]`;
    await page.waitForSelector(row);
    const first = await page.getAttribute(row, 'data-state');
    assert.ok(['queued', 'running'].includes(first), `first state ${first}`);
    await page.waitForSelector(`${row}[data-state="running"]`);
    await page.waitForSelector(`#slots tr[data-job="${longJob}"]`);
    assert.match(await page.textContent('#pools tr[data-pool="ci"] td:nth-child(4)'), /^1 \/ \d+$/);
    if (process.env.SBX_WEB_SCREENSHOT) { await page.screenshot({ path: process.env.SBX_WEB_SCREENSHOT, fullPage: true }); }
    assert.equal(await page.textContent(`${row} td.cmd`), 'sleep 4000');
    await page.waitForSelector(`${row}[data-state="finished"]`);
    assert.equal(await page.getAttribute(row, 'data-exit'), '0');
    assert.equal(await page.textContent(`${row} td.exit`), '0');
    await page.waitForSelector(`#slots tr[data-job="${longJob}"]`, { state: 'detached' });

    const failed = await submit(['exit', '3']);
    await page.waitForSelector(`#jobs tr[data-id="${failed}"][data-state="finished"][data-exit="3"]`);
    assert.equal(await page.getAttribute(`#jobs tr[data-id="${failed}"] td.exit`, 'class'), 'exit exit-bad');

    // a command is text, never markup
    const markup = '<img src=x onerror=alert(1)>';
    const text = await submit(['echo', markup]);
    await page.waitForSelector(`#jobs tr[data-id="${text}"][data-state="finished"]`);
    assert.equal(await page.textContent(`#jobs tr[data-id="${text}"] td.cmd`), `echo ${markup}`);
    assert.equal(await page.locator('#jobs img').count(), 0);

    assert.equal(await page.isHidden('#error'), true);
    assert.deepEqual(problems, []);

    // logging out ends the page's session (not the other one)
    const pageSession = `sbx_session=${cookies[0].value}`;
    assert.equal((await fetch(`${base}/v1/queue`, { headers: { Cookie: pageSession } })).status, 200);
    await Promise.all([page.waitForURL(`${base}/`), page.click('header form button')]);
    await page.waitForSelector('#token');
    assert.equal((await fetch(`${base}/v1/queue`, { headers: { Cookie: pageSession } })).status, 401);
    assert.equal((await fetch(`${base}/v1/queue`, { headers: { Cookie: session } })).status, 200);
    console.log('web_status_page: 1 passed, 0 failed');
}

let rc = 0;
try {
    await main();
} catch (e) {
    console.error(`web_status_page: ${e.stack || e}`);
    if (problemsSeen.length) { console.error(`--- browser ---\n${problemsSeen.join('\n')}`); }
    console.error(`--- sbx serve log ---\n${serveLog}`);
    rc = 1;
} finally {
    if (browser) { await browser.close(); }
    if (serve && serve.exitCode === null) {
        const done = new Promise(res => serve.on('exit', (code, sig) => res({ code, sig })));
        serve.kill('SIGTERM');
        const { code } = await done;
        if (code !== 0 && rc === 0) {
            console.error(`web_status_page: sbx serve exited ${code} after SIGTERM\n${serveLog}`);
            rc = 1;
        }
    }
    rmSync(dir, { recursive: true, force: true });
}
process.exit(rc);
