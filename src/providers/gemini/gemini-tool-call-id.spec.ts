import { makeToolCallId, thoughtSignatureOf } from './gemini-tool-call-id';

describe('gemini tool-call ids', () => {
  it('carry a thought signature through the id and give it back as standard base64', () => {
    for (const sig of ['CiQB++++ZmFrZf/+c2lnbg==', 'CiQB++++ZmFrZf/+c2ln', 'EjQKMgEc/c2lnbmF0dXJl+xyz=']) {
      const id = makeToolCallId(sig);
      expect(id).toMatch(/^call_[0-9a-f]{24}__ts_[A-Za-z0-9_-]+$/);
      expect(thoughtSignatureOf(id)).toBe(sig);
    }
  });

  it('are unique, and an id without a signature (or made elsewhere) carries none', () => {
    const a = makeToolCallId();
    expect(a).toMatch(/^call_[0-9a-f]{24}$/);
    expect(a).not.toBe(makeToolCallId());
    expect(thoughtSignatureOf(a)).toBeUndefined();
    expect(thoughtSignatureOf('call_abc')).toBeUndefined();
    expect(thoughtSignatureOf('toolu_01__ts_')).toBeUndefined();
    expect(thoughtSignatureOf(undefined)).toBeUndefined();
  });
});
