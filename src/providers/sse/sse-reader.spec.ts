import { readSse, SseEvent } from './sse-reader';

async function* bytes(parts: Buffer[]): AsyncGenerator<Buffer> {
  for (const p of parts) yield p;
}

async function events(parts: Buffer[]): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const e of readSse(bytes(parts))) out.push(e);
  return out;
}

describe('readSse decoding', () => {
  it('drops a byte-order mark at the start of the stream (also when it arrives split), and only there', async () => {
    const body = Buffer.from('\ufeffdata: a\n\ndata: \ufeffb\n\n', 'utf8');
    expect(await events([body])).toEqual([
      { event: undefined, data: 'a' },
      { event: undefined, data: '\ufeffb' },
    ]);
    expect(await events([body.subarray(0, 1), body.subarray(1, 2), body.subarray(2)])).toEqual([
      { event: undefined, data: 'a' },
      { event: undefined, data: '\ufeffb' },
    ]);
  });

  it('keeps a UTF-8 character split across reads whole', async () => {
    const body = Buffer.from('data: olá 😀\n\n', 'utf8');
    const cut = body.indexOf(Buffer.from('😀')) + 2;
    expect(await events([body.subarray(0, cut), body.subarray(cut)])).toEqual([{ event: undefined, data: 'olá 😀' }]);
  });
});
