import type { GatewayRequest } from '../http/request-context';
import { createLogger } from './logger';
import { RequestLogger } from './request-logger';

/** The process logger (createLogger, as main.ts makes it) writing its lines into a list. */
function rig() {
  const lines: string[] = [];
  const pino = createLogger('info', { write: (s: string) => void lines.push(s) });
  return { pino, lines, logger: new RequestLogger({ pino }) };
}

const request = (over: Partial<GatewayRequest['facts']> = {}) =>
  ({
    method: 'POST',
    caller: { orgId: 'acme', keyId: 'acme-rw' },
    facts: { requestId: 'req-1', startedAt: 0n, route: '/v1/chat/completions', provider: 'openai', model: 'gpt-4o-mini', fallbackUsed: false, ...over },
  }) as unknown as GatewayRequest;

/** A line without its time, which differs between two writes. */
const timeless = (line: string) => line.replace(/"time":"[^"]*",/, '');

describe('RequestLogger', () => {
  it('writes the access line the process logger itself writes for the same fields, byte for byte but the time', () => {
    const { pino, lines, logger } = rig();
    logger.access(request(), 200, 1.23456);
    pino.info(
      { req_id: 'req-1', method: 'POST', route: '/v1/chat/completions', status: 200, latency_ms: 1.235, org_id: 'acme', key_id: 'acme-rw', provider: 'openai', model: 'gpt-4o-mini', fallback_used: false, error_code: undefined },
      'request',
    );
    expect(lines).toHaveLength(2);
    expect(timeless(lines[0])).toBe(timeless(lines[1]));
    expect(JSON.parse(lines[0])).toMatchObject({ level: 'info', service: 'gateway', req_id: 'req-1', status: 200, latency_ms: 1.235, key_id: 'acme-rw', msg: 'request' });
  });

  it('leaves out what the request did not get to (no caller, no served target) and keeps an error code', () => {
    const { lines, logger } = rig();
    const req = request({ provider: undefined, model: undefined, fallbackUsed: undefined, errorCode: 'invalid_api_key' });
    (req as { caller?: unknown }).caller = undefined;
    logger.access(req, 401, 0.5);
    const line = JSON.parse(lines[0]);
    expect(line).toMatchObject({ status: 401, error_code: 'invalid_api_key' });
    for (const k of ['org_id', 'key_id', 'provider', 'model', 'fallback_used']) expect(line).not.toHaveProperty(k);
  });

  it('still censors a top-level redacted name on its line, as the process logger does', () => {
    const { lines, logger } = rig();
    // The line has no such field today; were one added under a redacted name, it would not leak.
    (logger as unknown as { line: { info(o: object, m: string): void } }).line.info({ key: 'gw-secret', authorization: 'Bearer x' }, 'request');
    expect(lines[0]).not.toContain('gw-secret');
    expect(JSON.parse(lines[0])).toMatchObject({ key: '[redacted]', authorization: '[redacted]' });
  });
});
