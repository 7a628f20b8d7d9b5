// E2E SIGTERM on the real binary (`deepinfer serve tests/data/tiny-v4-b` on loopback): intake
// stops at once (new requests get 503 with an OpenAI error object while the server drains; /health
// says 503 too), an in-flight stream finishes normally ([DONE], finish_reason "length", every
// token), and the process exits 0 within the grace period. With a short --shutdown-grace a long
// request is cancelled when the grace is over (its stream ends with finish_reason "abort") and
// the process still exits 0, long before the request would have finished.
import assert from 'node:assert/strict';
import path from 'node:path';
import { args, dataDir, postJson, runChecks, sleep, startServer, streamSse } from './lib.mjs';

const { bin } = args();
const modelB = path.join(dataDir, 'tiny-v4-b');
const servers = [];

/// Resolves with {code, sig, at} when the server process exits.
function exitOf(srv) {
  return new Promise((resolve) => {
    if (srv.proc.exitCode !== null || srv.proc.signalCode !== null) {
      resolve({ code: srv.proc.exitCode, sig: srv.proc.signalCode, at: performance.now() });
      return;
    }
    srv.proc.once('exit', (code, sig) => resolve({ code, sig, at: performance.now() }));
  });
}

/// Starts a streaming completion; resolves `started` once `minTokens` token events arrived.
function startStream(srv, maxTokens, minTokens = 5) {
  let tokens = 0, finish = null, resolveStarted;
  const started = new Promise((r) => { resolveStarted = r; });
  const body = { prompt: [5, 6, 7], max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true,
                 return_token_ids: true };
  const s = { ended: false, endedAt: undefined };
  s.result = streamSse(`${srv.v1}/completions`, body, {
    onEvent: (ev) => {
      for (const c of ev.choices || []) {
        tokens += (c.token_ids || []).length;
        if (c.finish_reason) finish = c.finish_reason;
      }
      if (tokens >= minTokens) resolveStarted();
    },
  }).then((r) => ({ ...r, tokens, finish }), (e) => ({ error: e, tokens, finish }))
    .finally(() => { s.ended = true; s.endedAt = performance.now(); resolveStarted(); });
  s.started = started;
  return s;
}

async function waitDraining(srv, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await fetch(`${srv.base}/health`);
    if (r.status === 503) return;
    assert.equal(r.status, 200);
    if (Date.now() > deadline) assert.fail(`/health still 200 ${timeoutMs} ms after SIGTERM`);
    await sleep(5);
  }
}

const checks = [
  ['SIGTERM: intake stops (503), the in-flight stream finishes, exit 0 within the grace', async () => {
    const GRACE_S = 60;
    const srv = await startServer(bin, modelB, ['--shutdown-grace', String(GRACE_S), '--prefix-cache-mib', '0']);
    servers.push(srv);
    // Long enough to be in flight while the drain is checked (a few seconds on the CPU backend).
    const MAX = 4000;
    const stream = startStream(srv, MAX);
    await stream.started;
    assert.ok(!stream.ended, 'the stream is in flight');
    const exited = exitOf(srv);
    const t0 = performance.now();
    srv.proc.kill('SIGTERM');
    await waitDraining(srv);
    for (const [route, body] of [['/v1/completions', { prompt: [1, 2, 3], max_tokens: 2 }],
                                 ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }]]) {
      const r = await postJson(srv.base, route, body);
      assert.equal(r.status, 503, `${route} during the drain: ${r.status} ${r.text}`);
      assert.ok(r.json && typeof r.json.error === 'object' && r.json.error.message.length > 0, r.text);
    }
    assert.ok(!stream.ended, 'the stream was still in flight when the new requests were refused; make it longer');
    const res = await stream.result;
    assert.equal(res.error, undefined, `stream failed: ${res.error}`);
    assert.ok(res.done, 'the stream ended with [DONE]');
    assert.equal(res.finish, 'length');
    assert.equal(res.tokens, MAX);
    const ex = await exited;
    assert.deepEqual([ex.code, ex.sig], [0, null], srv.stderr().slice(-2000));
    assert.ok(ex.at >= stream.endedAt - 50, 'exited after the stream finished');
    assert.ok(ex.at - t0 < GRACE_S * 1000, `exited ${(ex.at - t0).toFixed(0)} ms after SIGTERM`);
  }],

  ['short --shutdown-grace: a long request is cancelled ("abort") and the process exits 0', async () => {
    const GRACE_S = 1;
    const srv = await startServer(bin, modelB, ['--shutdown-grace', String(GRACE_S), '--prefix-cache-mib', '0']);
    servers.push(srv);
    const MAX = 60000;  // minutes of decoding
    const stream = startStream(srv, MAX);
    await stream.started;
    const exited = exitOf(srv);
    const t0 = performance.now();
    srv.proc.kill('SIGTERM');
    const res = await stream.result;
    const ex = await exited;
    assert.deepEqual([ex.code, ex.sig], [0, null], srv.stderr().slice(-2000));
    // The grace, then cancellation (the engine stops at its next step) and the HTTP stop.
    assert.ok(ex.at - t0 < (GRACE_S + 10) * 1000, `exited ${(ex.at - t0).toFixed(0)} ms after SIGTERM`);
    assert.ok(stream.endedAt - t0 >= GRACE_S * 1000 - 50, 'the stream ran on through the grace period');
    assert.ok(res.tokens < MAX, `cancelled before the end (${res.tokens} tokens)`);
    assert.equal(res.error, undefined, `stream failed instead of ending: ${res.error}`);
    assert.equal(res.finish, 'abort');
    assert.ok(res.done, 'the cancelled stream still ended with [DONE]');
    assert.match(srv.stderr(), /grace period over/);
  }],
];

await runChecks('e2e shutdown', checks, async () => {
  for (const s of servers) await s.stop();
});
