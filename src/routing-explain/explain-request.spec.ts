import { thrownBy } from '../../test/support/kit';
import { GatewayError } from '../common/errors/gateway-error';
import { parseExplainBody } from './explain-request';

const request = { model: 'auto', messages: [{ role: 'user', content: 'hi' }] };

function failure(body: unknown): { code: string; param?: string; message: string } {
  const { code, param, message } = thrownBy(() => parseExplainBody(body), GatewayError);
  return { code, param, message };
}

describe('parseExplainBody', () => {
  it('accepts a chat body with and without headers', () => {
    const a = parseExplainBody({ request });
    expect(a.call.model).toBe('auto');
    expect(a.call.request.messages).toEqual([{ role: 'user', content: 'hi' }]);
    expect(a.headers).toEqual({});
    expect(a.sessionId).toBeNull();
    const b = parseExplainBody({ request, headers: { 'X-Team': 'blue', 'Gateway-Session-Id': 'sess-1' } });
    expect(b.headers).toEqual({ 'X-Team': 'blue', 'Gateway-Session-Id': 'sess-1' });
    expect(b.sessionId).toBe('sess-1');
  });

  it('sanitises headers before anything else sees them', () => {
    const r = parseExplainBody({ request, headers: { Authorization: 'Bearer x', 'x-forwarded-for': '1.2.3.4', HOST: 'h', 'x-real-ip': '5', keep: 'me' } });
    expect(r.headers).toEqual({ keep: 'me' });
  });

  it.each([
    ['not an object', [request], undefined],
    ['null', null, undefined],
    ['a string', 'request', undefined],
    ['an unknown top-level key', { request, extra: 1 }, 'extra'],
    ['a misspelt key', { requests: request }, 'requests'],
    ['request missing', { headers: {} }, 'request'],
    ['request not an object', { request: 'hello' }, 'request'],
    ['request an array', { request: [request] }, 'request'],
    ['headers not an object', { request, headers: 'a: b' }, 'headers'],
    ['headers an array', { request, headers: [['a', 'b']] }, 'headers'],
    ['headers null', { request, headers: null }, 'headers'],
    ['a header value a number', { request, headers: { 'x-n': 1 } }, 'headers.x-n'],
    ['a header value an array', { request, headers: { 'x-n': ['a'] } }, 'headers.x-n'],
    ['an invalid session id', { request, headers: { 'gateway-session-id': 'has space' } }, 'headers.gateway-session-id'],
  ])('400 invalid_body: %s', (_, body, param) => {
    const f = failure(body);
    expect(f.code).toBe('invalid_body');
    expect(f.param).toBe(param);
  });

  it('re-throws the chat validator as invalid_body with the param under request.', () => {
    expect(failure({ request: { messages: [] } })).toMatchObject({ code: 'invalid_body', param: 'request.model' });
    expect(failure({ request: { model: 'auto', messages: [{ role: 'user', content: 'x' }], temperature: 9 } })).toMatchObject({
      code: 'invalid_body',
      param: 'request.temperature',
    });
    expect(failure({ request: { model: 'auto', messages: [{ role: 'wizard', content: 'x' }] } })).toMatchObject({
      code: 'invalid_body',
      param: 'request.messages.0.role',
    });
    expect(failure({ request: { ...request, colour: 'red' } })).toMatchObject({ code: 'invalid_body', param: 'request.colour' });
  });

  it('never quotes prompt content in its messages', () => {
    const marker = 'PROMPT-MARKER-EXPLAIN-REQ-5521';
    for (const body of [
      { request: { model: 'auto', messages: [{ role: 'user', content: marker }], temperature: 'hot' } },
      { request: { model: 'auto', messages: [{ role: 'wizard', content: marker }] } },
      { request: { model: 'auto', messages: [{ role: 'user', content: marker }] }, extra: true },
      { request: { model: 'auto', messages: [{ role: 'user', content: marker }] }, headers: { a: 1 } },
    ]) {
      expect(JSON.stringify(failure(body))).not.toContain(marker);
    }
  });
});
