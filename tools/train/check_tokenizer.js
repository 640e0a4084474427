// Reference side of the tokenizer check: encodes and decodes texts with Hugging Face's own
// `tokenizers` (Node bindings) and renders chat templates with @huggingface/jinja.
//
// usage: node check_tokenizer.js NPM_DIR MODEL_DIR CASES.json OUT.json
//   CASES.json: {"texts": [string...], "chats": [{"messages": [...], "add_generation_prompt": bool}...]}
//   OUT.json:   {"ids": [[int...]...], "decoded": [string...], "chats": [string...]}
// Encoding uses addSpecialTokens=false (the tokenizer has no post-processor anyway); special
// tokens written in the text are still matched as added tokens, as in HF.
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [npmDir, modelDir, casesPath, outPath] = process.argv.slice(2);
  if (!outPath) {
    console.error('usage: node check_tokenizer.js NPM_DIR MODEL_DIR CASES.json OUT.json');
    process.exit(2);
  }
  const modules = path.resolve(npmDir, 'node_modules');
  const { Tokenizer } = require(path.join(modules, 'tokenizers'));
  const { Template } = require(path.join(modules, '@huggingface', 'jinja'));
  const tokenizer = Tokenizer.fromFile(path.join(modelDir, 'tokenizer.json'));
  const config = JSON.parse(fs.readFileSync(path.join(modelDir, 'tokenizer_config.json'), 'utf8'));
  const cases = JSON.parse(fs.readFileSync(casesPath, 'utf8'));
  const out = { ids: [], decoded: [], chats: [] };
  for (const text of cases.texts) {
    const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
    const ids = encoding.getIds();
    out.ids.push(ids);
    out.decoded.push(await tokenizer.decode(ids, false));
  }
  const template = new Template(config.chat_template);
  for (const chat of cases.chats || []) {
    out.chats.push(template.render({
      messages: chat.messages,
      add_generation_prompt: chat.add_generation_prompt,
      bos_token: config.bos_token,
      eos_token: config.eos_token,
    }));
  }
  fs.writeFileSync(outPath, JSON.stringify(out));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
