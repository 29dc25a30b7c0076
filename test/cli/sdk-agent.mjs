// A small agent for the `cacheward run` tests: the official SDKs, configured only by the environment
// `cacheward run` sets (ANTHROPIC_BASE_URL, OPENAI_BASE_URL and, under --sim, placeholder keys).
// Usage: node sdk-agent.mjs [exit-code] | node sdk-agent.mjs --wait-for-signal
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const words = 'the agent reads files, runs tests, edits code and reports what it changed'.split(' ');
const filler = (n) => Array.from({ length: n }, (_, i) => words[(i * 7) % words.length]).join(' ');
const tool = (name) => ({
  name,
  description: `${name}: ${filler(60)}`,
  input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
});

// A session label, as Claude Code sends its session id: the report groups the turns by it.
const anthropic = new Anthropic({ maxRetries: 0, defaultHeaders: { 'x-cacheward-session': 'sdk-agent' } });
const openai = new OpenAI({ maxRetries: 0 });
const system = [
  { type: 'text', text: `You are a coding agent. ${filler(2500)}`, cache_control: { type: 'ephemeral' } },
];
const messages = [{ role: 'user', content: 'Fix the failing test.' }];
const tools = [tool('Read'), tool('Edit'), tool('Bash')];

async function turn(extra = {}) {
  const body = { model: 'claude-opus-5', max_tokens: 64, system, tools, messages, ...extra };
  const reply = await anthropic.messages.create(body);
  messages.push({ role: 'assistant', content: reply.content });
  messages.push({ role: 'user', content: `Continue (${messages.length}).` });
  return reply.usage;
}

console.log(`base urls: ${process.env.ANTHROPIC_BASE_URL} ${process.env.OPENAI_BASE_URL}`);
console.log(`keys: ${process.env.ANTHROPIC_API_KEY?.includes('cacheward-sim') ? 'placeholder' : 'own'}`);

if (process.argv[2] === '--wait-for-signal') {
  await turn();
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    process.on(sig, async () => {
      await turn();
      console.log(`got ${sig}`);
      process.exit({ SIGTERM: 42, SIGINT: 43, SIGHUP: 44 }[sig]);
    });
  }
  console.log('ready');
  setInterval(() => {}, 1000);
} else {
  await turn();
  // Streamed, as agents do.
  const stream = anthropic.messages.stream({
    model: 'claude-opus-5',
    max_tokens: 64,
    system,
    tools,
    messages,
  });
  const streamed = await stream.finalMessage();
  messages.push({ role: 'assistant', content: streamed.content });
  messages.push({ role: 'user', content: 'Now search the code.' });
  // A tool is loaded mid-session: tools[] changes at index 1, and everything after it is written again.
  tools.splice(1, 0, tool('Grep'));
  await turn();
  await turn();
  const chat = await openai.chat.completions.create({
    model: 'gpt-5.4',
    messages: [
      { role: 'system', content: filler(1500) },
      { role: 'user', content: 'hello' },
    ],
  });
  const resp = await openai.responses.create({
    model: 'gpt-5.6',
    instructions: filler(1500),
    input: 'hello',
  });
  console.log(
    `agent done: ${chat.choices[0]?.message?.content ? 'chat ok' : 'chat empty'}, ${resp.output_text ? 'responses ok' : 'responses empty'}`,
  );
  process.exit(Number(process.argv[2] ?? 0));
}
