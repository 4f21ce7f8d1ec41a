import { createHmac, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EnvConfig } from '../config/env';
import { Secret } from '../config/secret';
import { setBounded } from '../common/bounded-map';

/**
 * API keys are stored as HMAC-SHA256(pepper, key) (docs/architecture.md "API keys stored as a
 * peppered hash"): a leaked table cannot be checked against guesses without the pepper. Embedded: the pepper is generated once and kept in the data
 * dir; with DATABASE_URL it must be given (env validation enforces that), so replicas agree.
 */
export class ApiKeyHasher {
  /**
   * Recent key → hash, so a key's HMAC is computed once, not on every request (≈ 10 µs of CPU per
   * request otherwise). Bounded, oldest out first; it holds only what the process already sees in every
   * request's Authorization header, and is never logged or written anywhere.
   */
  private readonly recent = new Map<string, string>();

  constructor(
    private readonly pepper: Secret,
    private readonly maxRecent = 10_000,
  ) {}

  static fromEnv(env: EnvConfig): ApiKeyHasher {
    if (env.keyPepper) return new ApiKeyHasher(env.keyPepper);
    const file = join(env.dataDir, 'key-pepper');
    if (!existsSync(file)) {
      mkdirSync(env.dataDir, { recursive: true });
      writeFileSync(file, randomBytes(32).toString('base64url'), { mode: 0o600, flag: 'wx' });
    }
    chmodSync(file, 0o600);
    return new ApiKeyHasher(new Secret(readFileSync(file, 'utf8').trim()));
  }

  hash(plainKey: string): string {
    const known = this.recent.get(plainKey);
    if (known !== undefined) return known;
    const hash = createHmac('sha256', this.pepper.reveal()).update(plainKey).digest('hex');
    setBounded(this.recent, plainKey, hash, this.maxRecent);
    return hash;
  }
}

/** A new random API key: `gw-` and 43 base64url characters (256 bits). */
export function generateApiKey(): string {
  return `gw-${randomBytes(32).toString('base64url')}`;
}

/** What may be shown of a key after creation: its first characters. */
export const keyPrefix = (plainKey: string): string => plainKey.slice(0, 7);
