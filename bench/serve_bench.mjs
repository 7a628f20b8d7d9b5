// Serving benchmark: starts `deepinfer serve MODEL` (or uses --url), then at each concurrency runs
// closed-loop clients streaming /v1/completions over plain fetch + SSE (greedy, ignore_eos, fixed
// prompt and output lengths) and reports throughput (req/s, output tok/s) and TTFT / ITL
// percentiles. Writes JSON with the machine and the command.
//
//   node bench/serve_bench.mjs --bin build/tools/deepinfer/deepinfer --model tests/data/tiny-v4-b \
//     [--concurrency 1,4,16,64] [--requests-per-client 4] [--prompt-tokens 128] [--output-tokens 64] \
//     [--threads 0] [--out bench/results/serve-cpu-tiny-v4-b.json]
import os from 'node:os';
import { writeFileSync, readFileSync } from 'node:fs';
import { startServer, streamSse } from '../tests/e2e/js/lib.mjs';

const opt = { bin: 'build/tools/deepinfer/deepinfer', model: 'tests/data/tiny-v4-b', concurrency: '1,4,16,64',
              'requests-per-client': '4', 'prompt-tokens': '128', 'output-tokens': '64', threads: '0', out: '', url: '' };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) opt[argv[i].replace(/^--/, '')] = argv[i + 1];

const pct = (xs, p) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};
const stats = (xs) => ({ p50: pct(xs, 50), p90: pct(xs, 90), p99: pct(xs, 99), mean: xs.reduce((a, b) => a + b, 0) / xs.length });

let srv;
let base = opt.url;
if (!base) {
  srv = await startServer(opt.bin, opt.model, ['--threads', opt.threads, '--prefix-cache-mib', '0', '--http-threads', '256']);
  base = srv.base;
}
const P = Number(opt['prompt-tokens']), O = Number(opt['output-tokens']), R = Number(opt['requests-per-client']);
let seq = 0;
// Distinct prompts (no prefix sharing: the prefix cache is off anyway).
const prompt = () => { const k = seq++; return Array.from({ length: P }, (_, i) => 3 + ((i * 131 + k * 977) % 1000)); };
const one = async () => {
  const r = await streamSse(`${base}/v1/completions`, { prompt: prompt(), max_tokens: O, temperature: 0, ignore_eos: true,
    return_token_ids: true, stream: true });
  let n = 0;
  for (const ev of r.events) for (const c of ev.choices) n += c.token_ids ? c.token_ids.length : 0;
  if (n !== O || !r.done) throw new Error(`request got ${n} tokens of ${O}`);
  return r;
};
await one(); // warm-up
const results = [];
for (const c of opt.concurrency.split(',').map(Number)) {
  const ttft = [], itl = [], e2e = [];
  const t0 = performance.now();
  await Promise.all(Array.from({ length: c }, async () => {
    for (let k = 0; k < R; ++k) {
      const r = await one();
      ttft.push(r.ttft); itl.push(...r.itl); e2e.push(r.total);
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  const n = c * R;
  const row = { concurrency: c, requests: n, wall_s: wall, req_per_s: n / wall, output_tok_per_s: (n * O) / wall,
                ttft_ms: stats(ttft), itl_ms: stats(itl), e2e_ms: stats(e2e) };
  results.push(row);
  console.log(`c=${String(c).padStart(3)}  ${row.req_per_s.toFixed(2)} req/s  ${row.output_tok_per_s.toFixed(0)} tok/s  ` +
              `TTFT p50/p90/p99 ${row.ttft_ms.p50.toFixed(1)}/${row.ttft_ms.p90.toFixed(1)}/${row.ttft_ms.p99.toFixed(1)} ms  ` +
              `ITL p50/p90/p99 ${row.itl_ms.p50.toFixed(2)}/${row.itl_ms.p90.toFixed(2)}/${row.itl_ms.p99.toFixed(2)} ms`);
}
if (srv) await srv.stop();
let cpu = os.cpus()[0]?.model ?? 'unknown';
try { cpu = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))[1]; } catch { /* not linux */ }
const out = {
  benchmark: 'serve_bench', backend: 'cpu', model: opt.model,
  command: `node bench/serve_bench.mjs ${argv.join(' ')}`.trim(),
  server: srv ? `deepinfer serve ${opt.model} --threads ${opt.threads} --prefix-cache-mib 0 --http-threads 256` : opt.url,
  machine: { cpu, logical_cpus: os.cpus().length, memory_gib: +(os.totalmem() / 2 ** 30).toFixed(1), os: `${os.type()} ${os.release()}`, node: process.version },
  date: new Date().toISOString(),
  workload: { prompt_tokens: P, output_tokens: O, requests_per_client: R, sampling: 'greedy, ignore_eos, stream', client: 'fetch + SSE, closed loop' },
  results,
};
if (opt.out) writeFileSync(opt.out, JSON.stringify(out, null, 2) + '\n');
