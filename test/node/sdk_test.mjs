// Real clients that nobody here wrote stream through the real tokentap binary from the simulator:
// the official OpenAI and Anthropic Node SDKs (only their base URL changed) and `curl -N`.
//
// The simulator reports an FNV-1a digest of the text it generated (x-sim-content-fnv); each client
// must reassemble exactly that text from the stream it received through the proxy.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const BIN = process.env.TOKENTAP_BIN;
if (!BIN) throw new Error('TOKENTAP_BIN must point at the tokentap binary');

const children = [];
let proxyUrl;
let limitedUrl;  // a proxy whose admission allows one stream at a time per tenant
let proxyLog = '';

function start(args, readyKey) {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${args[0]} did not become ready: ${out}`)), 10000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(new RegExp(`${readyKey}=([^\\s]+)`));
      if (m) {
        clearTimeout(timer);
        resolve({ child, addr: m[1] });
      }
    });
    child.stderr.on('data', (d) => { if (readyKey === 'proxy') proxyLog += d; });
    child.on('exit', (code) => reject(new Error(`${args[0]} exited with ${code}: ${out}`)));
  });
}

function fnv1a(text) {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(text)) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, '0');
}

const simHeaders = {
  'x-sim-tokens': '40',
  'x-sim-reasoning-tokens': '12',
  'x-sim-ttft-ms': '30',
  'x-sim-itl-ms': '3',
};

before(async () => {
  const sim = await start(['sim', '--listen', '127.0.0.1:0'], 'sim');
  const proxy = await start(
    ['proxy', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--threads', '2',
      '--upstream', `http://${sim.addr}`],
    'proxy');
  proxyUrl = `http://${proxy.addr}`;
  const dir = mkdtempSync(join(tmpdir(), 'tokentap-sdk-'));
  const config = join(dir, 'limited.yaml');
  writeFileSync(config, [
    'upstreams: {sim: {url: "http://' + sim.addr + '"}}',
    'tenants: {header: x-tokentap-tenant}',
    'admission: [{name: one-stream, scope: tenant, max_concurrent: 1}]',
    '',
  ].join('\n'));
  const limited = await start(
    ['proxy', '--config', config, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'], 'proxy');
  limitedUrl = `http://${limited.addr}`;
});

after(() => {
  for (const c of children) c.kill('SIGTERM');
});

test('OpenAI SDK streams a chat completion through the proxy', async () => {
  const client = new OpenAI({ baseURL: `${proxyUrl}/v1`, apiKey: 'sk-test-openai-secret', defaultHeaders: simHeaders });
  const { data: stream, response } = await client.chat.completions
    .create({
      model: 'sim-reasoner',
      messages: [{ role: 'user', content: 'Where does my latency go?' }],
      stream: true,
      stream_options: { include_usage: true },
    })
    .withResponse();
  let content = '';
  let reasoning = '';
  let chunks = 0;
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    chunks++;
    const delta = chunk.choices[0]?.delta ?? {};
    content += delta.content ?? '';
    reasoning += delta.reasoning_content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('x-accel-buffering'), 'no');
  assert.equal(fnv1a(content), response.headers.get('x-sim-content-fnv'), 'content differs from what the simulator sent');
  assert.equal(fnv1a(reasoning), response.headers.get('x-sim-reasoning-fnv'));
  assert.equal(chunks, 1 + 12 + 40 + 1 + 1);
  assert.equal(finish, 'stop');
  assert.equal(usage.completion_tokens, 52);
  assert.equal(usage.completion_tokens_details.reasoning_tokens, 12);
});

test('OpenAI SDK non-streaming completion through the proxy', async () => {
  const client = new OpenAI({ baseURL: `${proxyUrl}/v1`, apiKey: 'sk-test-openai-secret', defaultHeaders: simHeaders });
  const { data, response } = await client.chat.completions
    .create({ model: 'sim-small', messages: [{ role: 'user', content: 'plain please' }] })
    .withResponse();
  assert.equal(fnv1a(data.choices[0].message.content), response.headers.get('x-sim-content-fnv'));
  assert.equal(data.usage.completion_tokens, 52);
});

test('OpenAI SDK surfaces a proxy error (unreachable upstream) as an APIError', async () => {
  const client = new OpenAI({ baseURL: `${proxyUrl}/v1`, apiKey: 'sk-test', maxRetries: 0,
    defaultHeaders: { 'x-sim-status': '503' } });
  await assert.rejects(
    client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
    (err) => err.status === 503);
});

test('Anthropic SDK streams a message with thinking through the proxy', async () => {
  const client = new Anthropic({ baseURL: proxyUrl, apiKey: 'sk-ant-test-secret', defaultHeaders: simHeaders });
  const { data: stream, response } = await client.messages
    .create({
      model: 'claude-sim',
      max_tokens: 1024,
      thinking: { type: 'enabled', budget_tokens: 512 },
      messages: [{ role: 'user', content: 'Think, then answer.' }],
      stream: true,
    })
    .withResponse();
  let text = '';
  let thinking = '';
  let outputTokens = 0;
  let stop = null;
  for await (const event of stream) {
    if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
    if (event.type === 'content_block_delta' && event.delta.type === 'thinking_delta') thinking += event.delta.thinking;
    if (event.type === 'message_delta') {
      outputTokens = event.usage.output_tokens;
      stop = event.delta.stop_reason;
    }
  }
  assert.equal(response.status, 200);
  assert.equal(fnv1a(text), response.headers.get('x-sim-content-fnv'));
  assert.equal(fnv1a(thinking), response.headers.get('x-sim-reasoning-fnv'));
  assert.equal(outputTokens, 52);
  assert.equal(stop, 'end_turn');
});

test('Anthropic SDK MessageStream helper assembles the final message', async () => {
  const client = new Anthropic({ baseURL: proxyUrl, apiKey: 'sk-ant-test-secret', defaultHeaders: simHeaders });
  const stream = client.messages.stream({
    model: 'claude-sim',
    max_tokens: 1024,
    messages: [{ role: 'user', content: 'Stream helper.' }],
  });
  let streamed = '';
  stream.on('text', (t) => { streamed += t; });
  const msg = await stream.finalMessage();
  const text = msg.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  assert.equal(text, streamed);
  assert.ok(text.length > 0);
  assert.equal(msg.usage.output_tokens, 52);
});

// Admission refuses a second concurrent stream of one tenant with 429 and `retry-after: 1`: the
// SDKs raise their RateLimitError, and their built-in retry waits as told and then succeeds
// (the first stream, ~0.5 s long, has ended by then).
const slowHeaders = { 'x-tokentap-tenant': 'sdk', 'x-sim-tokens': '25', 'x-sim-itl-ms': '20', 'x-sim-ttft-ms': '5' };
const quickHeaders = { 'x-tokentap-tenant': 'sdk', 'x-sim-tokens': '3', 'x-sim-itl-ms': '1', 'x-sim-ttft-ms': '1' };

// A response header of an SDK error (a Headers object in newer SDKs, a plain record in older).
const headerOf = (err, name) => (typeof err.headers?.get === 'function' ? err.headers.get(name) : err.headers?.[name]);

// Runs `body` while a slow stream holds the tenant's slot: from its first event on (a fixed wait
// raced the stream's start on a loaded machine, and the "refused" request went through).
async function whileAStreamRuns(startSlow, body) {
  let started;
  const first = new Promise((r) => { started = r; });
  const slow = startSlow(started);
  await Promise.race([first, slow]);
  try {
    return await body();
  } finally {
    await slow;
  }
}

test('OpenAI SDK: an admission refusal is a RateLimitError, and its retry honours retry-after', async () => {
  const slowClient = new OpenAI({ baseURL: `${limitedUrl}/v1`, apiKey: 'sk-a', defaultHeaders: slowHeaders });
  const slowStream = async (started = () => {}) => {
    const s = await slowClient.chat.completions.create({ model: 'sim-small', stream: true, messages: [{ role: 'user', content: 'slow' }] });
    for await (const _ of s) started();
  };
  const noRetry = new OpenAI({ baseURL: `${limitedUrl}/v1`, apiKey: 'sk-a', maxRetries: 0, defaultHeaders: quickHeaders });
  await whileAStreamRuns(slowStream, () => assert.rejects(
    noRetry.chat.completions.create({ model: 'sim-small', messages: [{ role: 'user', content: 'x' }] }),
    (err) => err instanceof OpenAI.RateLimitError && err.status === 429 &&
      headerOf(err, 'retry-after') === '1' && headerOf(err, 'x-tokentap-rejected-by') === 'one-stream'));
  const retrying = new OpenAI({ baseURL: `${limitedUrl}/v1`, apiKey: 'sk-a', maxRetries: 2, defaultHeaders: quickHeaders });
  await whileAStreamRuns(slowStream, async () => {
    const t0 = performance.now();
    const done = await retrying.chat.completions.create({ model: 'sim-small', messages: [{ role: 'user', content: 'x' }] });
    const waited = performance.now() - t0;
    assert.ok(done.choices[0].message.content.length > 0);
    assert.ok(waited >= 950, `retried after ${waited} ms, not after the 1 s retry-after`);
  });
});

test('Anthropic SDK: an admission refusal is a RateLimitError, and its retry honours retry-after', async () => {
  const slowClient = new Anthropic({ baseURL: limitedUrl, apiKey: 'sk-ant-a', defaultHeaders: slowHeaders });
  const slowStream = async (started = () => {}) => {
    const s = await slowClient.messages.create({ model: 'claude-sim', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'slow' }] });
    for await (const _ of s) started();
  };
  const noRetry = new Anthropic({ baseURL: limitedUrl, apiKey: 'sk-ant-a', maxRetries: 0, defaultHeaders: quickHeaders });
  await whileAStreamRuns(slowStream, () => assert.rejects(
    noRetry.messages.create({ model: 'claude-sim', max_tokens: 64, messages: [{ role: 'user', content: 'x' }] }),
    (err) => err instanceof Anthropic.RateLimitError && err.status === 429 &&
      headerOf(err, 'retry-after') === '1'));
  const retrying = new Anthropic({ baseURL: limitedUrl, apiKey: 'sk-ant-a', maxRetries: 2, defaultHeaders: quickHeaders });
  await whileAStreamRuns(slowStream, async () => {
    const t0 = performance.now();
    const msg = await retrying.messages.create({ model: 'claude-sim', max_tokens: 64, messages: [{ role: 'user', content: 'x' }] });
    const waited = performance.now() - t0;
    assert.ok(msg.content.length > 0);
    assert.ok(waited >= 950, `retried after ${waited} ms, not after the 1 s retry-after`);
  });
});

test('curl -N shows events arriving one by one', async () => {
  const body = JSON.stringify({ model: 'sim-small', stream: true, messages: [{ role: 'user', content: 'tick' }] });
  const curl = spawn('curl', ['-sN', `${proxyUrl}/v1/chat/completions`,
    '-H', 'content-type: application/json', '-H', 'authorization: Bearer sk-curl-secret',
    '-H', 'x-sim-tokens: 10', '-H', 'x-sim-ttft-ms: 50', '-H', 'x-sim-itl-ms: 120',
    '-d', body]);
  const arrivals = [];
  let text = '';
  const t0 = performance.now();
  curl.stdout.on('data', (d) => {
    const now = performance.now() - t0;
    for (const line of d.toString().split('\n')) if (line.startsWith('data: ')) arrivals.push(now);
    text += d;
  });
  const code = await new Promise((resolve) => curl.on('exit', resolve));
  assert.equal(code, 0);
  assert.ok(text.trimEnd().endsWith('data: [DONE]'), text);
  // 10 tokens 120 ms apart: they must trickle in over ~1.1 s, not arrive together at the end.
  const tokenArrivals = arrivals.slice(1, 11);
  assert.equal(tokenArrivals.length, 10);
  const spread = tokenArrivals[9] - tokenArrivals[0];
  assert.ok(spread > 9 * 120 * 0.8, `token arrivals spread over only ${spread} ms`);
  const distinct = new Set(tokenArrivals.map((t) => Math.round(t / 40))).size;
  assert.ok(distinct >= 9, `only ${distinct} distinct arrival times`);
});

test('no secret reaches the proxy log', () => {
  assert.ok(proxyLog.includes('access '), 'the proxy wrote no access log');
  for (const secret of ['sk-test-openai-secret', 'sk-ant-test-secret', 'sk-curl-secret']) {
    assert.ok(!proxyLog.includes(secret), `${secret} found in the proxy log`);
  }
});
