import { createHmac } from 'node:crypto';
import { Secret } from '../config/secret';
import { ApiKeyHasher } from './api-key-hasher';

describe('ApiKeyHasher', () => {
  const expected = (key: string) => createHmac('sha256', 'pepper').update(key).digest('hex');

  it('is HMAC-SHA256 with the pepper, the same on repeated calls and after the memo evicted the key', () => {
    const hasher = new ApiKeyHasher(new Secret('pepper'), 2);
    expect(hasher.hash('gw-a')).toBe(expected('gw-a'));
    expect(hasher.hash('gw-a')).toBe(expected('gw-a'));
    hasher.hash('gw-b');
    hasher.hash('gw-c'); // evicts gw-a (bound 2)
    expect(hasher.hash('gw-a')).toBe(expected('gw-a'));
    expect(hasher.hash('gw-c')).toBe(expected('gw-c'));
    expect(new ApiKeyHasher(new Secret('other')).hash('gw-a')).not.toBe(expected('gw-a'));
  });
});
