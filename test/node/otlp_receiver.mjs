// A strict OTLP/HTTP trace receiver for the tests (DESIGN.md §12): it decodes every
// ExportTraceServiceRequest with protobufjs and the official opentelemetry-proto files (those
// @elastic/mockotlpserver bundles), or as OTLP/JSON, gzip-compressed or not, refuses what does
// not decode (400), and prints each decoded request as one JSON line: {"content_type",
// "content_encoding", "sent_bytes", "resources": [...], "spans": [...]} with ids in hex and
// 64-bit numbers as strings.  Each raw body is also saved under RECEIVER_DIR (when set) for a
// second decoder (protoc).  RECEIVER_FAIL=N answers the first N requests with RECEIVER_STATUS
// (default 503) and `Retry-After: RECEIVER_RETRY_AFTER` (default 1).
//
//   node otlp_receiver.mjs      → prints "listening PORT", then a line per request
import http from 'node:http';
import zlib from 'node:zlib';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const protobuf = require('protobufjs');
const here = path.dirname(fileURLToPath(import.meta.url));
const protoRoot = path.join(path.dirname(require.resolve('@elastic/mockotlpserver/package.json')));
const root = new protobuf.Root();
root.resolvePath = (_origin, target) => path.join(protoRoot, target);
root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', { keepCase: false });
const Request = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
const Response = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse');

const hex = (b) => Buffer.from(b).toString('hex');
let failLeft = Number(process.env.RECEIVER_FAIL || 0);
const failStatus = Number(process.env.RECEIVER_STATUS || 503);
let n = 0;

function value(v) {
  if (v == null) return null;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  if ('intValue' in v) return String(v.intValue);
  if ('doubleValue' in v) return v.doubleValue;
  if ('arrayValue' in v) return (v.arrayValue.values || []).map(value);
  return v;
}
const attrs = (list) => Object.fromEntries((list || []).map((kv) => [kv.key, value(kv.value)]));

// One decoded span, the same shape whichever encoding it came in.
function span(s, fromJson) {
  const id = (x) => (x == null || x === '' ? '' : fromJson ? String(x).toLowerCase() : hex(x));
  return {
    traceId: id(s.traceId), spanId: id(s.spanId), parentSpanId: id(s.parentSpanId),
    traceState: s.traceState || '', flags: Number(s.flags || 0), name: s.name,
    kind: Number(s.kind), start: String(s.startTimeUnixNano), end: String(s.endTimeUnixNano),
    attributes: attrs(s.attributes),
    events: (s.events || []).map((e) => ({ name: e.name, time: String(e.timeUnixNano), attributes: attrs(e.attributes) })),
    status: { code: Number((s.status && s.status.code) || 0), message: (s.status && s.status.message) || '' },
  };
}

function decode(type, body) {
  if (type === 'application/x-protobuf') {
    const err = Request.verify(Request.decode(body));
    if (err) throw new Error(err);
    const msg = Request.toObject(Request.decode(body), { longs: String, defaults: false });
    return { msg, fromJson: false };
  }
  if (type === 'application/json') return { msg: JSON.parse(body.toString('utf8')), fromJson: true };
  throw new Error(`unsupported content-type ${type}`);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    if (req.method !== 'POST' || req.url !== '/v1/traces') {
      res.writeHead(404).end();
      return;
    }
    if (failLeft > 0) {
      failLeft--;
      process.stdout.write(JSON.stringify({ refused: failStatus }) + '\n');
      res.writeHead(failStatus, { 'retry-after': process.env.RECEIVER_RETRY_AFTER || '1' }).end();
      return;
    }
    const type = req.headers['content-type'];
    const encoding = req.headers['content-encoding'] || '';
    try {
      // A gzip body must say so (Content-Encoding), as the OTLP/HTTP specification has it.
      if (encoding !== '' && encoding !== 'gzip') throw new Error(`unsupported content-encoding ${encoding}`);
      const body = encoding === 'gzip' ? zlib.gunzipSync(raw) : raw;
      const { msg, fromJson } = decode(type, body);
      if (process.env.RECEIVER_DIR)
        fs.writeFileSync(path.join(process.env.RECEIVER_DIR, `request-${n}.${fromJson ? 'json' : 'bin'}`), body);
      n++;
      const spans = [];
      const resources = [];
      for (const rs of msg.resourceSpans || []) {
        resources.push(attrs(rs.resource && rs.resource.attributes));
        for (const ss of rs.scopeSpans || []) for (const s of ss.spans || []) spans.push(span(s, fromJson));
      }
      process.stdout.write(JSON.stringify({ content_type: type, content_encoding: encoding, sent_bytes: raw.length, headers: { authorization: req.headers.authorization || '', 'x-tenant': req.headers['x-tenant'] || '' }, resources, spans }) + '\n');
      if (fromJson) {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } else {
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(Buffer.from(Response.encode({}).finish()));
      }
    } catch (e) {
      process.stdout.write(JSON.stringify({ error: String(e.message || e) }) + '\n');
      res.writeHead(400).end();
    }
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${server.address().port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
