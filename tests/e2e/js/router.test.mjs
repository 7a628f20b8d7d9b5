// E2E: `deepinfer route` in front of two `deepinfer serve` replicas of tiny-v4-b. Requests that
// share a long system prompt go to one replica and hit its prefix cache; unrelated prompts spread
// over both; streams relay unchanged (greedy: the same text as the replica's own answer); errors
// pass through with their status; a client that hangs up mid-stream is cancelled at the replica;
// a replica that goes down is skipped (the request is answered by the other), and with none left
// the router answers 503.
import assert from 'node:assert/strict';
import path from 'node:path';
import { args, dataDir, metrics, postJson, runChecks, sleep, startRouter, startServer, streamSse, waitMetrics } from './lib.mjs';

const { bin } = args();
const model = path.join(dataDir, 'tiny-v4-b');
const replicas = await Promise.all([startServer(bin, model, ['--threads', '1']), startServer(bin, model, ['--threads', '1'])]);
const router = await startRouter(bin, replicas, ['--health-interval-ms', '100']);
const SYSTEM = 'You are a careful assistant for a long-running support desk. Answer briefly, cite the manual, ' +
               'and never invent product names. This system prompt is shared by every request of this tenant.';

async function chat(base, system, user, extra = {}) {
  const r = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'system', content: system }, { role: 'user', content: user }],
                           max_tokens: 4, temperature: 0, ignore_eos: true, ...extra }),
  });
  const json = await r.json();
  return { status: r.status, replica: r.headers.get('x-deepinfer-replica'), json };
}

const checks = [
  ['a shared system prompt: one replica, whose prefix cache then serves it', async () => {
    const first = await chat(router.base, SYSTEM, 'Where is the reset button?');
    assert.equal(first.status, 200);
    assert.ok(replicas.some((r) => r.base === first.replica), `a replica named: ${first.replica}`);
    // The replica snapshots the shared prefix while serving the second request (its engine
    // notes the prefix common with a recent prompt), so from the third on it is a cache hit.
    const qs = ['How do I update the firmware?', 'What does the red light mean?', 'Can I return it?'];
    for (let i = 0; i < qs.length; ++i) {
      const r = await chat(router.base, SYSTEM, qs[i]);
      assert.equal(r.replica, first.replica, qs[i]);
      if (i > 0) assert.ok(r.json.usage.prompt_tokens_details.cached_tokens > 0, `prefix-cache hit for "${qs[i]}"`);
    }
    const m = await metrics(router.base);
    assert.ok(m.get('deepinfer_router_cache_affinity_total') >= 3);
  }],

  ['unrelated prompts spread over both replicas', async () => {
    // Sent one at a time (no load), each goes to the replica that remembers fewer prompt chunks.
    const seen = new Set();
    for (let i = 0; i < 8; ++i) {
      const r = await chat(router.base, `Tenant ${i} has its own, entirely different system prompt number ${i * 7919}.`, 'hi');
      assert.equal(r.status, 200);
      seen.add(r.replica);
    }
    assert.equal(seen.size, 2, `both replicas used: ${[...seen]}`);
  }],

  ['a stream relays unchanged: the same greedy text as the replica answers itself', async () => {
    const body = { messages: [{ role: 'user', content: 'Count to five.' }], max_tokens: 24, temperature: 0, ignore_eos: true };
    const via = await streamSse(`${router.v1}/chat/completions`, { ...body, stream: true });
    assert.ok(via.done, 'the stream ends with [DONE]');
    const text = via.events.map((e) => e.choices?.[0]?.delta?.content ?? '').join('');
    const direct = await Promise.all(replicas.map((r) => postJson(r.v1, '/chat/completions', body)));
    assert.equal(text, direct[0].json.choices[0].message.content);
    assert.equal(text, direct[1].json.choices[0].message.content);
  }],

  ['errors pass through with their status; /v1/models and /tokenize are a replica\'s', async () => {
    const bad = await postJson(router.base, '/v1/completions', { prompt: 5 });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, 'prompt');
    const models = await (await fetch(`${router.v1}/models`)).json();
    assert.equal(models.data[0].id, 'tiny-v4-b');
    const t = await postJson(router.base, '/tokenize', { prompt: 'Hello world' });
    assert.equal(t.status, 200);
    assert.equal(t.json.count, t.json.tokens.length);
  }],

  ['--api-key guards the router\'s API routes; --replica-api-key is what the replicas get', async () => {
    const keyed = await startRouter(bin, replicas, ['--api-key', 'front', '--replica-api-key', 'ignored-by-open-replicas']);
    try {
      const body = JSON.stringify({ prompt: 'hi', max_tokens: 1 });
      const post = (auth) => fetch(`${keyed.v1}/completions`, { method: 'POST', body,
        headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) } });
      assert.equal((await post()).status, 401);
      assert.equal((await post('Bearer wrong')).status, 401);
      assert.equal((await post('Bearer front')).status, 200);
      assert.equal((await fetch(`${keyed.base}/health`)).status, 200);
    } finally {
      await keyed.stop();
    }
  }],

  ['32 concurrent streams: every one complete, both replicas used, nothing left in flight', async () => {
    const runs = await Promise.all(Array.from({ length: 32 }, (_, i) => streamSse(`${router.v1}/completions`,
      { prompt: `Request ${i}: ${'filler '.repeat(i % 5)}go.`, max_tokens: 16, ignore_eos: true, stream: true,
        stream_options: { include_usage: true } })));
    for (const r of runs) {
      assert.ok(r.done, 'ends with [DONE]');
      assert.equal(r.events.at(-1).usage.completion_tokens, 16);
    }
    const m = await waitMetrics(router.base, (x) => x.get('deepinfer_router_in_flight') === 0, 'router: nothing in flight');
    for (const r of replicas) assert.ok(m.get('deepinfer_router_requests_total', r.base) > 0, `${r.base} served some`);
  }],

  ['a client that hangs up mid-stream is cancelled at the replica', async () => {
    const ac = new AbortController();
    let n = 0;
    await assert.rejects(streamSse(`${router.v1}/completions`,
      { prompt: 'Tell a very long story about routers.', max_tokens: 20000, ignore_eos: true, stream: true },
      { signal: ac.signal, onEvent: () => { if (++n === 5) ac.abort(); } }));
    for (const r of replicas) {
      await waitMetrics(r.base, (x) => x.get('deepinfer_num_requests_running') === 0, `${r.base}: nothing running`, 8000);
    }
    await waitMetrics(router.base, (x) => x.get('deepinfer_router_in_flight') === 0, 'router: nothing in flight', 8000);
  }],

  ['a replica that goes down is skipped; with none left the router answers 503', async () => {
    const first = await chat(router.base, SYSTEM, 'Which replica has my prefix?');
    const owner = replicas.find((r) => r.base === first.replica);
    const other = replicas.find((r) => r !== owner);
    await owner.stop();
    const after = await chat(router.base, SYSTEM, 'And now?');
    assert.equal(after.status, 200);
    assert.equal(after.replica, other.base);
    await waitMetrics(router.base, (x) => x.get('deepinfer_router_replica_healthy', owner.base) === 0, 'the stopped replica marked down');
    assert.equal((await fetch(`${router.base}/health`)).status, 200);
    await other.stop();
    await sleep(300);
    const none = await chat(router.base, SYSTEM, 'Anyone?');
    assert.equal(none.status, 503);
    assert.equal((await fetch(`${router.base}/health`)).status, 503);
  }],
];

await runChecks('router', checks, async () => {
  await router.stop();
  await Promise.all(replicas.map((r) => r.stop()));
});
