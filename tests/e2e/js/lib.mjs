// Shared helpers of the serving e2e tests (tests/e2e/js/*.test.mjs): start `deepinfer serve` on
// loopback (--port 0; the port is read from its "listening on http://HOST:PORT/v1" line), wait for
// /health, read /metrics, stream SSE with plain fetch, and load npm packages from tests/js.
// Nothing here skips: a missing package or a server that does not come up is a failure.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import assert from 'node:assert/strict';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../..');
export const dataDir = path.join(repoRoot, 'tests/data');

/// require() rooted at tests/js (its node_modules hold the pinned client packages).
const jsRequire = createRequire(path.join(repoRoot, 'tests/js/package.json'));
export function requirePackage(name) {
  try {
    return jsRequire(name);
  } catch (e) {
    console.error(`FAIL: cannot load the npm package '${name}' from tests/js (${e.message}).\n` +
                  `Install the test packages: npm ci --prefix tests/js`);
    process.exit(1);
  }
}

export function args() {
  const a = { bin: process.env.DI_CLI || path.join(repoRoot, 'build/tools/deepinfer/deepinfer') };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--bin') a.bin = argv[++i];
  }
  return a;
}

/// Starts `deepinfer serve MODEL_DIR --port 0 ...extra`; resolves when /health answers 200.
export async function startServer(bin, modelDir, extra = [], opts = {}) {
  return startListening(bin, ['serve', modelDir, '--host', '127.0.0.1', '--port', '0',
                              ...(extra.includes('--threads') ? [] : ['--threads', '2']), ...extra], opts);
}

/// Starts `deepinfer route --replica URL ... --port 0 ...extra` in front of `replicas` (started servers).
export async function startRouter(bin, replicas, extra = [], opts = {}) {
  return startListening(bin, ['route', '--host', '127.0.0.1', '--port', '0',
                              ...replicas.flatMap((r) => ['--replica', r.base]), ...extra], opts);
}

/// Runs `bin argv...` until it prints "listening on http://HOST:PORT/v1" and /health answers 200.
async function startListening(bin, argv, { timeoutMs = 30000 } = {}) {
  const proc = spawn(bin, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  proc.stderr.on('data', (d) => { err += d; if (err.length > 200000) err = err.slice(-100000); });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${argv[0]} did not report its port in ${timeoutMs} ms\n${err}`)), timeoutMs);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /listening on http:\/\/[^:]+:(\d+)\/v1/.exec(out);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`${argv[0]} exited (${code}) before listening\n${err}`)); });
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const r = await fetch(`${base}/health`);
      if (r.status === 200) break;
    } catch { /* not up yet */ }
    if (Date.now() > deadline) throw new Error(`/health not ready in ${timeoutMs} ms\n${err}`);
    await sleep(50);
  }
  const srv = {
    proc, port, base, v1: `${base}/v1`, stderr: () => err,
    exited: false,
    async stop() {
      if (srv.exited) return;
      const done = new Promise((r) => proc.once('exit', (code, sig) => r({ code, sig })));
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 10000);
      const res = await done;
      clearTimeout(t);
      srv.exited = true;
      return res;
    },
  };
  proc.on('exit', () => { srv.exited = true; });
  return srv;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/// /metrics as {name: value} for unlabelled-but-model samples, plus `raw` and `get(name, labelSubstr)`.
export async function metrics(base) {
  const r = await fetch(`${base}/metrics`);
  assert.equal(r.status, 200);
  const text = await r.text();
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line);
    if (m) samples.push({ name: m[1], labels: m[2] || '', value: Number(m[3]) });
  }
  return {
    raw: text,
    samples,
    /// Sum of the samples named `name` whose label text contains every string of `has`.
    get(name, ...has) {
      let v = 0, found = false;
      for (const s of samples) {
        if (s.name === name && has.every((h) => s.labels.includes(h))) { v += s.value; found = true; }
      }
      return found ? v : undefined;
    },
  };
}

/// Waits until pred(metrics) holds (the engine frees state at its next step boundary).
export async function waitMetrics(base, pred, what, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  let m;
  for (;;) {
    m = await metrics(base);
    if (pred(m)) return m;
    if (Date.now() > deadline) assert.fail(`metrics: ${what} not reached in ${timeoutMs} ms\n${m.raw}`);
    await sleep(20);
  }
}

export async function postJson(base, route, body, { raw = false } = {}) {
  const r = await fetch(`${base}${route}`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: raw ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, json, text };
}

/// Streams an SSE completion with fetch; returns {events (parsed data objects), done, ttft, itl[]}.
export async function streamSse(url, body, { signal, onEvent } = {}) {
  const t0 = performance.now();
  const r = await fetch(url, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal,
  });
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
  const events = [];
  let done = false, buf = '', ttft, last;
  const itl = [];
  const dec = new TextDecoder();
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of block.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const ev = JSON.parse(data);
        const now = performance.now();
        const hasTok = (ev.choices || []).some((c) => (c.text && c.text.length) || (c.token_ids && c.token_ids.length) ||
                                                     (c.delta && (c.delta.content || c.delta.reasoning_content)));
        if (hasTok) {
          if (ttft === undefined) ttft = now - t0; else itl.push(now - last);
          last = now;
        }
        events.push(ev);
        if (onEvent) onEvent(ev);
      }
    }
  }
  return { events, done, ttft, itl, total: performance.now() - t0 };
}

/// Tiny test runner: named async checks, run in order; any failure fails the process (exit 1).
export async function runChecks(title, checks, cleanup) {
  let failed = 0;
  const t0 = Date.now();
  for (const [name, fn] of checks) {
    const t = Date.now();
    try {
      await fn();
      console.log(`ok    ${name} (${Date.now() - t} ms)`);
    } catch (e) {
      ++failed;
      console.log(`FAIL  ${name}: ${e && e.stack ? e.stack : e}`);
    }
  }
  if (cleanup) await cleanup();
  console.log(`${title}: ${checks.length - failed}/${checks.length} passed in ${Date.now() - t0} ms`);
  process.exit(failed ? 1 : 0);
}
