// status.js - the runner's status page (docs/operations.md, "Status page"):
// polls GET /v1/queue and GET /v1/jobs once a second and renders them. Every
// value from the API is set as text (textContent), never parsed as HTML.
'use strict';

const POLL_MS = 1000;
const JOBS = 50;

function $(id) { return document.getElementById(id); }

function dur(s) {
    if (typeof s !== 'number' || !isFinite(s) || s < 0) { return ''; }
    if (s < 10) { return s.toFixed(1) + ' s'; }
    if (s < 120) { return Math.round(s) + ' s'; }
    if (s < 7200) { return Math.floor(s / 60) + ' m ' + Math.round(s % 60) + ' s'; }
    return Math.floor(s / 3600) + ' h ' + Math.round((s % 3600) / 60) + ' m';
}

function bytes(n) {
    if (typeof n !== 'number') { return ''; }
    const g = n / 1073741824;
    return g >= 1 ? g.toFixed(1) + ' GiB' : (n / 1048576).toFixed(0) + ' MiB';
}

// CPUs and such: at most 2 decimals, no binary noise (0.3, not 0.30000000000000004)
function num(v) {
    return typeof v === 'number' ? String(Math.round(v * 100) / 100) : '';
}

function clock(t) {
    if (typeof t !== 'number') { return ''; }
    return new Date(t * 1000).toLocaleTimeString();
}

// A row of cells: each cell a string, or [string, class].
function row(cells, attrs) {
    const tr = document.createElement('tr');
    for (const c of cells) {
        const td = document.createElement('td');
        if (Array.isArray(c)) {
            td.textContent = c[0];
            if (c[1]) { td.className = c[1]; }
        } else {
            td.textContent = c;
        }
        tr.appendChild(td);
    }
    for (const [k, v] of Object.entries(attrs || {})) {
        tr.setAttribute(k, v);
    }
    return tr;
}

function fill(table, rows, cols, empty) {
    const body = $(table).tBodies[0];
    const out = rows.length ? rows : [row([empty], { class: 'empty' })];
    if (!rows.length) { out[0].firstChild.colSpan = cols; }
    body.replaceChildren(...out);
}

function renderQueue(q) {
    const pools = [], slots = [], queued = [];
    for (const p of q.pools || []) {
        const busy = (p.slots || []).filter(s => s.state === 'busy').length;
        pools.push(row([p.pool, String(p.queue_length), p.queue_length ? dur(p.oldest_wait) : '',
            busy + ' / ' + p.max_sandboxes,
            num(p.cpus_used ?? 0) + ' / ' + num(p.cpus), bytes(p.memory_used) + ' / ' + bytes(p.memory),
            p.heavy_slot, String(p.boxes)], { 'data-pool': p.pool }));
        for (const s of p.slots || []) {
            if (s.state !== 'busy') { continue; }
            slots.push(row([p.pool, String(s.index), s.job ?? '(another client)', s.task ?? '',
                s.class ?? '', num(s.cpus), dur(s.held_for)],
                { 'data-job': s.job ?? '' }));
        }
        for (const e of p.queued || []) {
            queued.push(row([p.pool, e.id, e.task, e.class, dur(e.wait)], { 'data-job': e.id }));
        }
    }
    fill('pools', pools, 8, 'no pool served');
    fill('slots', slots, 7, 'no slot held');
    fill('queued', queued, 5, 'nothing queued');
    const b = q.box || {};
    const a = q.autoscaler || {};
    const note = 'box: ' + num(b.cpus) + ' CPUs, ' + bytes(b.memory) +
        (b.draining ? ', draining' : '') + '; spend today $' + (a.spend_day ?? 0).toFixed(2) +
        ' of $' + (a.spend_day_cap ?? 0).toFixed(2);
    $('box').textContent = note;
}

function renderJobs(list, now) {
    const rows = [];
    for (const j of list.jobs || []) {
        const t = j.timings || {};
        const wait = t.granted_at ? t.granted_at - t.queued_at
            : (j.state === 'queued' ? now - t.queued_at : null);
        const run = t.ready_at ? (t.finished_at ?? now) - t.ready_at : null;
        const exit = j.exit_status === null || j.exit_status === undefined ? '' : String(j.exit_status);
        rows.push(row([j.id, j.pool, [j.state, 'state'], (j.argv || []).join(' ') + '', j.client ?? '',
            clock(t.queued_at), dur(wait), dur(run),
            [exit, exit !== '' && exit !== '0' ? 'exit exit-bad' : 'exit'], j.reason ?? ''],
            { 'data-id': j.id, 'data-state': j.state, 'data-exit': exit,
              class: 'state-' + j.state }));
        rows[rows.length - 1].children[3].className = 'cmd';
    }
    fill('jobs', rows, 10, 'no jobs yet');
}

async function get(path) {
    const res = await fetch(path, { credentials: 'same-origin', cache: 'no-store' });
    if (res.status === 401) {
        throw new Error('the session ended: reload the page to log in again');
    }
    const body = await res.json();
    if (!res.ok) { throw new Error(path + ': ' + (body.error || res.status)); }
    return body;
}

let timer = null;
let busy = false;

async function poll() {
    timer = null;
    if (busy) { return; }
    busy = true;
    try {
        const [q, list] = await Promise.all([get('/v1/queue'), get('/v1/jobs?limit=' + JOBS)]);
        renderQueue(q);
        renderJobs(list, q.now);
        $('error').hidden = true;
        $('updated').textContent = 'updated ' + clock(q.now);
        document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
    } catch (e) {
        $('error').textContent = e.message;
        $('error').hidden = false;
    }
    busy = false;
    if (!document.hidden) { timer = setTimeout(poll, POLL_MS); }
}

// no polling while the page is hidden; at once when it shows again
document.addEventListener('visibilitychange', () => {
    if (!document.hidden && timer === null) { poll(); }
});
poll();
