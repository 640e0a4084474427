#!/usr/bin/env node
// Writes the tokenizer test corpus (tests/tokenizer/testdata/corpus.jsonl) deterministically:
// hand-written fragments per category, each on its own line, then seeded random mixtures.
// Usage: node make_corpus.js OUT.jsonl
// Format: one JSON value per line. A JSON string is a text line; {"base64": "..."} holds raw
// bytes that are not valid UTF-8 (JSON strings cannot carry them).
'use strict';
const fs = require('fs');

// mulberry32: a tiny seeded PRNG, so the corpus is the same on every machine and Node version.
function Rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rng = Rng(20240611);
const pick = (list) => list[Math.floor(rng() * list.length)];
const int = (lo, hi) => lo + Math.floor(rng() * (hi - lo + 1));

const english = [
  'The quick brown fox jumps over the lazy dog.',
  "It's a truth universally acknowledged that tokenizers hate edge cases.",
  'She said, "We\'ll meet at 10:30 a.m. on Tuesday," and then left without another word.',
  "I'M SHOUTING BECAUSE THE BUILD FAILED AGAIN!!!",
  "They're sure you've done it; he'd known all along, and we'll see what's next.",
  'Mixture-of-experts models route each token to a small subset of feed-forward networks.',
  'Multi-head latent attention compresses keys and values into a low-rank latent vector.',
  'The cache holds 576 values per token per layer instead of 32,768.',
  'Wait... what? No -- really?! (Yes, really.)',
  'e.g. i.e. etc. vs. Mr. Mrs. Dr. St. Ave.',
  'Visit https://example.com/path?query=1&lang=en#section or mail admin@example.org.',
  'A well-known state-of-the-art end-to-end pipeline, re-run twice.',
  'Rock \'n\' roll, o\'clock, fo\'c\'sle and the cat\'s pajamas.',
  'Supercalifragilisticexpialidocious is a very long word; so is pneumonoultramicroscopic.',
  'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.',
  'In 1969, Apollo 11 landed on the Moon; 384,400 km away, give or take.',
  'Temperature: -40°C equals -40°F, and 100% of people find that odd.',
  'He paid $1,234.56 for it — a 15% discount on the list price of €1,452.42.',
  'Once upon a time, in a land far, far away, there lived a very careful compiler.',
  'To be, or not to be: that is the question.',
  '#hashtag @mention &amp; <tag> [link](url) {brace} |pipe| ~tilde~ `code` ^caret^',
  'CamelCaseIdentifier snake_case_identifier kebab-case-identifier SCREAMING_CASE',
  'ALL CAPS and all lower and Title Case And MiXeD cAsE words.',
  "Don't, won't, can't, shouldn't've, y'all'd've.",
  'A sentence with a trailing space. ',
  '   A sentence with leading spaces.',
  'Newline at the end\n',
  'Tabs\tbetween\twords\tand\ttrailing\t',
  'Question? Exclamation! Interrobang‽ Ellipsis…',
  '“Curly quotes” and ‘single curly’ and «guillemets» and „German“.',
];

const chinese = [
  '深度求索是一家专注于大语言模型研究的公司。',
  '今天天气很好，我们去公园散步吧！',
  '混合专家模型把每个词元路由到少数几个前馈网络。',
  '多头潜在注意力把键和值压缩成一个低秩的潜在向量，从而大幅减少缓存。',
  '我爱北京天安门，天安门上太阳升。',
  '这是一个测试句子，包含标点符号：逗号、句号。问号？感叹号！',
  '中文和English混合的句子，还有数字123和符号%。',
  '《红楼梦》是中国古典四大名著之一。',
  '繁體中文：臺灣的資訊科技產業非常發達。',
  '龘靐齉齾爩鱻麤龗灪吁龖厵滟爨癵',
];

const japanese = [
  '日本語のテキストをトークン化します。',
  'ひらがなとカタカナと漢字がまざっています。',
  'コンピュータ・プログラミングは楽しいです！',
  '東京タワーの高さは３３３メートルです。',
  'ｶﾀｶﾅ（半角）と全角ＡＢＣ、ｱｲｳｴｵ。',
  'すもももももももものうち。',
  '「こんにちは」と彼女は言った。',
];

const korean = [
  '안녕하세요, 만나서 반갑습니다.',
  '한국어 문장을 토큰화하는 테스트입니다.',
  '대한민국의 수도는 서울입니다. 인구는 약 천만 명입니다.',
  '한글과 English가 섞인 문장 123개.',
  '자모 분리: ᄒ ᅡ ᆫ, 호환 자모: ㅎㅏㄴ',
];

const otherScripts = [
  'Привет, мир! Как дела? Ёлка, ёжик и щука.',
  'Γειά σου Κόσμε! Ωμέγα, άλφα, ΐ ΰ.',
  'สวัสดีครับ ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ',
  'नमस्ते दुनिया! हिन्दी में संयुक्ताक्षर: क्षत्रिय, द्वार, श्री।',
  'বাংলা ভাষা, தமிழ் மொழி, ગુજરાતી, ਪੰਜਾਬੀ.',
  'Tiếng Việt có dấu: Hà Nội, Sài Gòn, người, được, những.',
  'Ünïcödé çåfé naïve résumé fiancée coöperate Zoë Øresund Ærø Łódź.',
  'Decomposed: cafe\u0301, n\u0303, a\u0308, e\u0300\u0301\u0302, Z\u0335\u0321a\u0337l\u0336g\u0334o\u0338.',
  'Georgian ქართული, Armenian Հայերեն, Ethiopic ሰላም ለዓለም.',
  'Math: ∀x∈ℝ, ∃y: x² + y² ≤ 1 ⇒ |x| ≤ 1; ∑ᵢ aᵢ = ∫₀¹ f(t) dt ≈ π/4.',
  'Box ┌─┬─┐ │ │ │ └─┴─┘ arrows ← ↑ → ↓ ↔ ⇄ and dingbats ✓ ✗ ★ ☆ ♠ ♥.',
  'Superscripts x¹ x² x³, fractions ½ ¼ ¾, roman Ⅻ ⅻ, circled ① ② ③.',
  'Fullwidth: ＨＥＬＬＯ　ＷＯＲＬＤ！　１２３４５',
  'Control chars: bell\u0007 escape\u001b[0m null\u0000 end.',
  'Soft\u00adhyphen, zero\u200bwidth space, joiner\u200dhere, non\u200cjoiner.',
];

const rtl = [
  'مرحبا بالعالم! هذا نص عربي للاختبار.',
  'العربية مع أرقام ١٢٣٤٥ و 67890 في نفس الجملة.',
  'שלום עולם! זהו טקסט בעברית.',
  'Mixed: the word שלום means peace, and سلام too.',
  'فارسی: این یک آزمایش است. اردو: یہ ایک امتحان ہے۔',
  'Marks: \u200fRLM\u200f and \u200eLRM\u200e and \u202bembedding\u202c here.',
  'تشكيل: بِسْمِ ٱللَّهِ ٱلرَّحْمَٰنِ ٱلرَّحِيمِ',
];

const emoji = [
  'I love pizza 🍕 and sushi 🍣!',
  'Family: 👨‍👩‍👧‍👦 couple: 👩‍❤️‍👨 technologist: 🧑🏽‍💻',
  'Thumbs 👍 👍🏻 👍🏼 👍🏽 👍🏾 👍🏿',
  'Flags: 🇯🇵 🇺🇸 🇨🇳 🇰🇷 🇫🇷 🏳️‍🌈 🏴‍☠️',
  'Keycaps 1️⃣ 2️⃣ #️⃣ and hearts ❤️ ♥ 💔 💕',
  'Faces😀😃😄😁😆😅🤣😂🙂🙃 no spaces',
  '🙂',
  'Rocket launch 🚀🚀🚀 in 3… 2… 1…',
  'Emoji in code: print("🐍") // ✨ sparkle',
];

const code = [
  'def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n',
  'class Tokenizer:\n    """Byte-level BPE."""\n\n    def __init__(self, vocab: dict[str, int]) -> None:\n        self.vocab = vocab\n',
  'for i in range(10):\n\tif i % 2 == 0:\n\t\tprint(f"{i} is even")\n\telse:\n\t\tcontinue\n',
  'import numpy as np\nx = np.arange(12).reshape(3, 4)  # shape (3, 4)\nprint(x @ x.T)\n',
  '#include <vector>\n\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (int x : v) {\n    std::printf("%d\\n", x);\n  }\n  return 0;\n}\n',
  'template <typename T>\nconstexpr T Clamp(T v, T lo, T hi) noexcept { return v < lo ? lo : (hi < v ? hi : v); }',
  'auto it = std::find_if(xs.begin(), xs.end(), [&](const auto& x) { return x->id == id; });',
  'const add = (a, b) => a + b;\nconsole.log(`sum: ${add(2, 3)}`);\nexport default { add };\n',
  'async function main() {\n  const res = await fetch(url, { method: "POST" });\n  if (!res.ok) throw new Error(res.statusText);\n}\n',
  'SELECT id, name FROM users WHERE created_at >= \'2024-01-01\' ORDER BY id DESC LIMIT 10;',
  '{"name": "mlarun", "version": "0.1.0", "tags": ["llm", "cpu"], "nested": {"a": [1, 2.5, null, true]}}',
  '<div class="container">\n  <p id="intro">Hello &amp; welcome</p>\n  <!-- comment -->\n</div>',
  '$ cmake --preset release && cmake --build build -j2\n$ ctest --test-dir build -R Tokenizer\n',
  'fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
  'if (x != nullptr && *x >= 0x7fffffff) { y <<= 3; z ^= ~w; } else { return -1; }',
  '\\begin{equation}\n  E = mc^2 \\quad \\text{and} \\quad \\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}\n\\end{equation}',
  '# Title\n\n## Subtitle\n\n- item one\n- item two\n  1. nested\n\n> quote\n\n```python\nprint("hi")\n```\n',
  'key1=value1\r\nkey2=value2\r\n[section]\r\npath=C:\\Windows\\System32\r\n',
  '    indented four\n        indented eight\n\t\ttabbed twice\n  \t mixed tab and spaces\n',
  'a=1;b=2;c=a+b;d=c*2;e=d/3;f=e%4;g=f**5;h=g//6;i=h&7;j=i|8;',
];

const numbers = [
  '0', '7', '42', '123', '1234', '12345', '123456', '1234567', '3.14159265358979323846',
  '1,000,000', '1.000.000,50', '2024-06-11T12:34:56Z', '+1 (555) 123-4567', '192.168.0.1',
  '0x1F 0b1010 0o777 1e-9 6.02e23', 'v1.2.3-rc.4', 'ISBN 978-3-16-148410-0',
  'abc123def456ghi7890', '１２３４５６７８９０', '٠١٢٣٤٥٦٧٨٩', '۱۲۳۴۵', '०१२३४५६७८९',
  '²³¹ ⁴⁵ ₀₁₂', 'Ⅰ Ⅱ Ⅲ Ⅳ 〇 一二三', '3½ 7¾', '99.9% of 1/3 is 33.3...',
];

const whitespace = [
  ' ', '  ', '     ', '\t', '\t\t\t', '\n', '\n\n', '\n\n\n\n', '\r\n', '\r\n\r\n', '\r', ' \n ', '\t \n \t',
  'word  word   word    word', 'word\n\nword\n\n\nword', 'trailing spaces   ', 'trailing tab\t',
  'trailing newline\n', 'trailing crlf\r\n', '\n\nleading newlines', '  \t  leading mixed',
  'a \n b \n\n c', 'end with spaces and newline   \n', 'x\r\n\r\n\r\ny', ' a', '  a', '\ta', '\na',
];

const unicodeSpaces = [
  'no\u00a0break\u00a0space', 'ideographic\u3000space\u3000here', '\ufeffBOM at start',
  'BOM\ufeffin middle', 'next\u0085line', 'line\u2028separator', 'paragraph\u2029separator',
  'thin\u2009space and narrow\u202fnbsp', 'mongolian\u180evowel separator', 'en\u2002em\u2003quad\u2000',
  'ogham\u1680space', 'mixed \u00a0\u3000\t\u2009 run', '\u00a0\u00a0leading nbsp', 'trailing nbsp\u00a0\u00a0',
  'a\u0085\u0085b', 'a \u0085 b', 'x\u000by\u000cz', 'file\u001cgroup\u001drecord\u001eunit\u001f',
];

const specials = [
  '<｜begin▁of▁sentence｜>Hello',
  '<｜begin▁of▁sentence｜><｜User｜>What is 2+2?<｜Assistant｜>4<｜end▁of▁sentence｜>',
  'Text with <｜User｜> in the middle and <｜Assistant｜> too.',
  '<｜User｜><｜Assistant｜><｜User｜>',
  'Partial markers: <｜User and <｜User｜ and User｜> and <｜end▁of▁sentence',
  '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
  '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{"temp": 21}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>',
  '<｜fim▁begin｜>def f(x):\n    <｜fim▁hole｜>\n    return y<｜fim▁end｜>',
  'End of turn <|EOT|> marker and <|eot|> lowercase.',
  '  <｜User｜>  spaces around  <｜Assistant｜>  ',
  '<｜place▁holder▁no▁0｜><｜place▁holder▁no▁799｜><｜place▁holder▁no▁800｜>',
  '<｜▁pad▁｜>padding<｜▁pad▁｜>',
  '<｜<｜User｜>｜> nested-looking',
  '<|User|> ASCII bars are not the special token.',
];

// Invalid UTF-8 byte strings, each with some context. Stored as base64.
const invalidBytes = [
  [0x80],
  [0xff],
  [0xc0, 0x80],
  [0xe4, 0xb8],
  [0xf0, 0x9f, 0x98],
  [0xed, 0xa0, 0x80],
  [0xf5, 0x80, 0x80, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xe0, 0x80, 0xaf],
  [0xfe, 0xfe, 0xff, 0xff],
  [0xc3],
  [0xc3, 0x28],
  [0xe2, 0x82, 0x28],
  [0xa0, 0xa1],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
];

function Base64Line(bytes) {
  return { base64: Buffer.from(bytes).toString('base64') };
}

const singleLineGroups = [english, chinese, japanese, korean, otherScripts, rtl, emoji, code, numbers,
                          whitespace, unicodeSpaces, specials];
const lines = [];
for (const group of singleLineGroups) for (const text of group) lines.push(text);

// Digit runs of every length 1..40, plus a few very long ones.
for (let n = 1; n <= 40; ++n) {
  let digits = '';
  for (let i = 0; i < n; ++i) digits += String(int(0, 9));
  lines.push(digits);
}
lines.push('9'.repeat(1000));
lines.push('1234567890'.repeat(50) + ' end');

// Long single pieces exercise the heap merge path and the cache bypass.
lines.push('a'.repeat(300));
lines.push('ab'.repeat(400));
lines.push(' '.repeat(500) + 'x');
lines.push('\n'.repeat(200));
lines.push('中'.repeat(300));
lines.push('汉字'.repeat(150) + '。');
lines.push('！'.repeat(100));
lines.push('=-'.repeat(200));
lines.push('😀'.repeat(100));

// Seeded mixtures across categories.
const mixGroups = [english, english, chinese, japanese, korean, otherScripts, rtl, emoji, code, code,
                   numbers, whitespace, unicodeSpaces, specials];
const separators = [' ', '', '\n', '\n\n', '\t', '  ', '\r\n', '。', ', ', ' \n', '\u3000', '\u00a0'];
for (let i = 0; i < 420; ++i) {
  const count = int(2, 6);
  let text = '';
  for (let k = 0; k < count; ++k) {
    if (k > 0) text += pick(separators);
    text += pick(pick(mixGroups));
  }
  lines.push(text);
}

// Paragraph-sized lines (a few kB each).
for (let i = 0; i < 6; ++i) {
  let text = '';
  while (Buffer.byteLength(text) < 3000) text += pick(pick(mixGroups)) + pick(separators);
  lines.push(text);
}

// Invalid UTF-8: alone, inside ASCII, inside CJK, next to special tokens and at the ends.
const out = lines.map((text) => JSON.stringify(text));
const contexts = [
  ['', ''], ['abc', 'def'], ['hello ', ' world'], ['中文', '测试'], ['', ' trailing'], ['leading ', ''],
  ['<｜User｜>', '<｜Assistant｜>'], ['12', '34'], ['  ', '\n'],
];
for (let i = 0; i < invalidBytes.length; ++i) {
  for (let k = 0; k < 3; ++k) {
    const [before, after] = contexts[(i * 3 + k) % contexts.length];
    const bytes = Buffer.concat([Buffer.from(before), Buffer.from(invalidBytes[i]), Buffer.from(after)]);
    out.push(JSON.stringify(Base64Line([...bytes])));
  }
}
// Valid UTF-8 cut in the middle of a character, as a byte-level model may produce.
const cut = Buffer.from('Grüße 世界 🙂!');
for (const length of [3, 9, 10, 14, 15, 16]) out.push(JSON.stringify(Base64Line([...cut.subarray(0, length)])));

const target = process.argv[2];
if (!target) {
  console.error('usage: node make_corpus.js OUT.jsonl');
  process.exit(2);
}
fs.writeFileSync(target, out.join('\n') + '\n');
console.error(`wrote ${out.length} lines to ${target}`);
