// Times llama.cpp (through the node-llama-cpp npm package's prebuilt CPU build) the way
// `mlarun bench` times mlarun: for each depth, an untimed context of `depth` tokens, then a timed
// prefill of `prompt` tokens and `decode` timed one-token steps; medians of `repeats`.
// Prints one JSON object per depth. Token ids are fixed pseudo-random ones (the GGUF's vocabulary
// is a stand-in, see gguf_from_safetensors.py).
// Usage: node llamacpp_bench.mjs MODEL.gguf [--depth 0,4096] [-p 512] [-n 64] [-t 2]
//        [--repeats 3] [--flash-attn on|off] [--cache-type f16|bf16|q8_0]
//    or: node llamacpp_bench.mjs MODEL.gguf --greedy 1,2,3 [-n 16]   (prints the greedy tokens)
//    or: node llamacpp_bench.mjs MODEL.gguf --logits 1,2,3 [--cache-type f32]
//        (prints the raw logits after each of the ids, [n_ids][n_vocab], as one JSON object)
import {getLlama} from "node-llama-cpp";

function parseArgs(argv) {
  const opts = {model: argv[0], depths: [0, 4096], prompt: 512, decode: 64, threads: 2,
                repeats: 3, flashAttn: true, cacheType: "f16", greedy: null,
                logits: null};
  for (let i = 1; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === "--depth") opts.depths = value.split(",").map(Number);
    else if (flag === "-p") opts.prompt = Number(value);
    else if (flag === "-n") opts.decode = Number(value);
    else if (flag === "-t") opts.threads = Number(value);
    else if (flag === "--repeats") opts.repeats = Number(value);
    else if (flag === "--flash-attn") opts.flashAttn = value === "on";
    else if (flag === "--cache-type") opts.cacheType = value;
    else if (flag === "--greedy") opts.greedy = value.split(",").map(Number);
    else if (flag === "--logits") opts.logits = value.split(",").map(Number);
    else throw new Error(`unknown flag ${flag}`);
  }
  if (!opts.model) throw new Error("usage: node llamacpp_bench.mjs MODEL.gguf [flags]");
  return opts;
}

// A 32-bit LCG over ids 256..99,999 (the bench models have 102,400).
function tokenIds(count, seed) {
  const ids = [];
  let state = seed >>> 0;
  for (let i = 0; i < count; ++i) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    ids.push(256 + (state % 99744));
  }
  return ids;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const opts = parseArgs(process.argv.slice(2));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath: opts.model, gpuLayers: 0, useMmap: true});
const maxDepth = opts.logits ? opts.logits.length : Math.max(...opts.depths);
const context = await model.createContext({
  contextSize: maxDepth + opts.prompt + opts.decode + 64, batchSize: opts.prompt, sequences: 1,
  threads: {ideal: opts.threads, min: opts.threads}, flashAttention: opts.flashAttn,
  experimentalKvCacheKeyType: opts.cacheType.toUpperCase(),
  experimentalKvCacheValueType: opts.cacheType.toUpperCase(),
});
const sequence = context.getSequence();

async function greedyTokens(prompt, count) {
  const out = [];
  for await (const token of sequence.evaluate(prompt, {temperature: 0})) {
    out.push(token);
    if (out.length >= count) break;
  }
  return out;
}

async function printAndExit(object) {  // exit only once a long line has reached the pipe
  await new Promise((resolve) => process.stdout.write(JSON.stringify(object) + "\n", resolve));
  process.exit(0);
}

if (opts.logits) {
  const outputs = await sequence.controlledEvaluate(
      opts.logits.map((token) => [token, {generateNext: {logits: true}}]));
  const rows = outputs.map((output) => {
    const row = new Array(output.next.logits.size).fill(NaN);
    for (const [token, logit] of output.next.logits) row[token] = logit;
    return row;
  });
  await printAndExit({logits: rows});
}
if (opts.greedy) {
  await printAndExit({greedy_tokens: await greedyTokens(opts.greedy, opts.decode)});
}
// Warm-up (untimed): maps the weights in and starts the threads.
await greedyTokens(tokenIds(opts.prompt, 5), 4);
for (const depth of opts.depths) {
  const prefill = [];
  const decode = [];
  for (let r = 0; r < opts.repeats; ++r) {
    await sequence.clearHistory();
    if (depth > 0) await sequence.evaluateWithoutGeneratingNewTokens(tokenIds(depth, 7 + r));
    const prompt = tokenIds(opts.prompt, 1000 + r);
    let t0 = performance.now();
    await sequence.evaluateWithoutGeneratingNewTokens(prompt);
    prefill.push(opts.prompt / ((performance.now() - t0) / 1000));
    // Each decode step is one forward pass of one token. Fed fixed ids, not sampled ones:
    // node-llama-cpp's sampler would add ~5 ms a token over this vocabulary (measured with
    // `performanceTracking`: llama.cpp's own eval time matches this loop's, not the sampling one's).
    const steps = tokenIds(opts.decode, 99 + r);
    t0 = performance.now();
    for (const token of steps) await sequence.evaluateWithoutGeneratingNewTokens([token]);
    decode.push(opts.decode / ((performance.now() - t0) / 1000));
  }
  console.log(JSON.stringify({
    engine: "llama.cpp (node-llama-cpp prebuilt CPU)", model: opts.model, threads: opts.threads,
    depth, flash_attn: opts.flashAttn, cache_type: opts.cacheType,
    prefill_tokens: opts.prompt, prefill_tok_s: median(prefill),
    decode_tokens: opts.decode, decode_tok_s: median(decode),
    prefill_runs: prefill.map((x) => +x.toFixed(1)), decode_runs: decode.map((x) => +x.toFixed(2)),
  }));
}
await context.dispose();
await model.dispose();
