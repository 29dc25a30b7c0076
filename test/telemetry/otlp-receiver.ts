// A small OTLP/HTTP receiver for tests: accepts the JSON encoding of ExportTraceServiceRequest and
// ExportMetricsServiceRequest on /v1/traces and /v1/metrics (loopback only) and keeps what came.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
};
type KeyValue = { key: string; value: AnyValue };

export type Attr = string | number | boolean | Attr[];

export interface ReceivedSpan {
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Record<string, Attr>;
  status?: { code?: number; message?: string };
  resource: Record<string, Attr>;
}

export interface ReceivedPoint {
  metric: string;
  unit?: string;
  attributes: Record<string, Attr>;
  /** Sums and gauges: the value; histograms: the count and sum. */
  value?: number;
  count?: number;
  sum?: number;
}

function attrValue(v: AnyValue): Attr {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(attrValue);
  return '';
}

export const attrs = (list: KeyValue[] | undefined): Record<string, Attr> =>
  Object.fromEntries((list ?? []).map((kv) => [kv.key, attrValue(kv.value)]));

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** The points of the latest metrics export (cumulative: it holds the totals). */
  readonly points: ReceivedPoint[];
  exports: number;
  /** Content types the exporter used. */
  contentTypes: Set<string>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  let points: ReceivedPoint[] = [];
  let exports = 0;
  const contentTypes = new Set<string>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      contentTypes.add(String(req.headers['content-type']));
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{"error":"this receiver takes the OTLP JSON encoding"}');
        return;
      }
      if (req.url === '/v1/traces') {
        for (const rs of (body.resourceSpans as Array<Record<string, unknown>>) ?? []) {
          const resource = attrs((rs.resource as { attributes?: KeyValue[] })?.attributes);
          for (const ss of (rs.scopeSpans as Array<{ spans?: Array<Record<string, unknown>> }>) ?? [])
            for (const s of ss.spans ?? [])
              spans.push({
                name: s.name as string,
                kind: s.kind as number,
                startTimeUnixNano: String(s.startTimeUnixNano),
                endTimeUnixNano: String(s.endTimeUnixNano),
                attributes: attrs(s.attributes as KeyValue[]),
                ...(s.status ? { status: s.status as ReceivedSpan['status'] } : {}),
                resource,
              });
        }
      } else if (req.url === '/v1/metrics') {
        exports++;
        points = [];
        for (const rm of (body.resourceMetrics as Array<Record<string, unknown>>) ?? [])
          for (const sm of (rm.scopeMetrics as Array<{ metrics?: Array<Record<string, unknown>> }>) ?? [])
            for (const m of sm.metrics ?? []) {
              const data = (m.sum ?? m.gauge ?? m.histogram) as {
                dataPoints?: Array<Record<string, unknown>>;
              };
              for (const p of data?.dataPoints ?? [])
                points.push({
                  metric: m.name as string,
                  ...(m.unit ? { unit: m.unit as string } : {}),
                  attributes: attrs(p.attributes as KeyValue[]),
                  ...(p.asDouble !== undefined || p.asInt !== undefined
                    ? { value: Number(p.asDouble ?? p.asInt) }
                    : {}),
                  ...(p.count !== undefined ? { count: Number(p.count), sum: Number(p.sum) } : {}),
                });
            }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    get points() {
      return points;
    },
    get exports() {
      return exports;
    },
    contentTypes,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
