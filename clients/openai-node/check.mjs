// Talks to a running appkb with OpenAI's official JavaScript SDK and prints
// what it got as one JSON object; handlers/openai_node_test.go starts the
// server and checks the output.
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.APPKB_BASE_URL,
  apiKey: process.env.APPKB_API_KEY,
  maxRetries: 0,
});

const messages = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi' },
  { role: 'assistant', content: 'Hello!' },
  { role: 'user', content: 'Say hello' },
];

const out = {};

const blocking = await client.chat.completions.create({ model: 'node-app', messages, temperature: 0.5 });
out.blocking = {
  id: blocking.id,
  model: blocking.model,
  content: blocking.choices[0].message.content,
  finish: blocking.choices[0].finish_reason,
  usage: blocking.usage,
};

const stream = await client.chat.completions.create({
  model: 'node-app', messages, stream: true, stream_options: { include_usage: true },
});
out.pieces = [];
for await (const chunk of stream) {
  const piece = chunk.choices[0]?.delta?.content;
  if (piece) out.pieces.push(piece);
  if (chunk.usage) out.streamUsage = chunk.usage;
}

const runner = client.chat.completions.stream({ model: 'node-app', messages });
const final = await runner.finalChatCompletion();
out.helper = { content: final.choices[0].message.content, finish: final.choices[0].finish_reason };

const models = await client.models.list();
out.models = models.data.map((m) => m.id);

try {
  await client.models.retrieve('gpt-4o');
  out.missing = 'found';
} catch (err) {
  out.missing = { status: err.status, code: err.code, type: err.type };
}

console.log(JSON.stringify(out));
