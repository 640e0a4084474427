// End-to-end tests of `mlarun serve` through the official `openai` npm client and raw HTTP.
// Usage: node server_test.cjs --base http://127.0.0.1:PORT --phase main|restart|corrupt
//                              --state FILE [--out RESULTS.json]
// Phases: `main` (API, streaming, errors, batching invariance, prefix cache, load test with
// cancellations), `restart` (the disk prefix cache after a restart), `corrupt` (a damaged cache
// file is skipped and the answer is still right). Prints "N passed, N failed"; exit 1 on failure.
'use strict';
const path = require('path');
const fs = require('fs');
const http = require('http');
const OpenAI = require(path.join(process.env.MLARUN_NPM_DIR, 'node_modules', 'openai'));

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];
const base = args.base;
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const state = fs.existsSync(args.state) ? JSON.parse(fs.readFileSync(args.state, 'utf8')) : {};

let passed = 0;
let failed = 0;
const results = {};
function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
}
async function test(name, fn) {
  const start = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok   ${name} (${Date.now() - start} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

function rng(seed) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 4294967296);
}
function ids(seed, n) {
  const r = rng(seed);
  return Array.from({ length: n }, () => Math.floor(r() * 500));
}

// Raw HTTP request; resolves {status, body (parsed JSON when possible), text}.
function raw(method, route, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const url = new URL(base + route);
    // A fresh connection per request (`agent: false`): Node 20's pooled keep-alive sockets race
    // with httplib closing a connection after its 5th request.
    const req = http.request({ method, hostname: url.hostname, port: url.port, path: url.pathname,
                               agent: false, headers: { 'Content-Type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        let parsed = null;
        try { parsed = JSON.parse(text); } catch (_) {}
        resolve({ status: res.statusCode, body: parsed, text });
      });
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

async function health() {
  return (await raw('GET', '/health')).body;
}
async function waitIdle() {
  for (let i = 0; i < 200; i++) {
    const h = await health();
    if (h.running === 0 && h.waiting === 0 && h.kv_blocks_used === 0) return h;
    await new Promise((r) => setTimeout(r, 50));
  }
  return health();
}

function isOpenAiError(r, status, param) {
  return r.status === status && r.body && r.body.error && typeof r.body.error.message === 'string' &&
         r.body.error.message.length > 0 && 'type' in r.body.error && 'param' in r.body.error &&
         'code' in r.body.error && (param === undefined || r.body.error.param === param);
}

// Streams a completion; returns {text, ttftMs, usage, finish, tokenIds}.
async function streamCompletion(params, { abortAfterChunks } = {}) {
  const controller = new AbortController();
  const start = performance.now();
  const stream = await client.completions.create({ ...params, stream: true,
                                                   stream_options: { include_usage: true } },
                                                 { signal: controller.signal });
  let text = '';
  let ttftMs = null;
  let usage = null;
  let finish = null;
  let chunks = 0;
  const tokenIds = [];
  try {
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        if (ttftMs === null) ttftMs = performance.now() - start;
        text += c.text;
        if (c.token_ids) tokenIds.push(...c.token_ids);
        if (c.finish_reason) finish = c.finish_reason;
      }
      if (abortAfterChunks !== undefined && ++chunks >= abortAfterChunks) {
        controller.abort();
        return { aborted: true };
      }
    }
  } catch (e) {
    if (controller.signal.aborted) return { aborted: true };
    throw e;
  }
  return { text, ttftMs, usage, finish, tokenIds };
}

async function prefixPhase(label) {
  // A 1,000-token prefix (token ids, so the length is exact) and two different endings.
  const prefix = ids(4242, 1000);
  const first = await streamCompletion({ model: 'm', prompt: prefix.concat([11, 12]), max_tokens: 4,
                                         temperature: 0 });
  const second = await streamCompletion({ model: 'm', prompt: prefix.concat([13, 14]), max_tokens: 4,
                                          temperature: 0 });
  results[label] = { first_ttft_ms: first.ttftMs, first_cached: first.usage.prompt_tokens_details.cached_tokens,
                     second_ttft_ms: second.ttftMs, second_cached: second.usage.prompt_tokens_details.cached_tokens };
  return { first, second };
}

async function main() {
  if (args.phase === 'main') {
    await test('the start-up warm-up leaves no trace: no requests, tokens or KV blocks counted', async () => {
      const m = (await raw('GET', '/metrics')).text;
      for (const name of ['mlarun_requests_total', 'mlarun_prompt_tokens_total', 'mlarun_completion_tokens_total',
                          'mlarun_kv_blocks_used']) {
        check(new RegExp('^' + name + ' 0$', 'm').test(m), name + ' is not 0');
      }
    });

    await test('GET /v1/models lists the served model', async () => {
      const list = await client.models.list();
      check(list.data.length === 1 && list.data[0].id === 'tiny', JSON.stringify(list.data));
    });

    let greedy = null;
    await test('completions: non-streaming greedy, usage and finish_reason length', async () => {
      greedy = await client.completions.create({ model: 'tiny', prompt: 'And the LORD spake unto Moses',
                                                 max_tokens: 24, temperature: 0, ignore_eos: true });
      check(greedy.object === 'text_completion', greedy.object);
      check(greedy.choices[0].finish_reason === 'length', greedy.choices[0].finish_reason);
      check(greedy.usage.completion_tokens === 24, JSON.stringify(greedy.usage));
      check(greedy.usage.prompt_tokens > 3 && greedy.usage.total_tokens === greedy.usage.prompt_tokens + 24,
            JSON.stringify(greedy.usage));
      check(typeof greedy.choices[0].text === 'string' && greedy.choices[0].text.length > 0, 'text');
    });

    await test('completions: streaming gives the same text, then usage', async () => {
      const s = await streamCompletion({ model: 'tiny', prompt: 'And the LORD spake unto Moses',
                                         max_tokens: 24, temperature: 0, ignore_eos: true });
      check(s.text === greedy.choices[0].text, JSON.stringify([s.text, greedy.choices[0].text]));
      check(s.finish === 'length', s.finish);
      check(s.usage.completion_tokens === 24, JSON.stringify(s.usage));
    });

    await test('completions: stop string is cut from the output, finish_reason stop', async () => {
      const full = greedy.choices[0].text;
      const stop = full.slice(6, 8);
      const expected = full.slice(0, full.indexOf(stop));
      const r = await client.completions.create({ model: 'tiny', prompt: 'And the LORD spake unto Moses',
                                                 max_tokens: 24, temperature: 0, ignore_eos: true, stop: [stop] });
      check(r.choices[0].text === expected, JSON.stringify([r.choices[0].text, expected, stop]));
      check(r.choices[0].finish_reason === 'stop', r.choices[0].finish_reason);
      const s = await streamCompletion({ model: 'tiny', prompt: 'And the LORD spake unto Moses',
                                         max_tokens: 24, temperature: 0, ignore_eos: true, stop });
      check(s.text === expected && s.finish === 'stop', JSON.stringify(s));
    });

    await test('chat: non-streaming and streaming agree; roles and usage', async () => {
      const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hello.' }];
      const r = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 16,
                                                       temperature: 0, ignore_eos: true });
      check(r.object === 'chat.completion', r.object);
      check(r.choices[0].message.role === 'assistant', 'role');
      check(r.usage.completion_tokens === 16, JSON.stringify(r.usage));
      const stream = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 16,
                                                            temperature: 0, ignore_eos: true, stream: true,
                                                            stream_options: { include_usage: true } });
      let text = '';
      let role = null;
      let finish = null;
      let usage = null;
      for await (const chunk of stream) {
        check(chunk.object === 'chat.completion.chunk', chunk.object);
        if (chunk.usage) usage = chunk.usage;
        for (const c of chunk.choices) {
          if (c.delta.role) role = c.delta.role;
          if (c.delta.content) text += c.delta.content;
          if (c.finish_reason) finish = c.finish_reason;
        }
      }
      check(role === 'assistant' && finish === 'length', JSON.stringify([role, finish]));
      check(text === r.choices[0].message.content, JSON.stringify([text, r.choices[0].message.content]));
      check(usage && usage.completion_tokens === 16, JSON.stringify(usage));
    });

    await test('logprobs: completions and chat, streaming and not', async () => {
      // Greedy: every token is its position's most likely one, so its logprob is the largest of
      // its top_logprobs and the streamed entries carry the same numbers.
      const r = await client.completions.create({ model: 'tiny', prompt: 'And the LORD spake unto Moses',
                                                 max_tokens: 12, temperature: 0, ignore_eos: true, logprobs: 3 });
      const lp = r.choices[0].logprobs;
      check(lp && lp.tokens.length === 12 && lp.token_logprobs.length === 12 && lp.top_logprobs.length === 12 &&
            lp.text_offset.length === 12, JSON.stringify(lp));
      for (let i = 0; i < 12; i++) {
        const top = lp.top_logprobs[i];
        const values = Object.values(top);
        check(values.length >= 1 && values.length <= 3, JSON.stringify(top));
        check(lp.token_logprobs[i] <= 0 && lp.token_logprobs[i] === Math.max(...values) &&
              top[lp.tokens[i]] === lp.token_logprobs[i], JSON.stringify([lp.tokens[i], lp.token_logprobs[i], top]));
        check(lp.text_offset[i] === (i === 0 ? 0 : lp.text_offset[i - 1] + [...lp.tokens[i - 1]].length),
              JSON.stringify(lp.text_offset));
      }
      // Token pieces that split a character read as U+FFFD each, so only whole text must match.
      const text = r.choices[0].text;
      check(text.includes('\ufffd') || lp.tokens.join('') === text, JSON.stringify([lp.tokens, text]));
      const messages = [{ role: 'user', content: 'Say hello.' }];
      const chat = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 10, temperature: 0,
                                                          ignore_eos: true, logprobs: true, top_logprobs: 2 });
      const content = chat.choices[0].logprobs.content;
      check(content.length === 10, JSON.stringify(content));
      for (const e of content) {
        check(e.top_logprobs.length === 2 && e.top_logprobs[0].token === e.token &&
              e.top_logprobs[0].logprob === e.logprob && e.top_logprobs[1].logprob <= e.logprob &&
              Buffer.from(e.bytes).toString() === e.token, JSON.stringify(e));
      }
      const stream = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 10, temperature: 0,
                                                            ignore_eos: true, logprobs: true, top_logprobs: 2,
                                                            stream: true });
      const streamed = [];
      for await (const chunk of stream) {
        for (const c of chunk.choices) if (c.logprobs) streamed.push(...c.logprobs.content);
      }
      check(JSON.stringify(streamed) === JSON.stringify(content), JSON.stringify([streamed, content]));
      const plain = await client.completions.create({ model: 'tiny', prompt: 'x', max_tokens: 2 });
      check(plain.choices[0].logprobs === null, 'no logprobs unless asked');
    });

    await test('seeded sampling is reproducible', async () => {
      const p = { model: 'tiny', prompt: 'Speak unto the children', max_tokens: 16, temperature: 0.9,
                  top_p: 0.9, top_k: 40, seed: 7, ignore_eos: true };
      const a = await client.completions.create(p);
      const b = await client.completions.create(p);
      check(a.choices[0].text === b.choices[0].text, 'same seed, same text');
    });

    await test('batching invariance: 16 concurrent greedy requests == each alone', async () => {
      const prompts = Array.from({ length: 16 }, (_, i) => ids(900 + i, 5 + 37 * i));
      const params = (p) => ({ model: 'tiny', prompt: p, max_tokens: 16, temperature: 0, ignore_eos: true,
                               return_token_ids: true });
      // Each prompt runs once first so that both compared runs find it in the prefix cache: a hit
      // moves where the prompt's prefill starts, and the chunk after it may take the absorbed path
      // where a cold prefill takes the naive one, which agrees only to ~1e-5 (docs/server.md) and
      // can flip a near tie of the greedy argmax.
      for (const p of prompts) await client.completions.create(params(p));
      const alone = [];
      for (const p of prompts) alone.push((await client.completions.create(params(p))).choices[0]);
      const together = await Promise.all(prompts.map((p) => streamCompletion(params(p))));
      for (let i = 0; i < 16; i++) {
        check(JSON.stringify(together[i].tokenIds) === JSON.stringify(alone[i].token_ids),
              `request ${i}: ${together[i].tokenIds} vs ${alone[i].token_ids}`);
        check(together[i].text === alone[i].text, `request ${i} text`);
      }
    });

    await test('prefix cache: same 1,000-token prefix -> cached_tokens >= 960, faster first token', async () => {
      const { first, second } = await prefixPhase('memory');
      check(first.usage.prompt_tokens_details.cached_tokens === 0, JSON.stringify(first.usage));
      check(second.usage.prompt_tokens_details.cached_tokens >= 960, JSON.stringify(second.usage));
      check(second.ttftMs < first.ttftMs, `ttft ${second.ttftMs} vs ${first.ttftMs}`);
      state.cold_ttft_ms = first.ttftMs;
      state.cold_text = second.text;
    });

    await test('load: 32 concurrent streams with random cancellations; no blocks leak', async () => {
      const r = rng(77);
      const jobs = Array.from({ length: 32 }, (_, i) => {
        const cancel = r() < 0.35 ? 1 + Math.floor(r() * 6) : undefined;
        return streamCompletion({ model: 'tiny', prompt: ids(500 + i, 10 + Math.floor(r() * 200)),
                                  max_tokens: cancel === undefined ? 24 : 400, temperature: 0.8, seed: i,
                                  ignore_eos: true },
                                { abortAfterChunks: cancel }).then((x) => ({ x, cancel }));
      });
      const done = await Promise.all(jobs);
      let cancelled = 0;
      for (const { x, cancel } of done) {
        if (cancel !== undefined) {
          cancelled++;
          continue;
        }
        check(x.finish === 'length' && x.usage.completion_tokens === 24, JSON.stringify(x.usage));
      }
      check(cancelled > 0, 'some requests were cancelled');
      const h = await waitIdle();
      check(h.kv_blocks_used === 0 && h.running === 0 && h.waiting === 0, JSON.stringify(h));
      const m = (await raw('GET', '/metrics')).text;
      const serverCancelled = Number(/^mlarun_requests_cancelled_total (\S+)$/m.exec(m)[1]);
      check(serverCancelled >= 1, 'the server saw cancellations: ' + serverCancelled);
      results.load = { clients: 32, cancelled, health: h };
    });

    await test('non-streaming client that disconnects: the request is cancelled, blocks freed', async () => {
      const metric = async () => Number(/^mlarun_requests_cancelled_total (\S+)$/m.exec(
        (await raw('GET', '/metrics')).text)[1]);
      const before = await metric();
      const maxLen = (await raw('GET', '/v1/models')).body.data[0].max_model_len;
      // As long a generation as the context allows, abandoned after 150 ms.
      await new Promise((resolve) => {
        const url = new URL(base + '/v1/completions');
        const req = http.request({ method: 'POST', hostname: url.hostname, port: url.port, path: url.pathname,
                                   agent: false, headers: { 'Content-Type': 'application/json' } });
        req.on('error', () => resolve());
        req.on('response', () => resolve());
        req.end(JSON.stringify({ model: 'tiny', prompt: ids(901, 8), max_tokens: maxLen - 8, ignore_eos: true }));
        setTimeout(() => { req.destroy(); resolve(); }, 150);
      });
      const h = await waitIdle();
      check(h.kv_blocks_used === 0 && h.running === 0 && h.waiting === 0, JSON.stringify(h));
      const after = await metric();
      check(after === before + 1, `cancelled ${before} -> ${after}`);
    });

    await test('errors: OpenAI error shape for bad requests; the server keeps serving', async () => {
      const post = (route, body) => raw('POST', route, typeof body === 'string' ? body : JSON.stringify(body));
      check(isOpenAiError(await post('/v1/completions', '{"prompt": "x", '), 400), 'malformed JSON');
      check(isOpenAiError(await post('/v1/completions', '[1, 2]'), 400), 'not an object');
      check(isOpenAiError(await post('/v1/completions', { prompt: 'x', max_tokens: 'ten' }), 400, 'max_tokens'),
            'wrong type');
      check(isOpenAiError(await post('/v1/completions', { prompt: 'x', temperature: 9 }), 400, 'temperature'),
            'out of range');
      check(isOpenAiError(await post('/v1/completions', { prompt: 'x', bogus: 1 }), 400, 'bogus'), 'unknown field');
      check(isOpenAiError(await post('/v1/completions', { prompt: 'x', n: 2 }), 400, 'n'), 'n > 1');
      check(isOpenAiError(await post('/v1/completions', { prompt: 'x', logprobs: 21 }), 400, 'logprobs'),
            'logprobs > 20');
      check(isOpenAiError(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }],
                                                              top_logprobs: 2 }), 400, 'top_logprobs'),
            'top_logprobs without logprobs');
      check(isOpenAiError(await post('/v1/completions', {}), 400, 'prompt'), 'missing prompt');
      check(isOpenAiError(await post('/v1/completions', { prompt: [1, 99999] }), 400, 'prompt'), 'bad token id');
      const long = await post('/v1/completions', { prompt: 'x', max_tokens: 100000 });
      check(isOpenAiError(long, 400) && long.body.error.code === 'context_length_exceeded' &&
            /maximum context length/.test(long.body.error.message), long.text);
      check(isOpenAiError(await post('/v1/chat/completions', { messages: [] }), 400, 'messages'), 'empty messages');
      check(isOpenAiError(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 5 }] }), 400),
            'content type');
      check(isOpenAiError(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }],
                                                               stream: 'yes' }), 400, 'stream'), 'stream type');
      const big = JSON.stringify({ prompt: 'x'.repeat(1100000) });
      check(isOpenAiError(await post('/v1/completions', big), 413), 'chunked body over the cap');
      // httplib answers 413 from the Content-Length header alone and closes the connection, so a
      // client still writing the body can lose that race (EPIPE / ECONNRESET before it reads the
      // answer); such attempts are retried, and one of them must read the 413 error.
      let overCap = null;
      for (let attempt = 0; overCap === null; attempt++) {
        try {
          overCap = await raw('POST', '/v1/completions', big, { 'Content-Length': Buffer.byteLength(big) });
        } catch (e) {
          if (attempt >= 4 || !['EPIPE', 'ECONNRESET'].includes(e.code)) throw e;
        }
      }
      check(isOpenAiError(overCap, 413), 'body over the cap (Content-Length)');
      check(isOpenAiError(await raw('GET', '/v1/nothing'), 404), 'unknown route');
      let sdkError = null;
      try {
        await client.completions.create({ model: 'tiny', prompt: 'x', n: 3 });
      } catch (e) {
        sdkError = e;
      }
      check(sdkError && sdkError.status === 400 && /'n' must be 1/.test(sdkError.message), String(sdkError));
      const ok = await client.completions.create({ model: 'tiny', prompt: 'still alive', max_tokens: 2 });
      check(ok.choices.length === 1, 'serves after errors');
    });

    await test('tokenize / detokenize round trip', async () => {
      const t = await raw('POST', '/tokenize', JSON.stringify({ prompt: 'Every bed, whereon he lieth' }));
      check(t.status === 200 && t.body.count === t.body.tokens.length && t.body.count > 3, t.text);
      const d = await raw('POST', '/detokenize', JSON.stringify({ tokens: t.body.tokens.slice(1) }));
      check(d.status === 200 && d.body.prompt === 'Every bed, whereon he lieth', d.text);
    });

    await test('GET /metrics: Prometheus text with the serving counters', async () => {
      const m = await raw('GET', '/metrics');
      for (const name of ['mlarun_requests_total', 'mlarun_prompt_tokens_total', 'mlarun_completion_tokens_total',
                          'mlarun_prefill_tokens_per_second', 'mlarun_decode_tokens_per_second',
                          'mlarun_queue_length', 'mlarun_kv_blocks_used', 'mlarun_kv_blocks_free',
                          'mlarun_prefix_cache_hit_rate']) {
        check(new RegExp('^# TYPE ' + name + ' ', 'm').test(m.text) && new RegExp('^' + name + ' [0-9.e+-]+$', 'm').test(m.text),
              name);
      }
      check(/^mlarun_kv_blocks_used 0$/m.test(m.text), 'no blocks used when idle');
    });
  } else if (args.phase === 'restart') {
    await test('disk prefix cache: after a restart the prefix is served from disk', async () => {
      // The machine's speed drifts between phases: after one more warm-up request (besides the
      // server's own start-up warm-up), compare with a cold 1,000-token prefill measured now, in
      // the same process.
      await streamCompletion({ model: 'm', prompt: ids(31337, 24), max_tokens: 1, temperature: 0 });
      const cold = await streamCompletion({ model: 'm', prompt: ids(777, 1000).concat([11, 12]),
                                            max_tokens: 4, temperature: 0 });
      check(cold.usage.prompt_tokens_details.cached_tokens === 0, JSON.stringify(cold.usage));
      const { second } = await prefixPhase('after_restart');
      const first = results.after_restart;
      results.after_restart.cold_now_ttft_ms = cold.ttftMs;
      check(first.first_cached >= 960, JSON.stringify(first));
      // The times are recorded, not compared: for this tiny model reading 960 tokens' rows from
      // disk is not reliably faster than recomputing them (CI: 45.4 vs a cold 37.6 ms once, with
      // another test binary running beside the server). That the prefix came from disk is what
      // cached_tokens shows.
      check(second.text === state.cold_text, 'same answer as before the restart');
    });
  } else if (args.phase === 'corrupt') {
    await test('corrupt disk cache file: detected, skipped, answer unchanged', async () => {
      const { second } = await prefixPhase('corrupt');
      check(results.corrupt.first_cached < 960, JSON.stringify(results.corrupt));
      check(second.text === state.cold_text, 'same answer');
    });
  }
  fs.writeFileSync(args.state, JSON.stringify(state));
  if (args.out) {
    const old = fs.existsSync(args.out) ? JSON.parse(fs.readFileSync(args.out, 'utf8')) : {};
    fs.writeFileSync(args.out, JSON.stringify({ ...old, ...results }, null, 2));
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((e) => {
  console.log('FAIL harness: ' + (e && e.stack ? e.stack : e));
  console.log(`${passed} passed, ${failed + 1} failed`);
  process.exit(1);
});
