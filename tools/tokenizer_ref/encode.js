#!/usr/bin/env node
// Reference encoder: encodes every corpus line with Hugging Face `tokenizers` (the Rust library's
// Node binding) and writes one JSON array of ids per line.
// Usage: node encode.js NPM_DIR TOKENIZER_JSON CORPUS_JSONL OUT_JSONL
// A corpus line is a JSON string, or {"base64": ...} for raw bytes; raw bytes reach the tokenizer
// as a JavaScript string, so ill-formed UTF-8 arrives as U+FFFD (Buffer#toString('utf8')).
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [npmDir, tokenizerJson, corpusPath, outPath] = process.argv.slice(2);
  if (!outPath) {
    console.error('usage: node encode.js NPM_DIR TOKENIZER_JSON CORPUS_JSONL OUT_JSONL');
    process.exit(2);
  }
  const { Tokenizer } = require(path.join(path.resolve(npmDir), 'node_modules', 'tokenizers'));
  const tokenizer = Tokenizer.fromFile(tokenizerJson);
  const lines = fs.readFileSync(corpusPath, 'utf8').split('\n').filter((line) => line.length > 0);
  const out = [];
  for (const line of lines) {
    const value = JSON.parse(line);
    const text = typeof value === 'string' ? value : Buffer.from(value.base64, 'base64').toString('utf8');
    const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
    out.push(JSON.stringify(Array.from(encoding.getIds())));
  }
  fs.writeFileSync(outPath, out.join('\n') + '\n');
  console.error(`encode.js: ${lines.length} lines -> ${outPath}`);
}

main().catch((error) => {
  console.error(`encode.js: ${error.stack || error}`);
  process.exit(1);
});
