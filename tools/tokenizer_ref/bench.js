#!/usr/bin/env node
// Times Hugging Face `tokenizers` (Node binding, one thread) encoding the benchmark text that
// bench/tokenizer/tokenizer_bench.cc builds: the corpus's text lines, each followed by "\n",
// repeated in order until the text reaches 1,000,000 bytes.
// Usage: node bench.js NPM_DIR TOKENIZER_JSON CORPUS_JSONL [REPEATS]
'use strict';
const fs = require('fs');
const path = require('path');

function BuildBenchText(corpusPath) {
  const lines = fs.readFileSync(corpusPath, 'utf8').split('\n').filter((line) => line.length > 0)
    .map((line) => JSON.parse(line)).filter((value) => typeof value === 'string');
  const parts = [];
  let bytes = 0;
  for (let i = 0; bytes < 1000000; ++i) {
    const line = lines[i % lines.length] + '\n';
    parts.push(line);
    bytes += Buffer.byteLength(line);
  }
  return { text: parts.join(''), bytes };
}

async function main() {
  const [npmDir, tokenizerJson, corpusPath, repeatsArg] = process.argv.slice(2);
  if (!corpusPath) {
    console.error('usage: node bench.js NPM_DIR TOKENIZER_JSON CORPUS_JSONL [REPEATS]');
    process.exit(2);
  }
  const repeats = Number(repeatsArg || 5);
  const { Tokenizer } = require(path.join(path.resolve(npmDir), 'node_modules', 'tokenizers'));
  const tokenizer = Tokenizer.fromFile(tokenizerJson);
  const { text, bytes } = BuildBenchText(corpusPath);
  let best = Infinity;
  let tokens = 0;
  for (let i = 0; i < repeats; ++i) {
    const start = process.hrtime.bigint();
    const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    tokens = encoding.getIds().length;
    best = Math.min(best, seconds);
  }
  console.log(`hf_tokenizers bytes=${bytes} tokens=${tokens} best_of_${repeats}_s=${best.toFixed(4)} ` +
              `MB/s=${(bytes / best / 1e6).toFixed(2)} Mtok/s=${(tokens / best / 1e6).toFixed(3)}`);
}

main().catch((error) => {
  console.error(`bench.js: ${error.stack || error}`);
  process.exit(1);
});
