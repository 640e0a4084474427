#!/usr/bin/env node
// Reference chat-template renderer: renders conversations with a tokenizer_config.json's Jinja
// chat_template using @huggingface/jinja (the engine transformers.js uses), one JSON string per
// conversation.
// Usage: node render_chat.js NPM_DIR TOKENIZER_CONFIG_JSON CASES_JSON OUT_JSONL
// CASES_JSON: [{"messages": [{"role": ..., "content": ...}], "add_generation_prompt": bool}, ...]
'use strict';
const fs = require('fs');
const path = require('path');

function TokenText(value) {
  if (value === null || value === undefined) return '';
  return typeof value === 'string' ? value : value.content;
}

function main() {
  const [npmDir, configPath, casesPath, outPath] = process.argv.slice(2);
  if (!outPath) {
    console.error('usage: node render_chat.js NPM_DIR TOKENIZER_CONFIG_JSON CASES_JSON OUT_JSONL');
    process.exit(2);
  }
  const { Template } = require(path.join(path.resolve(npmDir), 'node_modules', '@huggingface', 'jinja'));
  const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  const template = new Template(config.chat_template);
  const cases = JSON.parse(fs.readFileSync(casesPath, 'utf8'));
  const out = cases.map((c) => JSON.stringify(template.render({
    messages: c.messages,
    add_generation_prompt: c.add_generation_prompt,
    bos_token: TokenText(config.bos_token),
    eos_token: TokenText(config.eos_token),
  })));
  fs.writeFileSync(outPath, out.join('\n') + '\n');
}

main();
